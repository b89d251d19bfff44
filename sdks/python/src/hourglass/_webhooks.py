"""Verifying webhook deliveries: the Standard Webhooks signature and the timestamp tolerance.

The node signs ``<webhook-id>.<webhook-timestamp>.<body>`` with HMAC-SHA256 keyed by the
namespace's ``whsec_`` secret (the base64 after the prefix, decoded), and sends
``webhook-signature: v1,<base64>``; during a secret rotation's overlap, two space-separated
signatures, one per secret. A delivery is genuine when any of them matches any secret the
receiver knows.

The ``hourglass-*`` headers are not covered by the signature. The job id and the due time are
also inside the signed ``webhook-id`` (``<job id without hyphens>_<due unix ms>``): the verifier
takes them from there and refuses a delivery whose headers disagree. The job type and the attempt
number come from their headers only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ._errors import WebhookVerificationError
from ._models import JSON, parse_instant

DEFAULT_TOLERANCE = 300.0
"""Seconds a delivery's timestamp may be from the receiver's clock (Standard Webhooks: 5 min)."""

HEADER_FIELDS: Mapping[str, str | None] = {
    "webhook-id": "delivery_id",
    "webhook-timestamp": "timestamp",
    "webhook-signature": None,
    "hourglass-job-id": "job_id",
    "hourglass-due-at": "due_at",
    "hourglass-attempt": "attempt",
    "hourglass-job-type": "type",
}
"""The headers of a delivery (the OpenAPI document's ``jobOccurrence`` webhook) and the
``Delivery`` field each one fills; ``None``: read to verify the delivery only."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DELIVERY_ID = re.compile(r"^([0-9a-f]{32})_(-?[0-9]+)$")


@dataclass(frozen=True)
class Delivery:
    """A verified webhook delivery."""

    delivery_id: str
    """The ``webhook-id``: identical on every retry of this occurrence. Deduplicate on it."""
    job_id: str
    type: str | None
    """The job's ``type`` (``hourglass-job-type``; not covered by the signature)."""
    attempt: int
    """1-based (``hourglass-attempt``; not covered by the signature)."""
    due_at: datetime
    """The occurrence's nominal due instant."""
    timestamp: int
    """When this attempt was sent (unix seconds, signed)."""
    payload: JSON
    """The job's payload, decoded (``None`` when the job has none)."""
    body: bytes = field(repr=False)
    """The raw body as signed."""


def _key(secret: str) -> bytes:
    encoded = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError("a signing secret is whsec_ followed by base64") from e
    if len(key) < 16:
        raise ValueError("a signing secret decodes to at least 16 bytes")
    return key


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value the node sends for this delivery with this secret."""
    mac = hmac.new(_key(secret), f"{delivery_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


class WebhookVerifier:
    """Checks that a request is a genuine, fresh delivery from the node.

    >>> verifier = WebhookVerifier(os.environ["HOURGLASS_SIGNING_SECRET"])
    >>> delivery = verifier.verify(request_body, request_headers)

    ``secrets`` may list several: during your own move to a new secret, give both.
    """

    def __init__(self, secrets: str | Iterable[str], *, tolerance: float = DEFAULT_TOLERANCE):
        listed = [secrets] if isinstance(secrets, str) else list(secrets)
        if not listed:
            raise ValueError("a verifier needs at least one secret")
        self._keys = [_key(s) for s in listed]
        self.tolerance = tolerance

    def __repr__(self) -> str:
        return f"WebhookVerifier(<{len(self._keys)} secret(s)>, tolerance={self.tolerance})"

    def verify(
        self,
        body: bytes | str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        *,
        now: float | None = None,
    ) -> Delivery:
        """The delivery, or ``WebhookVerificationError``. ``body`` must be the raw request body,
        byte for byte as received; ``headers`` any mapping or pairs (names in any case)."""
        raw = body.encode() if isinstance(body, str) else bytes(body)
        found = _lower(headers)
        delivery_id = _required(found, "webhook-id")
        stamp = _required(found, "webhook-timestamp")
        signatures = _required(found, "webhook-signature")
        try:
            timestamp = int(stamp)
        except ValueError:
            raise WebhookVerificationError("webhook-timestamp is not unix seconds") from None
        current = time.time() if now is None else now
        if timestamp < current - self.tolerance:
            raise WebhookVerificationError("webhook-timestamp is too old")
        if timestamp > current + self.tolerance:
            raise WebhookVerificationError("webhook-timestamp is in the future")
        signed = f"{delivery_id}.{stamp}.".encode() + raw
        if not self._matches(signed, signatures):
            raise WebhookVerificationError("no signature matches")
        return _delivery(delivery_id, timestamp, raw, found)

    def _matches(self, signed: bytes, header: str) -> bool:
        expected = [hmac.new(k, signed, hashlib.sha256).digest() for k in self._keys]
        for candidate in header.split():
            version, _, encoded = candidate.partition(",")
            if version != "v1":
                continue
            try:
                given = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                continue
            # Compare against every key without stopping early.
            if any([hmac.compare_digest(given, e) for e in expected]):
                return True
        return False


def _lower(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return {str(k).lower(): str(v) for k, v in pairs}


def _required(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if not value:
        raise WebhookVerificationError(f"missing header {name}")
    return value.strip()


def _delivery(delivery_id: str, timestamp: int, raw: bytes, headers: Mapping[str, str]) -> Delivery:
    match = _DELIVERY_ID.match(delivery_id)
    if match is None:
        raise WebhookVerificationError("webhook-id is not an hourglass delivery id")
    hex_id, due_ms = match.group(1), int(match.group(2))
    job_id = "-".join((hex_id[:8], hex_id[8:12], hex_id[12:16], hex_id[16:20], hex_id[20:]))
    due_at = _EPOCH + timedelta(milliseconds=due_ms)
    header_job = headers.get("hourglass-job-id")
    if header_job is not None and header_job.strip().lower() != job_id:
        raise WebhookVerificationError("hourglass-job-id does not match the signed webhook-id")
    header_due = headers.get("hourglass-due-at")
    if header_due is not None:
        try:
            agrees = parse_instant(header_due.strip()) == due_at
        except ValueError:
            agrees = False
        if not agrees:
            raise WebhookVerificationError("hourglass-due-at does not match the signed webhook-id")
    try:
        attempt = int(headers.get("hourglass-attempt", "1"))
    except ValueError:
        raise WebhookVerificationError("hourglass-attempt is not a number") from None
    try:
        payload: Any = json.loads(raw) if raw.strip() else None
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    return Delivery(
        delivery_id=delivery_id,
        job_id=job_id,
        type=headers.get("hourglass-job-type"),
        attempt=attempt,
        due_at=due_at,
        timestamp=timestamp,
        payload=payload,
        body=raw,
    )
