"""The webhook verifier against deliveries a real node sent to a receiver in this process."""

from __future__ import annotations

import email
import http.client
import io
import json
import queue
import re
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from hourglass import (
    Client,
    Delivery,
    HeadersLike,
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


# --- Header collections -------------------------------------------------------------------------
# Issue 36: the verifier answered ValueError (not WebhookVerificationError) for the standard
# library's http.server headers, so a receiver built the README's way answered 500, not 401. These
# deliveries are signed with the package's own `sign` and `sign_metadata`, which the vectors above
# hold to the node's signatures.

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
JOB_ID = "01a1fee1-265e-739b-9809-3d3692d507c6"


def signed_delivery(now: int) -> tuple[bytes, list[tuple[str, str]]]:
    """A delivery as the node sends it: the body and its headers, names as on the wire."""
    body = b'{"flight":"LH 400"}'
    due_ms = (now - 1) * 1000 + 719
    delivery_id = f"{JOB_ID.replace('-', '')}_{due_ms}"
    due_at = datetime.fromtimestamp(due_ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
    metadata = {
        "hourglass-job-id": JOB_ID,
        "hourglass-due-at": due_at.replace("+00:00", "Z"),
        "hourglass-attempt": "2",
        "hourglass-job-type": "reminder.flight",
    }
    headers = [
        ("Content-Type", "application/json"),
        ("Webhook-Id", delivery_id),
        ("Webhook-Timestamp", str(now)),
        ("Webhook-Signature", sign(SECRET, delivery_id, now, body)),
        *((name.title(), value) for name, value in metadata.items()),
        ("Hourglass-Signature", sign_metadata(SECRET, delivery_id, now, metadata, body)),
    ]
    return body, headers


def http_message(headers: list[tuple[str, str]]) -> http.client.HTTPMessage:
    """The headers as http.server hands them to a handler (``self.headers``): parsed from the
    bytes of a request's header section by the same function."""
    raw = "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
    return http.client.parse_headers(io.BytesIO(raw.encode("latin-1")))


def test_accepts_every_common_kind_of_header_collection() -> None:
    now = int(time.time())
    body, pairs = signed_delivery(now)
    verifier = WebhookVerifier(SECRET)
    forms: dict[str, HeadersLike] = {
        "http.server's HTTPMessage": http_message(pairs),
        "email.message.Message": email.message_from_string(
            "".join(f"{k}: {v}\n" for k, v in pairs) + "\n"
        ),
        "a dict, names as sent": dict(pairs),
        "a dict, names lower-cased": {k.lower(): v for k, v in pairs},
        "a list of pairs": pairs,
        "a tuple of pairs": tuple(pairs),
        "ASGI's byte pairs": [(k.lower().encode(), v.encode()) for k, v in pairs],
        "httpx.Headers (case-insensitive)": httpx.Headers(pairs),
        "a dict of lists (multi-value headers)": {k: [v] for k, v in pairs},
    }
    for what, headers in forms.items():
        delivery = verifier.verify(body, headers)
        assert (delivery.job_id, delivery.attempt, delivery.type) == (
            JOB_ID,
            2,
            "reminder.flight",
        ), what
        assert delivery.payload == {"flight": "LH 400"}, what


def test_refuses_bad_headers_with_its_own_error() -> None:
    now = int(time.time())
    body, pairs = signed_delivery(now)
    verifier = WebhookVerifier(SECRET)

    def without(name: str) -> list[tuple[str, str]]:
        return [(k, v) for k, v in pairs if k.lower() != name]

    def refused(headers: HeadersLike, pattern: str) -> None:
        with pytest.raises(WebhookVerificationError, match=pattern):
            verifier.verify(body, headers)

    for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "hourglass-signature"):
        refused(http_message(without(name)), f"missing header {name}")
        refused(dict(without(name)), f"missing header {name}")
    refused(http_message([]), "missing header webhook-id")
    refused({}, "missing header webhook-id")
    refused(None, "missing header webhook-id")
    refused(http_message([*pairs, ("Webhook-Timestamp", "soon")]), "webhook-timestamp")
    refused(http_message([*pairs, ("Webhook-Id", "msg_other")]), "webhook-id")
    # A header sent twice with one value is still that value.
    assert verifier.verify(body, http_message([*pairs, ("Hourglass-Attempt", "2")])).attempt == 2
    # Two webhook-signature headers (or one list of them) are candidates alike: one must match.
    stranger = sign("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", "x", now, body)
    signature = dict(pairs)["Webhook-Signature"]
    doubled = [*without("webhook-signature"), ("webhook-signature", stranger)]
    doubled.append(("webhook-signature", signature))
    assert verifier.verify(body, http_message(doubled)).attempt == 2
    # ... as they are when a framework joins repeated headers with ", ".
    joined = [*without("webhook-signature"), ("webhook-signature", f"{stranger}, {signature}")]
    assert verifier.verify(body, joined).attempt == 2
    refused([*without("webhook-signature"), ("webhook-signature", stranger)], "no signature")


def test_a_value_that_is_no_header_collection_is_a_type_error() -> None:
    body, _ = signed_delivery(int(time.time()))
    verifier = WebhookVerifier(SECRET)
    for wrong in (42, "webhook-id: x", b"webhook-id: x", ["webhook-id"], [("a", "b", "c")]):
        with pytest.raises(TypeError, match="headers"):
            verifier.verify(body, wrong)  # type: ignore[arg-type]


def test_an_http_server_receiver_built_the_readme_way_answers_200_and_401(
    client: Client,
) -> None:
    """A receiver on the standard library's http.server, verifying ``self.headers`` as the
    README shows: a real delivery from the node is answered 200, a forged request 401."""
    secret = client.rotate_signing_secret(overlap="0s").signing_secret
    verifier = WebhookVerifier(secret)
    answered: queue.Queue[tuple[int, str]] = queue.Queue()

    class Receive(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw_body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                delivery = verifier.verify(raw_body, self.headers)
                status, note = 200, delivery.delivery_id
            except WebhookVerificationError as e:
                status, note = 401, str(e)
            except Exception as e:  # what the fix is about: anything else would be a 500
                status, note = 500, f"{type(e).__name__}: {e}"
            answered.put((status, note))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client.create_job(
            NewJob(after("10ms"), Target.to_webhook(url), type="reminder.flight", payload=[1])
        )
        status, note = answered.get(timeout=20)
        assert status == 200, note
        assert re.fullmatch(r"[0-9a-f]{32}_[0-9]+", note), note
        forged = urllib.request.Request(
            url, data=b"[1]", headers={"webhook-id": "msg_x"}, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=10)
        assert refused.value.code == 401
        assert answered.get(timeout=5) == (401, "missing header webhook-timestamp")
    finally:
        server.shutdown()
        server.server_close()
