"""The webhook verifier against deliveries a real node sent to a receiver in this process."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from hourglass import (
    Client,
    Delivery,
    NewJob,
    Retry,
    Target,
    WebhookVerificationError,
    WebhookVerifier,
    after,
    at,
    sign,
    sign_metadata,
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


def test_signs_metadata_as_the_node_does() -> None:
    # The vector the node's own test checks (crates/engine/src/signing.rs).
    headers = {
        "hourglass-job-id": "01a1fee1-265e-739b-9809-3d3692d507c6",
        "hourglass-due-at": "2026-11-22T12:12:10.719Z",
        "hourglass-attempt": "2",
        "hourglass-job-type": "reminder.flight",
    }
    signature = sign_metadata(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "01a1fee1265e739b98093d3692d507c6_1795277530719",
        1795277530,
        headers,
        b'{"flight":"LH 400"}',
    )
    assert signature == "v1,8a/2M9ECOVVnij/pxrlAKLdK5QXhX8JStkWIqk/KuGk="


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
    # Issue 39, defect 8: a replay with an altered hourglass-* header (the body, id and timestamp
    # intact, so webhook-signature still matches) used to verify and answer the forged values.
    for name, forged in [
        ("hourglass-job-type", "account.delete"),
        ("hourglass-job-id", "00000000-0000-0000-0000-000000000000"),
        ("hourglass-attempt", "1"),
        ("hourglass-due-at", "2020-01-01T00:00:00.000Z"),
    ]:
        altered = {**second.headers, name: forged}
        with pytest.raises(WebhookVerificationError, match="hourglass-signature"):
            verifier.verify(second.body, altered)
    untyped = {k: v for k, v in second.headers.items() if k.lower() != "hourglass-job-type"}
    with pytest.raises(WebhookVerificationError, match="hourglass-signature"):
        verifier.verify(second.body, untyped)
    unsigned = {k: v for k, v in second.headers.items() if k.lower() != "hourglass-signature"}
    with pytest.raises(WebhookVerificationError, match="missing header hourglass-signature"):
        verifier.verify(second.body, unsigned)
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


def test_verifies_a_real_batch_and_each_item_in_it(client: Client, receiver: Receiver) -> None:
    secret = client.rotate_signing_secret(overlap="0s").signing_secret
    due = datetime.now(timezone.utc) + timedelta(milliseconds=600)
    jobs = [
        client.create_job(
            NewJob(
                at(due),
                Target.to_webhook(receiver.url + "/batch", batch=10),
                type="export.nightly",
                payload={"tenant": n},
            )
        )
        for n in range(3)
    ]
    assert jobs[0].target.webhook is not None
    assert jobs[0].target.webhook.batch is not None
    assert jobs[0].target.webhook.batch.max_items == 10
    verifier = WebhookVerifier(secret)
    seen: dict[str, Delivery] = {}
    requests = []
    while len(seen) < 3:
        request = receiver.next()
        requests.append(request)
        for delivery in verifier.verify_batch(request.body, request.headers):
            seen[delivery.job_id] = delivery
    by_id = {job.id: job for job in jobs}
    assert set(seen) == set(by_id)
    for job_id, delivery in seen.items():
        assert delivery.due_at == by_id[job_id].next_due_at
        next_due = by_id[job_id].next_due_at
        assert next_due is not None
        due_ms = round(next_due.timestamp() * 1000)
        assert delivery.delivery_id == f"{job_id.replace('-', '')}_{due_ms}"
        assert delivery.type == "export.nightly"
        assert delivery.attempt == 1
    assert sorted(d.payload["tenant"] for d in seen.values()) == [0, 1, 2]

    request = requests[0]
    with pytest.raises(WebhookVerificationError, match="verify_batch"):
        verifier.verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError, match="signature"):
        verifier.verify_batch(request.body.replace(b"tenant", b"tenanT"), request.headers)
    wrong_count = {**request.headers, "hourglass-batch-size": "999"}
    with pytest.raises(WebhookVerificationError, match="hourglass-batch-size"):
        verifier.verify_batch(request.body, wrong_count)

    # A body signed with the right secret whose item's facts disagree with its id is refused.
    body = json.loads(request.body)
    body["deliveries"][0]["job_id"] = "01a1fee1-265e-739b-9809-3d3692d507c6"
    forged = json.dumps(body).encode()
    headers = {
        **request.headers,
        "webhook-signature": sign(
            secret, request.headers["webhook-id"], int(request.headers["webhook-timestamp"]), forged
        ),
    }
    with pytest.raises(WebhookVerificationError, match="job_id"):
        verifier.verify_batch(forged, headers)
