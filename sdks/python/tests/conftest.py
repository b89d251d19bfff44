"""Fixtures: a real node (the ``hourglass`` binary from ``HOURGLASS_BIN``, default
``../../target/debug/hourglass`` from the SDK's directory) on a free loopback port, in
development mode, and a fresh namespace per test so tests never see each other's jobs.
``running_node(config)`` starts another node with a config file of its own."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hourglass import Client

SDK_DIR = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def hourglass_bin() -> Path:
    configured = os.environ.get("HOURGLASS_BIN")
    path = Path(configured) if configured else SDK_DIR / "../../target/debug/hourglass"
    path = path.resolve()
    if not os.access(path, os.X_OK):
        pytest.exit(
            f"no hourglass binary at {path}: build it (cargo build -p hourglass) or set "
            "HOURGLASS_BIN",
            returncode=2,
        )
    return path


@dataclass
class Node:
    url: str
    process: subprocess.Popen[str]
    log: list[str]


@contextmanager
def running_node(config: str | None = None) -> Iterator[Node]:
    """A node on a free loopback port until the block ends; ``config``: the text of a config
    file (TOML) to start it with."""
    data = tempfile.TemporaryDirectory(prefix="hourglass-pytest-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOURGLASS_")}
    env["HOURGLASS_LOG"] = "warn"
    args = [str(hourglass_bin()), "serve", "--listen", "127.0.0.1:0", "--data-dir", data.name]
    if config is not None:
        config_file = Path(data.name) / "hourglass.toml"
        config_file.write_text(config)
        args += ["--config", str(config_file)]
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    log: list[str] = []
    url = None
    deadline = time.monotonic() + 60
    while url is None and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        log.append(line)
        match = re.search(r"hourglass listening on (http://\S+)", line)
        if match:
            url = match.group(1)
    if url is None:
        process.kill()
        process.wait()
        data.cleanup()
        pytest.exit("the node did not start:\n" + "".join(log), returncode=2)
    stdout = process.stdout
    drain = threading.Thread(target=lambda: log.extend(stdout), daemon=True)
    drain.start()
    try:
        yield Node(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        finally:
            if process.poll() is None:
                process.kill()
            data.cleanup()
    assert not any("panicked" in line for line in log), "".join(log)


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    """One node for the session (tests use namespaces of their own)."""
    with running_node() as started:
        yield started


@pytest.fixture
def namespace() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def client(node: Node, namespace: str) -> Iterator[Client]:
    with Client(node.url, namespace=namespace) as c:
        yield c


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 15.0) -> T:
    """Polls ``probe`` until it returns something other than None/False, or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A webhook receiver on 127.0.0.1: records each request and answers ``status``."""

    def __init__(self) -> None:
        self.requests: queue.Queue[Received] = queue.Queue()
        self.status = 200
        outer = self

        class Handle(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                outer.requests.put(Received(self.path, dict(self.headers.items()), body))
                self.send_response(outer.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def next(self, timeout: float = 20.0) -> Received:
        try:
            return self.requests.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no webhook delivery within {timeout}s")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
