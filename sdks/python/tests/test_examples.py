"""The examples, run against a real node."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from hourglass import Client, NewJob, Target, after

from .conftest import SDK_DIR, Node, Receiver


def test_quickstart(node: Node, client: Client, namespace: str) -> None:
    env = {**os.environ, "HOURGLASS_URL": node.url, "HOURGLASS_NAMESPACE": namespace}
    out = subprocess.run(
        [sys.executable, str(SDK_DIR / "examples/quickstart.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    jobs = {j.type: j for j in client.list_jobs().jobs}
    assert jobs["reminder.flight"].state == "cancelled"
    assert jobs["digest.send"].key == "digest-acme"
    assert jobs["digest.send"].schedule.timezone == "Europe/Berlin"
    assert f"cancelled {jobs['reminder.flight'].id}: cancelled" in out
    assert "refused as expected: unknown_timezone at schedule.timezone" in out


@pytest.fixture
def lambda_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.syspath_prepend(str(SDK_DIR / "examples"))
    import lambda_handler

    lambda_handler._verifier = None
    yield lambda_handler
    lambda_handler._verifier = None


def test_lambda_handler_on_a_real_delivery(
    client: Client,
    receiver: Receiver,
    lambda_module: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import lambda_handler

    secret = client.rotate_signing_secret(overlap="0s").signing_secret
    monkeypatch.setenv("HOURGLASS_SIGNING_SECRET", secret)
    url = receiver.url + "/lambda"
    client.create_job(
        NewJob(
            after("10ms"),
            Target.to_webhook(url),
            type="reminder.flight",
            payload={"passenger": "p-9", "flight": "LH 401"},
        )
    )
    client.create_job(NewJob(after("10ms"), Target.to_webhook(url), type="unknown.type"))
    received = [receiver.next(), receiver.next()]
    by_type = {r.headers["hourglass-job-type"]: r for r in received}

    def event(headers: dict[str, str], body: bytes) -> dict[str, object]:
        # Function URLs pass headers lower-cased, and a body base64-encoded when binary.
        lowered = {k.lower(): v for k, v in headers.items()}
        return {
            "headers": lowered,
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }

    flight = by_type["reminder.flight"]
    answer = lambda_handler.handler(event(flight.headers, flight.body))
    assert answer == {"statusCode": 200, "body": "ok"}
    assert "remind p-9 of LH 401" in capsys.readouterr().out
    unknown = by_type["unknown.type"]
    assert lambda_handler.handler(event(unknown.headers, unknown.body))["statusCode"] == 422
    forged = lambda_handler.handler(event(flight.headers, b'{"forged": true}'))
    assert forged["statusCode"] == 401
