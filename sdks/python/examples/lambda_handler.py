"""An AWS Lambda handler behind a function URL: the node delivers webhooks to the URL, the
handler verifies the signature and dispatches on the job type.

Configure the job's target as ``{"webhook": {"url": "https://<id>.lambda-url.<region>.on.aws/"}}``
and the function's environment with HOURGLASS_SIGNING_SECRET (from ``hourglass signing-secret``;
during a rotation, both secrets separated by a space). Package this file with ``hourglass`` and
``httpx`` (the verifier itself needs only the standard library).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any

from hourglass import Delivery, WebhookVerificationError, WebhookVerifier


def remind(delivery: Delivery) -> None:
    print(
        f"remind {delivery.payload['passenger']} of {delivery.payload['flight']} "
        f"(delivery {delivery.delivery_id}, attempt {delivery.attempt})"
    )


def expire_licence(delivery: Delivery) -> None:
    print(f"expire licence {delivery.payload}")


HANDLERS: dict[str, Callable[[Delivery], None]] = {
    "reminder.flight": remind,
    "licence.expire": expire_licence,
}

_verifier: WebhookVerifier | None = None


def handler(event: dict[str, Any], context: object = None) -> dict[str, Any]:
    """The function URL event (payload format 2.0) in, the HTTP answer out."""
    global _verifier
    if _verifier is None:
        _verifier = WebhookVerifier(os.environ["HOURGLASS_SIGNING_SECRET"].split())
    # The signature covers the body byte for byte: verify what arrived, before any parsing.
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
    try:
        delivery = _verifier.verify(body, event.get("headers") or {})
    except WebhookVerificationError as e:
        return {"statusCode": 401, "body": str(e)}
    run = HANDLERS.get(delivery.type or "")
    if run is None:
        # A 4xx other than 408/425/429 is permanent: the occurrence is dead-lettered at once.
        return {"statusCode": 422, "body": f"no handler for type {delivery.type}"}
    # An exception becomes a 5xx from Lambda: the node retries with backoff. Deliveries are at
    # least once: deduplicate on delivery.delivery_id where acting twice would hurt.
    run(delivery)
    return {"statusCode": 200, "body": "ok"}
