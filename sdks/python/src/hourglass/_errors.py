"""The package's errors: what went wrong talking to a node, in classes a caller acts on."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})


class HourglassError(Exception):
    """Base of every error this package raises."""

    @property
    def is_retryable(self) -> bool:
        """Whether the same request may succeed later unchanged."""
        return False


class ApiError(HourglassError):
    """The node refused the request with its error body ``{"error": {"code", "message",
    "field"}}``. Nothing was changed."""

    __schema__ = ("Error.error",)
    __schema_fields__ = ("code", "message", "field")

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        """The HTTP status."""
        self.code = code
        """Stable and machine-readable: ``not_found``, ``invalid_field``, ``key_conflict``..."""
        self.message = message
        self.field = field
        """The JSON path of the culprit, e.g. ``schedule.timezone`` or ``jobs[3].target``."""
        self.retry_after = retry_after
        """Seconds the node asked to wait before retrying (its ``Retry-After``), if it said."""
        where = f" (at {field})" if field else ""
        super().__init__(f"http {status} {code}: {message}{where}")

    @property
    def is_retryable(self) -> bool:
        return self.status in RETRYABLE_STATUSES

    @property
    def is_not_found(self) -> bool:
        return self.status == 404


class HttpError(HourglassError):
    """A failed answer without the API's error body, e.g. from a proxy in front of the node."""

    def __init__(self, status: int, url: str, body: str, retry_after: float | None = None) -> None:
        self.status = status
        self.url = url
        self.body = body
        self.retry_after = retry_after
        super().__init__(f"http {status} from {url}")

    @property
    def is_retryable(self) -> bool:
        return self.status in RETRYABLE_STATUSES


class TransportError(HourglassError):
    """The request got no answer: connection refused or reset, timeout, TLS failure."""

    def __init__(self, url: str, cause: BaseException) -> None:
        self.url = url
        super().__init__(f"cannot reach {url}: {cause}")

    @property
    def is_retryable(self) -> bool:
        return True


class DecodeError(HourglassError):
    """A successful answer whose body is not the shape this package expects."""


class WebhookVerificationError(HourglassError):
    """A webhook request that is not a genuine, fresh delivery: a missing, repeated or malformed
    header, a bad signature, or a timestamp outside the tolerance. Answer it with 4xx (400 or
    401). The message says which check failed; it names headers, never their values."""


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds: delay-seconds, or an HTTP date (seconds from now)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    delta = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, delta)


def error_from_answer(
    status: int, url: str, body: bytes, retry_after: float | None
) -> HourglassError:
    """The error for a non-2xx answer."""
    import json

    try:
        data: Any = json.loads(body)
        error = data["error"]
        return ApiError(
            status,
            str(error["code"]),
            str(error.get("message", "")),
            error.get("field"),
            retry_after,
        )
    except (ValueError, KeyError, TypeError):
        return HttpError(status, url, body.decode("utf-8", "replace")[:500], retry_after)
