"""Verifying webhook deliveries: the Standard Webhooks signature and the timestamp tolerance.

The node signs ``<webhook-id>.<webhook-timestamp>.<body>`` with HMAC-SHA256 keyed by the
namespace's ``whsec_`` secret (the base64 after the prefix, decoded), and sends
``webhook-signature: v1,<base64>``; during a secret rotation's overlap, two space-separated
signatures, one per secret. A delivery is genuine when any of them matches any secret the
receiver knows.

That signature leaves the ``hourglass-*`` headers out, so a single delivery also carries
``hourglass-signature: v1,<base64>``: HMAC-SHA256, keyed by ``HMAC-SHA256(secret key,
b"hourglass-signature")``, of ``<webhook-id>\n<webhook-timestamp>\n<hourglass-job-id>\n
<hourglass-due-at>\n<hourglass-attempt>\n<hourglass-job-type or empty>\n<body>``. ``verify``
refuses a delivery unless both signatures match, so every field of the ``Delivery`` it answers is
the node's: a replay with an altered header is refused. The job id and the due time are also
inside the signed ``webhook-id`` (``<job id without hyphens>_<due unix ms>``) and must agree
with it.

A target with ``batch`` gets its deliveries several to a request (the ``jobOccurrenceBatch``
webhook): ``verify_batch`` checks the request and answers each item as a ``Delivery``. There every
fact is inside the signed body.
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
from typing import Any, Protocol, TypeAlias

from ._errors import WebhookVerificationError
from ._support import JSON, parse_instant

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
    "hourglass-batch-size": None,
    "hourglass-signature": None,
}
"""The headers of a delivery (the OpenAPI document's ``jobOccurrence`` and ``jobOccurrenceBatch``
webhooks) and the ``Delivery`` field each one fills; ``None``: read to verify the delivery only."""


class _HeaderItems(Protocol):
    """Anything with ``items()`` giving (name, value) pairs: a dict, a case-insensitive
    headers mapping (httpx, Starlette, Django, Werkzeug), an ``email.message.Message``."""

    def items(self) -> Iterable[tuple[str | bytes, object]]: ...


HeadersLike: TypeAlias = _HeaderItems | Iterable[tuple[str | bytes, object]] | None
"""The request headers ``verify`` takes: any mapping or object with ``items()`` (a dict, the
standard library's ``http.server`` ``self.headers``, a framework's case-insensitive headers),
or (name, value) pairs (ASGI's byte pairs too). Names in any case; a value may be a list of
values; ``None``: no headers."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DELIVERY_ID = re.compile(r"^([0-9a-f]{32})_(-?[0-9]+)$")
_BATCH_ID = re.compile(r"^batch_[0-9a-f]{32}$")


@dataclass(frozen=True)
class Delivery:
    """A verified webhook delivery."""

    delivery_id: str
    """The ``webhook-id`` (in a batch, the item's ``id``): identical on every retry of this
    occurrence. Deduplicate on it."""
    job_id: str
    type: str | None
    """The job's ``type`` (``hourglass-job-type``, signed by ``hourglass-signature``)."""
    attempt: int
    """1-based (``hourglass-attempt``, signed by ``hourglass-signature``)."""
    due_at: datetime
    """The occurrence's nominal due instant."""
    timestamp: int
    """When this attempt was sent (unix seconds, signed)."""
    payload: JSON
    """The job's payload, decoded (``None`` when the job has none)."""
    body: bytes = field(repr=False)
    """The raw body as signed (for an item of a batch, the whole batch's)."""


def _key(secret: str) -> bytes:
    encoded = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError("a signing secret is whsec_ followed by base64") from e
    if len(key) < 16:
        raise ValueError("a signing secret decodes to at least 16 bytes")
    return key


_METADATA_KEY_LABEL = b"hourglass-signature"
_METADATA_HEADERS = ("hourglass-job-id", "hourglass-due-at", "hourglass-attempt")


def _metadata_key(key: bytes) -> bytes:
    """The key of ``hourglass-signature``, derived from the secret's: a key of its own, so that
    neither signature can stand for the other."""
    return hmac.new(key, _METADATA_KEY_LABEL, hashlib.sha256).digest()


def _metadata_text(
    delivery_id: str, timestamp: str, headers: Mapping[str, str], body: bytes
) -> bytes | None:
    """What ``hourglass-signature`` covers, or ``None`` when a value holds a line break (no header
    value the node sent does)."""
    parts = [delivery_id, timestamp]
    parts += [headers.get(name, "").strip(" \t") for name in _METADATA_HEADERS]
    parts.append(headers.get("hourglass-job-type", "").strip(" \t"))
    if any("\n" in p or "\r" in p for p in parts):
        return None
    return "".join(p + "\n" for p in parts).encode() + body


def sign_metadata(
    secret: str,
    delivery_id: str,
    timestamp: int,
    headers: Mapping[str, str],
    body: bytes,
) -> str:
    """The ``hourglass-signature`` value the node sends for a delivery with these
    ``hourglass-*`` headers (lower-case names) and this secret."""
    text = _metadata_text(delivery_id, str(timestamp), headers, body)
    if text is None:
        raise ValueError("header values hold no line breaks")
    mac = hmac.new(_metadata_key(_key(secret)), text, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


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
        self._metadata_keys = [_metadata_key(k) for k in self._keys]
        self.tolerance = tolerance

    def __repr__(self) -> str:
        return f"WebhookVerifier(<{len(self._keys)} secret(s)>, tolerance={self.tolerance})"

    def verify(
        self,
        body: bytes | str,
        headers: HeadersLike,
        *,
        now: float | None = None,
    ) -> Delivery:
        """The delivery, or ``WebhookVerificationError`` (a missing, repeated or malformed header,
        no matching signature, a timestamp outside the tolerance). ``body`` must be the raw
        request body, byte for byte as received; ``headers`` the request's headers as your server
        gives them (see ``HeadersLike``: http.server's ``self.headers``, a dict, a framework's
        headers, pairs). ``TypeError``: ``headers`` is none of these."""
        delivery_id, timestamp, raw, found = self._check(body, headers, now)
        if _BATCH_ID.match(delivery_id):
            raise WebhookVerificationError("webhook-id is a batch's: use verify_batch")
        # The hourglass-* headers are the node's only under their own signature.
        text = _metadata_text(delivery_id, found["webhook-timestamp"].strip(), found, raw)
        metadata_signatures = _required(found, "hourglass-signature")
        if text is None or not _matches(self._metadata_keys, text, metadata_signatures):
            raise WebhookVerificationError(
                "hourglass-signature does not match: the hourglass-* headers were altered"
            )
        return _delivery(delivery_id, timestamp, raw, found)

    def verify_batch(
        self,
        body: bytes | str,
        headers: HeadersLike,
        *,
        now: float | None = None,
    ) -> list[Delivery]:
        """The deliveries of a batch (a target with ``batch``), in the order sent, or
        ``WebhookVerificationError``. Answer a 2xx, with ``{"failed": ["<delivery_id>", ...]}``
        for the items to be retried."""
        batch_id, timestamp, raw, found = self._check(body, headers, now)
        if not _BATCH_ID.match(batch_id):
            raise WebhookVerificationError("webhook-id is not a batch's: use verify")
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            raise WebhookVerificationError("the body is not JSON") from None
        items = parsed.get("deliveries") if isinstance(parsed, dict) else None
        if not isinstance(items, list):
            raise WebhookVerificationError("the body has no deliveries list")
        if found.get("hourglass-batch-size", "").strip() != str(len(items)):
            raise WebhookVerificationError(
                "hourglass-batch-size does not count the signed deliveries"
            )
        return [_batch_item(item, timestamp, raw) for item in items]

    def _check(
        self,
        body: bytes | str,
        headers: HeadersLike,
        now: float | None,
    ) -> tuple[str, int, bytes, dict[str, str]]:
        raw = body.encode() if isinstance(body, str) else bytes(body)
        found = _collect(headers)
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
        if not _matches(self._keys, signed, signatures):
            raise WebhookVerificationError("no signature matches")
        return delivery_id, timestamp, raw, found


def _matches(keys: list[bytes], signed: bytes, header: str) -> bool:
    """Whether any ``v1,<base64>`` of a space-separated signature header is the HMAC-SHA256 of
    ``signed`` under any of ``keys``."""
    expected = [hmac.new(k, signed, hashlib.sha256).digest() for k in keys]
    for candidate in header.split():
        # A trailing comma: repeated headers that a framework joined with ", ". Base64 has none.
        version, _, encoded = candidate.rstrip(",").partition(",")
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


def _text(value: object, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        # Header bytes as HTTP carries them (ASGI's raw pairs): Latin-1 maps each byte to one
        # character, so nothing is lost or refused here.
        return bytes(value).decode("latin-1")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"headers: {what} is a {type(value).__name__}, not a str or bytes")


def _collect(headers: HeadersLike) -> dict[str, str]:
    """The headers by lower-case name. A name given more than once: the signatures of every
    ``webhook-signature`` (each one is a candidate), and for the other headers of a delivery, the
    one value they agree on; unrelated headers are joined with ", " and never read."""
    if headers is None:
        return {}
    if isinstance(headers, (str, bytes, bytearray)):
        raise TypeError(_HEADERS_EXPECTED + f", not a {type(headers).__name__}")
    items = getattr(headers, "items", None)
    pairs: Any = items() if callable(items) else headers
    try:
        entries = iter(pairs)
    except TypeError:
        raise TypeError(_HEADERS_EXPECTED + f", not a {type(headers).__name__}") from None
    values: dict[str, list[str]] = {}
    for entry in entries:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise TypeError(_HEADERS_EXPECTED + f"; an entry is a {type(entry).__name__}")
        name = _text(entry[0], "a header name").strip().lower()
        given = entry[1]
        if given is None:
            continue
        listed = given if isinstance(given, (list, tuple)) else [given]
        values.setdefault(name, []).extend(_text(v, f"the value of {name}") for v in listed)
    found: dict[str, str] = {}
    for name, listed in values.items():
        if name == "webhook-signature":
            found[name] = " ".join(listed)
        elif name in HEADER_FIELDS:
            distinct = {v.strip() for v in listed}
            if len(distinct) > 1:
                raise WebhookVerificationError(f"header {name} is sent more than once, differently")
            found[name] = listed[0]
        else:
            found[name] = ", ".join(listed)
    return found


_HEADERS_EXPECTED = (
    "headers: expected a mapping (a dict, any case-insensitive headers object), an "
    "email.message.Message (http.server's self.headers) or (name, value) pairs"
)


def _required(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if not value:
        raise WebhookVerificationError(f"missing header {name}")
    return value.strip()


def _parse_delivery_id(delivery_id: str, what: str) -> tuple[str, datetime]:
    """The job id and due instant a delivery id names."""
    match = _DELIVERY_ID.match(delivery_id)
    if match is None:
        raise WebhookVerificationError(f"{what} is not an hourglass delivery id")
    hex_id, due_ms = match.group(1), int(match.group(2))
    job_id = "-".join((hex_id[:8], hex_id[8:12], hex_id[12:16], hex_id[16:20], hex_id[20:]))
    return job_id, _EPOCH + timedelta(milliseconds=due_ms)


def _batch_item(item: Any, timestamp: int, raw: bytes) -> Delivery:
    """One item of a verified batch: its facts must agree with its delivery id."""
    if not isinstance(item, dict):
        raise WebhookVerificationError("a batch item is not an object")
    delivery_id = item.get("id")
    if not isinstance(delivery_id, str):
        raise WebhookVerificationError("a batch item has no id")
    job_id, due_at = _parse_delivery_id(delivery_id, "a batch item's id")
    given_job = item.get("job_id")
    if not isinstance(given_job, str) or given_job.lower() != job_id:
        raise WebhookVerificationError("a batch item's job_id does not match its id")
    given_due = item.get("due_at")
    try:
        agrees = isinstance(given_due, str) and parse_instant(given_due) == due_at
    except ValueError:
        agrees = False
    if not agrees:
        raise WebhookVerificationError("a batch item's due_at does not match its id")
    attempt = item.get("attempt")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise WebhookVerificationError("a batch item's attempt is not a positive whole number")
    job_type = item.get("job_type")
    if job_type is not None and not isinstance(job_type, str):
        raise WebhookVerificationError("a batch item's job_type is not a string")
    return Delivery(
        delivery_id=delivery_id,
        job_id=job_id,
        type=job_type,
        attempt=attempt,
        due_at=due_at,
        timestamp=timestamp,
        payload=item.get("payload"),
        body=raw,
    )


def _delivery(delivery_id: str, timestamp: int, raw: bytes, headers: Mapping[str, str]) -> Delivery:
    job_id, due_at = _parse_delivery_id(delivery_id, "webhook-id")
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
        attempt = int(_required(headers, "hourglass-attempt"))
    except ValueError:
        raise WebhookVerificationError("hourglass-attempt is not a number") from None
    try:
        payload: Any = json.loads(raw) if raw.strip() else None
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    job_type = headers.get("hourglass-job-type")
    return Delivery(
        delivery_id=delivery_id,
        job_id=job_id,
        type=(job_type or "").strip(" \t") or None,
        attempt=attempt,
        due_at=due_at,
        timestamp=timestamp,
        payload=payload,
        body=raw,
    )
