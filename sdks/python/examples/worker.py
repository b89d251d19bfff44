"""A pull-queue worker: handlers per job type, and a ``task`` type that switches on its payload's
``action``. Stops on SIGTERM or Ctrl-C after the running handlers finish.

    HOURGLASS_URL=http://127.0.0.1:7070 HOURGLASS_QUEUE=tasks python examples/worker.py

Environment: HOURGLASS_URL, HOURGLASS_QUEUE (default ``tasks``), HOURGLASS_API_KEY,
HOURGLASS_NAMESPACE, WORKER_CONCURRENCY (default 8).
"""

from __future__ import annotations

import asyncio
import logging
import os

from hourglass import AsyncClient, Message, RetryLater, Worker


async def generate_report(job: Message) -> None:
    await asyncio.sleep(float(job.payload.get("seconds", 0.1)))


async def send_invoice(job: Message) -> None:
    if job.payload.get("provider_down"):
        # Nack with a delay of our own choosing instead of the job's retry backoff.
        raise RetryLater(60, "the payment provider is down")


ACTIONS = {"report.generate": generate_report, "invoice.send": send_invoice}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    client = AsyncClient(
        os.environ.get("HOURGLASS_URL", "http://127.0.0.1:7070"),
        api_key=os.environ.get("HOURGLASS_API_KEY"),
        namespace=os.environ.get("HOURGLASS_NAMESPACE"),
    )
    worker = Worker(
        client,
        os.environ.get("HOURGLASS_QUEUE", "tasks"),
        concurrency=int(os.environ.get("WORKER_CONCURRENCY", "8")),
    )

    @worker.handler("task")
    async def task(job: Message) -> None:
        action = job.payload["action"]
        handler = ACTIONS.get(action)
        if handler is None:
            raise ValueError(f"unknown action {action!r}")  # nacked: retried, then dead-lettered
        print(f"start {action} {job.job_id} attempt {job.attempt}", flush=True)
        await handler(job)
        print(f"done {action} {job.job_id}", flush=True)

    @worker.handler("email.send")
    def send_email(job: Message) -> None:  # a blocking handler runs in a thread
        print(f"email to {job.payload['to']} ({job.delivery_id})", flush=True)

    worker.run_forever()


if __name__ == "__main__":
    main()
