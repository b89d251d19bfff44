"""The Python SDK's examples, run from the installed wheel against a running node: what
scripts/sdk-package runs with the Python of a new virtual environment that has only the wheel
(and its dependencies) installed.

    python run.py NODE_URL EXAMPLES_DIR

Each example runs as a user would run it (quickstart.py and worker.py as programs, the Lambda
handler imported and called with function URL events), in a namespace of its own; the outcome is
read back from the node. Exits 1, naming the example and what went wrong, at the first failure.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

import hourglass
from hourglass import Client, NewJob, Target, after


def fail(example: str, why: str) -> NoReturn:
    print(f"sdk-package: python example {example}: {why}", file=sys.stderr)
    sys.exit(1)


def namespace() -> str:
    return "pkg-" + uuid.uuid4().hex[:12]


def env_for(url: str, ns: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOURGLASS_")}
    return {
        **env,
        "HOURGLASS_URL": url,
        "HOURGLASS_NAMESPACE": ns,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def quickstart(url: str, examples: Path) -> None:
    ns = namespace()
    run = subprocess.run(
        [sys.executable, str(examples / "quickstart.py")],
        check=False,
        env=env_for(url, ns),
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = run.stdout + run.stderr
    if run.returncode != 0:
        fail("quickstart.py", f"exited {run.returncode}:\n{out}")
    with Client(url, namespace=ns) as client:
        jobs = {job.type: job for job in client.list_jobs().jobs}
    reminder, digest = jobs.get("reminder.flight"), jobs.get("digest.send")
    if reminder is None or reminder.state != "cancelled":
        fail("quickstart.py", f"no cancelled reminder.flight job: {jobs}\n{out}")
    if digest is None or digest.key != "digest-acme" or digest.state != "active":
        fail("quickstart.py", f"no active digest.send job with key digest-acme: {jobs}\n{out}")
    for expected in (
        f"cancelled {reminder.id}: cancelled",
        "refused as expected: unknown_timezone at schedule.timezone",
    ):
        if expected not in out:
            fail("quickstart.py", f"no line {expected!r} in its output:\n{out}")


def worker(url: str, examples: Path) -> None:
    ns = namespace()
    process = subprocess.Popen(
        [sys.executable, str(examples / "worker.py")],
        env=env_for(url, ns, HOURGLASS_QUEUE="tasks"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        with Client(url, namespace=ns) as client:
            report = client.create_job(
                NewJob(
                    after("10ms"),
                    Target.to_queue("tasks"),
                    type="task",
                    payload={"action": "report.generate", "seconds": 0.05},
                )
            )
            email = client.create_job(
                NewJob(
                    after("10ms"),
                    Target.to_queue("tasks"),
                    type="email.send",
                    payload={"to": "ada@example.com"},
                )
            )
            wanted = [f"done report.generate {report.id}", "email to ada@example.com"]
            deadline = time.monotonic() + 30
            while not all(any(w in line for line in seen) for w in wanted):
                try:
                    seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    fail("worker.py", f"no {wanted} within 30 s:\n{''.join(seen)}")
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                fail("worker.py", f"still running 30 s after SIGTERM:\n{''.join(seen)}")
            if code != 0:
                fail("worker.py", f"exited {code} after SIGTERM:\n{''.join(seen)}")
            states = [client.get_job(job.id).state for job in (report, email)]
            if states != ["completed", "completed"]:
                fail("worker.py", f"jobs not completed (acked): {states}\n{''.join(seen)}")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class Receiver:
    """Webhook deliveries to 127.0.0.1, recorded and answered 200."""

    def __init__(self) -> None:
        self.received: queue.Queue[tuple[dict[str, str], bytes]] = queue.Queue()
        outer = self

        class Handle(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.received.put(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/lambda"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def lambda_handler(url: str, examples: Path) -> None:
    ns = namespace()
    receiver = Receiver()
    try:
        with Client(url, namespace=ns) as client:
            secret = client.rotate_signing_secret(overlap="0s").signing_secret
            os.environ["HOURGLASS_SIGNING_SECRET"] = secret
            for job_type, payload in (
                ("reminder.flight", {"passenger": "p-9", "flight": "LH 401"}),
                ("unknown.type", None),
            ):
                client.create_job(
                    NewJob(
                        after("10ms"),
                        Target.to_webhook(receiver.url),
                        type=job_type,
                        payload=payload,
                    )
                )
            deliveries = {}
            for _ in range(2):
                try:
                    headers, body = receiver.received.get(timeout=20)
                except queue.Empty:
                    fail("lambda_handler.py", "the node delivered nothing within 20 s")
                deliveries[headers.get("hourglass-job-type")] = (headers, body)
    finally:
        receiver.close()

    spec = importlib.util.spec_from_file_location("lambda_handler", examples / "lambda_handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def event(headers: dict[str, str], body: bytes) -> dict[str, object]:
        # A function URL event (payload format 2.0): lower-case names, a base64 body.
        return {
            "headers": headers,
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }

    flight_headers, flight_body = deliveries["reminder.flight"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        first = module.handler(event(flight_headers, flight_body))
    if "remind p-9 of LH 401" not in printed.getvalue():
        fail("lambda_handler.py", f"the handler printed {printed.getvalue()!r}, not the reminder")
    answers = [
        first,
        module.handler(event(*deliveries["unknown.type"])),
        module.handler(event(flight_headers, b'{"forged": true}')),
    ]
    statuses = [answer["statusCode"] for answer in answers]
    if statuses != [200, 422, 401]:
        fail("lambda_handler.py", f"answered {answers}, not 200, 422 and 401")


def main() -> None:
    url, examples = sys.argv[1], Path(sys.argv[2])
    installed = Path(hourglass.__file__).resolve()
    if not installed.is_relative_to(Path(sys.prefix).resolve()):
        fail("(setup)", f"hourglass is imported from {installed}, not from this environment")
    for name, run in (
        ("quickstart.py", quickstart),
        ("worker.py", worker),
        ("lambda_handler.py", lambda_handler),
    ):
        started = time.monotonic()
        run(url, examples)
        print(f"sdk-package: python example {name} ok ({time.monotonic() - started:.1f}s)")


if __name__ == "__main__":
    main()
