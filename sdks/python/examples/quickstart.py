"""Quickstart: a one-off job and a cron job, a list, a cancel.

    HOURGLASS_URL=http://127.0.0.1:7070 python examples/quickstart.py

Environment: HOURGLASS_URL, HOURGLASS_API_KEY, HOURGLASS_NAMESPACE.
"""

from __future__ import annotations

import os

from hourglass import ApiError, Client, NewJob, Retry, Target, after, cron


def main() -> None:
    with Client(
        os.environ.get("HOURGLASS_URL", "http://127.0.0.1:7070"),
        api_key=os.environ.get("HOURGLASS_API_KEY"),
        namespace=os.environ.get("HOURGLASS_NAMESPACE"),
    ) as client:
        # Once, in 90 seconds, to a webhook.
        reminder = client.create_job(
            NewJob(
                after("90s"),
                Target.to_webhook("https://example.com/hooks/reminder"),
                type="reminder.flight",
                payload={"passenger": "p-123", "flight": "LH 400"},
            )
        )
        print(f"one-off {reminder.id} due {reminder.next_due_at}")

        # Weekdays at 09:30 Berlin time, onto a pull queue; the key makes a re-run safe.
        digest = client.create_job(
            NewJob(
                cron("0 30 9 * * MON-FRI", "Europe/Berlin"),
                Target.to_queue("digests"),
                key="digest-acme",
                type="digest.send",
                retry=Retry(max_attempts=5, initial_backoff="30s"),
            )
        )
        print(f"cron {digest.id} next {digest.next_due_at}")

        for job in client.iter_jobs(state="active"):
            print(f"{job.id}  {job.type or '-'}  next {job.next_due_at}")

        cancelled = client.cancel_job(reminder.id)
        print(f"cancelled {cancelled.id}: {cancelled.state}")

        try:
            client.create_job(NewJob(cron("0 0 * * *", "Mars/Olympus"), Target.to_queue("q")))
        except ApiError as e:
            print(f"refused as expected: {e.code} at {e.field}")


if __name__ == "__main__":
    main()
