"""The webhook verifier against deliveries a real node sent to a receiver in this process."""

from __future__ import annotations

import pytest

from hourglass import (
    Client,
    NewJob,
    Retry,
    Target,
    WebhookVerificationError,
    WebhookVerifier,
    after,
    sign,
)

from .conftest import Receiver


def test_signs_the_standard_webhooks_reference_vector() -> None:
    # The example published with the Standard Webhooks specification.
    signature = sign(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_accepts_a_real_delivery_and_refuses_forgeries(client: Client, receiver: Receiver) -> None:
    secret = client.rotate_signing_secret(overlap="0s").signing_secret
    receiver.status = 503  # the first attempt fails, so the second carries attempt 2
    job = client.create_job(
        NewJob(
            after("50ms"),
            Target.to_webhook(receiver.url + "/hooks/reminder"),
            type="reminder.flight",
            payload={"passenger": "p-123", "flight": "LH 400"},
            retry=Retry(initial_backoff="50ms", max_backoff="100ms"),
        )
    )
    first = receiver.next()
    receiver.status = 200
    second = receiver.next()
    assert second.path == "/hooks/reminder"
    assert second.headers["webhook-id"] == first.headers["webhook-id"]

    verifier = WebhookVerifier(secret)
    delivery = verifier.verify(second.body, second.headers)
    assert delivery.delivery_id == second.headers["webhook-id"]
    assert delivery.job_id == job.id
    assert delivery.type == "reminder.flight"
    assert delivery.attempt == 2
    assert delivery.payload == {"passenger": "p-123", "flight": "LH 400"}
    assert delivery.due_at == job.next_due_at
    assert verifier.verify(first.body, first.headers).attempt == 1
    # Header names in any case, as pairs.
    upper = [(k.upper(), v) for k, v in second.headers.items()]
    assert verifier.verify(second.body, upper).delivery_id == delivery.delivery_id

    timestamp = int(second.headers["webhook-timestamp"])
    tampered = second.body.replace(b"LH 400", b"LH 401")
    assert tampered != second.body
    with pytest.raises(WebhookVerificationError, match="signature"):
        verifier.verify(tampered, second.headers)

    stranger = WebhookVerifier("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
    with pytest.raises(WebhookVerificationError, match="signature"):
        stranger.verify(second.body, second.headers)

    with pytest.raises(WebhookVerificationError, match="too old"):
        verifier.verify(second.body, second.headers, now=timestamp + 301)
    with pytest.raises(WebhookVerificationError, match="future"):
        verifier.verify(second.body, second.headers, now=timestamp - 301)
    assert verifier.verify(second.body, second.headers, now=timestamp + 299).attempt == 2
    assert WebhookVerifier(secret, tolerance=10).verify(second.body, second.headers)

    # A replayed body under a rewritten timestamp fails: the timestamp is signed.
    restamped = {**second.headers, "webhook-timestamp": str(timestamp + 1)}
    with pytest.raises(WebhookVerificationError, match="signature"):
        verifier.verify(second.body, restamped)
    # The hourglass-* headers are not signed; the ones the signed id also carries must agree.
    other_job = {**second.headers, "hourglass-job-id": "01a1fee1-265e-739b-9809-3d3692d507c6"}
    with pytest.raises(WebhookVerificationError, match="hourglass-job-id"):
        verifier.verify(second.body, other_job)
    missing = {k: v for k, v in second.headers.items() if k.lower() != "webhook-signature"}
    with pytest.raises(WebhookVerificationError, match="missing header webhook-signature"):
        verifier.verify(second.body, missing)


def test_both_secrets_verify_during_a_rotation(client: Client, receiver: Receiver) -> None:
    old = client.rotate_signing_secret(overlap="0s").signing_secret
    rotated = client.rotate_signing_secret(overlap="1h")
    assert rotated.previous_valid_until is not None
    new = rotated.signing_secret
    client.create_job(NewJob(after("10ms"), Target.to_webhook(receiver.url + "/r"), payload=[1]))
    delivery = receiver.next()
    assert len(delivery.headers["webhook-signature"].split()) == 2
    for secrets in ([old], [new], [old, new]):
        assert WebhookVerifier(secrets).verify(delivery.body, delivery.headers).payload == [1]
    unrelated = "whsec_" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(unrelated).verify(delivery.body, delivery.headers)


def test_refuses_malformed_secrets() -> None:
    with pytest.raises(ValueError):
        WebhookVerifier("whsec_short")
    with pytest.raises(ValueError):
        WebhookVerifier("whsec_%%%")
    with pytest.raises(ValueError):
        WebhookVerifier([])
