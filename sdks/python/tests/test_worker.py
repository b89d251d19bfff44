"""The pull-queue worker against a real node."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hourglass import (
    AsyncClient,
    Client,
    Message,
    NewJob,
    Retry,
    RetryLater,
    Target,
    Worker,
    after,
)

from .conftest import SDK_DIR, Node, wait_for

T = TypeVar("T")


async def until(what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 15.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def queued(type: str, payload: Any = None, **kw: Any) -> NewJob:
    return NewJob(after("10ms"), Target.to_queue("work"), type=type, payload=payload, **kw)


def test_handles_fails_and_retries(node: Node, namespace: str) -> None:
    seen: list[tuple[str, int]] = []
    blocking_threads: list[str] = []

    async def scenario() -> None:
        async with AsyncClient(node.url, namespace=namespace) as client:
            worker = Worker(client, "work", concurrency=4, poll_wait_ms=1000)

            @worker.handler("email.send")
            async def send(job: Message) -> None:
                seen.append((job.payload["to"], job.attempt))

            @worker.handler("flaky")
            async def flaky(job: Message) -> None:
                seen.append(("flaky", job.attempt))
                if job.attempt == 1:
                    raise RuntimeError("the first try fails")

            @worker.handler("later")
            def later(job: Message) -> None:  # a plain function runs in a thread
                blocking_threads.append(threading.current_thread().name)
                seen.append(("later", job.attempt))
                if job.attempt == 1:
                    raise RetryLater(0.05)

            @worker.handler("doomed")
            async def doomed(job: Message) -> None:
                seen.append(("doomed", job.attempt))
                raise ValueError("always")

            running = asyncio.create_task(worker.run())
            fast = Retry(max_attempts=2, initial_backoff="50ms", max_backoff="50ms")
            jobs = {
                "a": await client.create_job(queued("email.send", {"to": "a"})),
                "b": await client.create_job(queued("email.send", {"to": "b"})),
                "flaky": await client.create_job(queued("flaky", retry=fast)),
                "later": await client.create_job(queued("later")),
                "doomed": await client.create_job(queued("doomed", retry=fast)),
            }

            async def settled() -> bool:
                states = {n: (await client.get_job(j.id)).state for n, j in jobs.items()}
                return all(s in ("completed", "failed") for s in states.values())

            await until("every job to settle", settled)
            worker.stop()
            await asyncio.wait_for(running, 10)

            for name in ("a", "b", "flaky", "later"):
                assert (await client.get_job(jobs[name].id)).state == "completed", name
            assert (await client.get_job(jobs["doomed"].id)).state == "failed"
            [dead] = (await client.list_dead_letters()).dead_letters
            assert (dead.job_id, dead.attempts) == (jobs["doomed"].id, 2)
            runs = (await client.list_job_runs(jobs["flaky"].id)).runs
            assert [r.outcome for r in runs] == ["delivered", "retry"]

    asyncio.run(scenario())
    assert sorted(seen) == sorted(
        [
            ("a", 1),
            ("b", 1),
            ("flaky", 1),
            ("flaky", 2),
            ("later", 1),
            ("later", 2),
            ("doomed", 1),
            ("doomed", 2),
        ]
    )
    assert all(name.startswith("hourglass-handler") for name in blocking_threads)


def test_long_handlers_keep_their_lease(node: Node, namespace: str) -> None:
    calls: list[int] = []

    async def scenario() -> None:
        async with AsyncClient(node.url, namespace=namespace) as client:
            # A 1 s visibility: without extensions the message would come back mid-handler.
            worker = Worker(client, "work", visibility_ms=1000, poll_wait_ms=500)

            @worker.handler("slow")
            async def slow(job: Message) -> None:
                calls.append(job.attempt)
                await asyncio.sleep(2.5)

            running = asyncio.create_task(worker.run())
            job = await client.create_job(queued("slow"))

            async def completed() -> bool:
                return (await client.get_job(job.id)).state == "completed"

            await until("the slow job to complete", completed)
            worker.stop()
            await running

    asyncio.run(scenario())
    assert calls == [1]


def test_shutdown_drains_running_handlers(node: Node, namespace: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(node.url, namespace=namespace) as client:
            worker = Worker(client, "work", poll_wait_ms=20_000)
            started = asyncio.Event()
            finished: list[str] = []

            @worker.handler("report")
            async def report(job: Message) -> None:
                started.set()
                await asyncio.sleep(0.5)
                finished.append(job.job_id)

            running = asyncio.create_task(worker.run())
            job = await client.create_job(queued("report"))
            await asyncio.wait_for(started.wait(), 15)
            worker.stop()
            await asyncio.wait_for(running, 10)
            # run() returned only after the handler finished and its ack was written.
            assert finished == [job.id]
            assert (await client.get_job(job.id)).state == "completed"

    asyncio.run(scenario())


def test_handlers_past_the_grace_are_nacked_for_another_worker(node: Node, namespace: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(node.url, namespace=namespace) as client:
            worker = Worker(client, "work", shutdown_grace=0.2, poll_wait_ms=1000)
            started = asyncio.Event()
            cancelled = asyncio.Event()

            @worker.handler("stuck")
            async def stuck(job: Message) -> None:
                started.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            running = asyncio.create_task(worker.run())
            job = await client.create_job(queued("stuck"))
            await asyncio.wait_for(started.wait(), 15)
            worker.stop()
            await asyncio.wait_for(running, 10)
            assert cancelled.is_set()
            # Nacked with delay 0: available again at once, not after the visibility timeout.
            [again] = await client.lease("work", wait_ms=2000)
            assert (again.job_id, again.attempt) == (job.id, 2)
            await client.ack("work", [again.receipt])

    asyncio.run(scenario())


def test_sigterm_drains_the_example_worker(node: Node, client: Client, namespace: str) -> None:
    env = {
        **os.environ,
        "HOURGLASS_URL": node.url,
        "HOURGLASS_NAMESPACE": namespace,
        "HOURGLASS_QUEUE": "tasks",
        "PYTHONUNBUFFERED": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, str(SDK_DIR / "examples" / "worker.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        job = client.create_job(
            NewJob(
                after("10ms"),
                Target.to_queue("tasks"),
                type="task",
                payload={"action": "report.generate", "seconds": 1},
            )
        )
        assert worker.stdout is not None
        lines: list[str] = []
        for line in worker.stdout:
            lines.append(line)
            if "start report.generate" in line:
                break
        assert any(job.id in line for line in lines), "".join(lines)
        worker.send_signal(signal.SIGTERM)
        rest, _ = worker.communicate(timeout=20)
        assert worker.returncode == 0, "".join(lines) + rest
        assert f"done report.generate {job.id}" in rest
        assert client.get_job(job.id).state == "completed"
        assert wait_for("an empty queue", lambda: client.get_queue("tasks").in_flight == 0)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_refused_lease_stops_the_worker(node: Node) -> None:
    async def scenario() -> None:
        async with AsyncClient(node.url, namespace="bad namespace!") as client:
            worker = Worker(client, "work")
            worker.handle("x", lambda job: None)
            with pytest.raises(Exception) as e:
                await asyncio.wait_for(worker.run(), 10)
            assert getattr(e.value, "code", None) == "invalid_namespace"

    asyncio.run(scenario())
    assert Path(SDK_DIR).is_dir()
