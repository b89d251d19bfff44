"""The pull-queue worker: leases messages from one queue, runs the handler registered for each
message's job type with bounded concurrency, keeps long-running messages leased, and writes the
outcomes back in batches.

::

    lease loop ──(message + slot)──► message task ──(outcome + slot)──► completer ──► ack / nack
     long-polls for as many          runs the handler, extends           batches a few ms' worth,
     messages as there are           the lease at half the               retries while the node
     free slots                      visibility                          is unavailable

A slot travels with its message and comes back only once the outcome is written, so handlers
running plus outcomes pending never exceed ``concurrency``.

Shutdown (``stop()``, SIGTERM or SIGINT): leasing stops (a long poll in progress is dropped; what
the node handed out in that instant comes back after its visibility timeout); running handlers
get ``shutdown_grace`` seconds to finish and are acked or nacked; those still running then are
cancelled and nacked with delay 0, so another worker takes them at once; then every outcome is
written, waiting for the node at most ``shutdown_grace`` again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from ._client import AsyncClient
from ._errors import HourglassError
from ._models import Message

log = logging.getLogger("hourglass.worker")

Handler = Callable[[Message], Awaitable[None] | None]
"""A handler: an ``async def`` (run on the event loop) or a plain function (run in a thread).
Returning acks the message; raising nacks it."""

H = TypeVar("H", bound=Handler)

MAX_LEASE = 1000
MAX_TYPES = 32


class RetryLater(Exception):
    """Raise from a handler to nack the message with this delay (seconds) instead of the job's
    own retry backoff. ``RetryLater(0)`` retries at once."""

    def __init__(self, delay: float, reason: str = "") -> None:
        self.delay = delay
        super().__init__(reason or f"retry in {delay}s")


@dataclass
class _Finished:
    receipt: str
    ack: bool
    delay_ms: int | None
    slot: bool


class _Slots:
    """A counting semaphore that can also hand out every free slot at once."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._changed = asyncio.Condition()

    async def take_some(self, most: int) -> int:
        """Waits for at least one free slot, then takes up to ``most``."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._free > 0)
            n = min(self._free, most)
            self._free -= n
            return n

    async def give(self, n: int = 1) -> None:
        if n <= 0:
            return
        async with self._changed:
            self._free += n
            self._changed.notify_all()


class _Backoff:
    def __init__(self, initial: float, cap: float) -> None:
        self.initial, self.cap, self.failures = initial, cap, 0

    def reset(self) -> None:
        self.failures = 0

    def next(self, retry_after: float | None) -> float:
        exponent = min(self.failures, 20)
        self.failures += 1
        if retry_after is not None:
            return min(retry_after, self.cap)
        ceiling: float = min(self.initial * 2.0**exponent, self.cap)
        return ceiling / 2 + random.random() * ceiling / 2


class Worker:
    """Processes one pull queue.

    >>> worker = Worker(AsyncClient("http://127.0.0.1:7070"), "emails", concurrency=8)
    >>> @worker.handler("email.send")
    ... async def send_email(job: Message) -> None:
    ...     await send(job.payload["to"])
    >>> worker.run_forever()   # until SIGTERM or Ctrl-C, then drains

    Without a ``fallback`` the worker leases only the types it has handlers for.
    """

    def __init__(
        self,
        client: AsyncClient,
        queue: str,
        *,
        concurrency: int = 16,
        visibility_ms: int = 30_000,
        poll_wait_ms: int = 20_000,
        shutdown_grace: float = 30.0,
        ack_batch: int = 100,
        ack_linger: float = 0.005,
    ) -> None:
        self.client = client
        self.queue = queue
        self.concurrency = max(1, concurrency)
        self.visibility_ms = visibility_ms
        self.poll_wait_ms = poll_wait_ms
        self.shutdown_grace = shutdown_grace
        self.ack_batch = min(max(1, ack_batch), MAX_LEASE)
        self.ack_linger = ack_linger
        self._handlers: dict[str, Handler] = {}
        self._fallback: Handler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = threading.Event()

    # Registration

    def handler(self, job_type: str) -> Callable[[H], H]:
        """Decorator: ``@worker.handler("email.send")`` registers the function for that type."""

        def register(fn: H) -> H:
            self.handle(job_type, fn)
            return fn

        return register

    def handle(self, job_type: str, fn: Handler) -> None:
        """Registers ``fn`` for messages of job type ``job_type``."""
        self._handlers[job_type] = fn

    def fallback(self, fn: H) -> H:
        """Decorator: handles every other type, untyped jobs included. With a fallback the
        worker leases every message of the queue."""
        self._fallback = fn
        return fn

    # Lifecycle

    def stop(self) -> None:
        """Asks the worker to stop and drain; safe from any thread or a signal handler."""
        self._stop_requested.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)

    def run_forever(self) -> None:
        """``asyncio.run(self.run())``, with SIGTERM and SIGINT stopping the worker."""
        asyncio.run(self.run(handle_signals=True))

    async def run(self, *, handle_signals: bool = False) -> None:
        """Processes messages until ``stop()`` (or, with ``handle_signals``, SIGTERM/SIGINT),
        then drains and returns. Raises after draining when the node refuses the lease in a way
        retrying cannot fix (a bad API key, invalid options); an unavailable node is retried
        with backoff, honouring ``Retry-After``."""
        if not self._handlers and self._fallback is None:
            raise ValueError("a worker needs at least one handler or a fallback")
        if self._fallback is None and len(self._handlers) > MAX_TYPES:
            raise ValueError(f"a lease names at most {MAX_TYPES} types; add a fallback")
        types = None if self._fallback is not None else sorted(self._handlers)
        loop = asyncio.get_running_loop()
        self._loop, self._stop = loop, asyncio.Event()
        if self._stop_requested.is_set():
            self._stop.set()
        installed: list[signal.Signals] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop)
                    installed.append(sig)
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="hourglass-handler")
        run = _Run(self, types, pool, self._stop)
        try:
            await run.main()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            pool.shutdown(wait=False, cancel_futures=True)
            self._loop = None


class _Run:
    """One ``Worker.run``'s state."""

    def __init__(
        self,
        worker: Worker,
        types: list[str] | None,
        pool: ThreadPoolExecutor,
        stop: asyncio.Event,
    ) -> None:
        self.w = worker
        self.types = types
        self.pool = pool
        self.stop = stop
        self.hard_stop = asyncio.Event()
        self.give_up = asyncio.Event()
        self.slots = _Slots(worker.concurrency)
        self.outcomes: asyncio.Queue[_Finished | None] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()

    async def main(self) -> None:
        completer = asyncio.create_task(self.complete())
        failure: BaseException | None = None
        try:
            await self.lease_loop()
        except HourglassError as e:
            log.error("lease refused; stopping the worker: %s", e)
            failure = e
        log.info("worker stopping; draining %d running handler(s)", len(self.tasks))
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=self.w.shutdown_grace)
            if pending:
                log.warning("grace period over; nacking %d unfinished handler(s)", len(pending))
                self.hard_stop.set()
                await asyncio.wait(pending)
        await self.outcomes.put(None)
        _, pending_completer = await asyncio.wait({completer}, timeout=self.w.shutdown_grace)
        if pending_completer:
            self.give_up.set()
            await completer
        log.info("worker stopped")
        if failure is not None:
            raise failure

    async def lease_loop(self) -> None:
        w = self.w
        backoff = _Backoff(0.2, 30.0)
        stopped = asyncio.create_task(self.stop.wait())
        try:
            while not self.stop.is_set():
                take = asyncio.create_task(self.slots.take_some(MAX_LEASE))
                await asyncio.wait({take, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not take.done():
                    take.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        n = await take
                        await self.slots.give(n)
                    return
                slots = take.result()
                if self.stop.is_set():
                    await self.slots.give(slots)
                    return
                leased_at = time.monotonic()
                lease = asyncio.create_task(
                    w.client.lease(
                        w.queue,
                        max=slots,
                        wait_ms=w.poll_wait_ms,
                        visibility_ms=w.visibility_ms,
                        types=self.types,
                    )
                )
                await asyncio.wait({lease, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not lease.done():
                    lease.cancel()
                    with contextlib.suppress(asyncio.CancelledError, HourglassError):
                        await lease
                    await self.slots.give(slots)
                    return
                try:
                    messages = lease.result()
                except HourglassError as e:
                    await self.slots.give(slots)
                    if not e.is_retryable:
                        raise
                    wait = backoff.next(getattr(e, "retry_after", None))
                    log.warning("lease failed; retrying in %.1fs: %s", wait, e)
                    await self._sleep(wait)
                    continue
                backoff.reset()
                for i, message in enumerate(messages):
                    if i >= slots:
                        log.warning("the node returned more messages than asked for")
                        await self.outcomes.put(_Finished(message.receipt, False, 0, False))
                        continue
                    task = asyncio.create_task(self.process(message, leased_at))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                await self.slots.give(slots - min(slots, len(messages)))
                # A node answering an empty poll at once would make this loop spin.
                elapsed = time.monotonic() - leased_at
                half_wait = w.poll_wait_ms / 2000
                if not messages and elapsed < half_wait:
                    await self._sleep(max(half_wait, 0.1) - elapsed)
        finally:
            stopped.cancel()

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)

    async def process(self, message: Message, leased_at: float) -> None:
        w = self.w
        handler = w._handlers.get(message.type) if message.type is not None else None
        handler = handler or w._fallback
        ack, delay_ms = False, None
        if handler is None:
            log.warning("no handler for type %r; nacking %s", message.type, message.delivery_id)
        else:
            keeper = asyncio.create_task(self.keep_leased(message.receipt, leased_at))
            running = asyncio.ensure_future(self.call(handler, message))
            hard = asyncio.create_task(self.hard_stop.wait())
            try:
                await asyncio.wait({running, hard}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                keeper.cancel()
                hard.cancel()
            if running.done():
                error = running.exception()
                if error is None:
                    ack = True
                elif isinstance(error, RetryLater):
                    delay_ms = max(0, round(error.delay * 1000))
                    log.info("handler asked to retry %s in %.3fs", message.delivery_id, error.delay)
                else:
                    log.warning(
                        "handler failed for %s (attempt %d): %r",
                        message.delivery_id,
                        message.attempt,
                        error,
                    )
            else:
                running.cancel()
                delay_ms = 0
                log.warning("handler still running at the shutdown deadline; nacked")
        await self.outcomes.put(_Finished(message.receipt, ack, delay_ms, True))

    async def call(self, handler: Handler, message: Message) -> None:
        if inspect.iscoroutinefunction(handler):
            await handler(message)
            return
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self.pool, functools.partial(handler, message))
        if inspect.isawaitable(result):
            await result

    async def keep_leased(self, receipt: str, leased_at: float) -> None:
        """Extends the lease by the visibility whenever half of it has passed."""
        w = self.w
        visibility = w.visibility_ms / 1000
        lease_ends = leased_at + visibility
        while True:
            now = time.monotonic()
            await asyncio.sleep(max((lease_ends - now) / 2, 0.1))
            asked_at = time.monotonic()
            try:
                results = await w.client.extend(w.queue, [receipt], visibility_ms=w.visibility_ms)
            except HourglassError as e:
                if e.is_retryable:
                    log.warning("cannot extend the lease yet: %s", e)
                    continue
                log.warning("extending the lease refused; giving up on it: %s", e)
                return
            if results.failed:
                log.warning("lease lost while the handler runs (%s)", results.failed[0].code)
                return
            lease_ends = asked_at + visibility

    async def complete(self) -> None:
        """Writes outcomes in batches: the first, then whatever arrives within the linger."""
        w = self.w
        done = False
        while not done:
            first = await self.outcomes.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + w.ack_linger
            while len(batch) < w.ack_batch:
                timeout = deadline - time.monotonic()
                try:
                    item = (
                        self.outcomes.get_nowait()
                        if timeout <= 0
                        else await asyncio.wait_for(self.outcomes.get(), timeout)
                    )
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            await self.flush(batch)

    async def flush(self, batch: list[_Finished]) -> None:
        acks = [f.receipt for f in batch if f.ack]
        nacks: dict[int | None, list[str]] = {}
        for f in batch:
            if not f.ack:
                nacks.setdefault(f.delay_ms, []).append(f.receipt)
        if acks:
            await self.write("ack", acks, None)
        for delay, receipts in nacks.items():
            await self.write("nack", receipts, delay)
        await self.slots.give(sum(1 for f in batch if f.slot))

    async def write(self, verb: str, receipts: Iterable[str], delay_ms: int | None) -> None:
        w = self.w
        listed = list(receipts)
        backoff = _Backoff(0.1, 10.0)
        while not self.give_up.is_set():
            try:
                if verb == "ack":
                    results = await w.client.ack(w.queue, listed)
                else:
                    results = await w.client.nack(w.queue, listed, delay_ms=delay_ms)
            except HourglassError as e:
                if not e.is_retryable:
                    log.error(
                        "%s refused; the messages come back after their visibility: %s", verb, e
                    )
                    return
                wait = backoff.next(getattr(e, "retry_after", None))
                log.warning("node unavailable; retrying %s in %.1fs: %s", verb, wait, e)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.give_up.wait(), timeout=wait)
                continue
            for failure in results.failed:
                log.warning("%s of %s refused: %s", verb, failure.receipt, failure.code)
            return
        log.warning("shut down before the node took %d %s(s); redelivered later", len(listed), verb)
