"""The blocking and async clients against a real node."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hourglass import (
    ApiError,
    AsyncClient,
    CalendarIn,
    Callback,
    Client,
    ExcludeIn,
    JobPatch,
    Misfire,
    NewJob,
    Retry,
    Target,
    TransportError,
    Webhook,
    after,
    anchored,
    at,
    cron,
    every,
)
from hourglass._errors import parse_retry_after

from .conftest import Node, running_node

REPO = Path(__file__).resolve().parents[3]


def test_create_get_list_patch_cancel(client: Client, namespace: str) -> None:
    due = datetime.now(timezone.utc) + timedelta(hours=1)
    one_off = client.create_job(
        NewJob(
            at(due),
            Target.to_webhook("https://example.com/hook", headers={"X-Token": "s3cret"}),
            payload={"article": 42},
            type="article.publish",
            retry=Retry(max_attempts=3, initial_backoff=timedelta(seconds=2), max_backoff="1m"),
        )
    )
    assert one_off.namespace == namespace
    assert one_off.state == "active"
    assert one_off.type == "article.publish"
    assert one_off.payload == {"article": 42}
    assert one_off.next_due_at is not None
    assert abs((one_off.next_due_at - due).total_seconds()) < 0.002
    assert one_off.retry == Retry(3, "2s", "1m")
    assert one_off.target.webhook is not None
    assert one_off.target.webhook.url == "https://example.com/hook"
    assert one_off.target.webhook.headers == {"x-token": "<redacted>"}
    assert one_off.misfire == Misfire("once")

    nightly = client.create_job(
        NewJob(
            cron("0 30 9 * * MON-FRI", "Europe/Berlin"),
            Target.to_queue("digests"),
            key="digest-acme",
            misfire=Misfire("all", window="2h"),
        )
    )
    assert nightly.schedule.cron == "0 30 9 * * MON-FRI"
    assert nightly.schedule.timezone == "Europe/Berlin"
    assert nightly.target.queue == "digests"
    assert nightly.misfire == Misfire("all", "2h")
    assert nightly.payload is None

    assert client.get_job(one_off.id) == one_off
    assert client.get_job("digest-acme").id == nightly.id
    assert client.get_job("key:digest-acme").id == nightly.id

    listed = client.list_jobs()
    assert {j.id for j in listed.jobs} == {one_off.id, nightly.id}
    assert listed.next_cursor is None
    assert [j.id for j in client.list_jobs(type="article.publish").jobs] == [one_off.id]
    first = client.list_jobs(limit=1)
    assert len(first.jobs) == 1 and first.next_cursor is not None
    assert {j.id for j in client.iter_jobs(page_size=1)} == {one_off.id, nightly.id}

    patched = client.update_job(one_off.id, JobPatch(payload={"article": 43}, schedule=after("2h")))
    assert patched.payload == {"article": 43}
    assert patched.type == "article.publish"
    assert patched.next_due_at is not None and patched.next_due_at > due
    cleared = client.update_job(one_off.id, JobPatch(payload=None))
    assert cleared.payload is None

    paused = client.pause_job("digest-acme")
    assert paused.state == "paused"
    assert client.resume_job("digest-acme").state == "active"

    cancelled = client.cancel_job(one_off.id)
    assert cancelled.state == "cancelled"
    assert client.get_job(one_off.id).state == "cancelled"
    assert [j.id for j in client.list_jobs(state="cancelled").jobs] == [one_off.id]
    with pytest.raises(ApiError) as refused:
        client.pause_job(one_off.id)
    assert refused.value.status == 409
    assert refused.value.code == "invalid_state"


def test_labels_select_jobs_and_bulk_actions_change_them(client: Client) -> None:
    def job(tenant: str) -> NewJob:
        labels = {"tenant": tenant, "kind": "x"}
        return NewJob(every("1h"), Target.to_queue("labelled"), labels=labels)

    acme = client.create_job(job("acme"))
    globex = client.create_job(job("globex"))
    assert acme.labels == {"tenant": "acme", "kind": "x"}
    assert [j.id for j in client.list_jobs(label="tenant=acme").jobs] == [acme.id]
    assert [j.id for j in client.iter_jobs(label=["kind", "tenant=globex"])] == [globex.id]
    changed = client.bulk_jobs("pause", ["kind=x", "tenant=acme"])
    assert (changed.changed, changed.more, changed.next_cursor) == (1, False, None)
    assert client.get_job(acme.id).state == "paused"
    assert client.get_job(globex.id).state == "active"
    patched = client.update_job(acme.id, JobPatch(labels={}))
    assert patched.labels is None
    with pytest.raises(ApiError) as e:
        client.bulk_jobs("cancel", [])
    assert (e.value.code, e.value.field) == ("selector_required", "label")
    with pytest.raises(ApiError) as e:
        client.create_job(NewJob(every("1h"), Target.to_queue("q"), labels={"Bad": "x"}))
    assert (e.value.code, e.value.field) == ("invalid_label", "labels.Bad")


def test_idempotent_create(client: Client) -> None:
    job = NewJob(every("15m", max_runs=3), Target.to_queue("polls"), key="poll-1", payload=[1])
    first = client.create_job(job)
    again = client.create_job(job)
    assert again.id == first.id
    assert len(client.list_jobs().jobs) == 1

    with pytest.raises(ApiError) as conflict:
        client.create_job(NewJob(every("15m"), Target.to_queue("polls"), key="poll-1"))
    assert conflict.value.status == 409
    assert conflict.value.code == "key_conflict"
    assert conflict.value.field == "key"
    assert not conflict.value.is_retryable

    batch = client.create_jobs([job, NewJob(after("1h"), Target.to_queue("polls"), key="poll-2")])
    assert batch.created == 1
    assert [(j.id == first.id, j.created) for j in batch.jobs] == [(True, False), (False, True)]

    brief = client.create_jobs(
        [job, NewJob(after("1h"), Target.to_queue("polls"), key="poll-3")], prefer="return=minimal"
    )
    assert brief.created == 1
    assert [(j.id == first.id, j.key, j.state, j.created) for j in brief.jobs] == [
        (True, "poll-1", "active", False),
        (False, "poll-3", "active", True),
    ]
    assert all(j.next_due_at is not None for j in brief.jobs)


def test_errors_keep_code_message_field_and_status(client: Client) -> None:
    with pytest.raises(ApiError) as bad_zone:
        client.create_job(NewJob(cron("0 0 * * *", "Mars/Olympus"), Target.to_queue("q")))
    assert bad_zone.value.status == 422
    assert bad_zone.value.code == "unknown_timezone"
    assert bad_zone.value.field == "schedule.timezone"
    assert "Mars/Olympus" in bad_zone.value.message

    with pytest.raises(ApiError) as missing:
        client.get_job("no-such-key")
    assert missing.value.status == 404
    assert missing.value.code == "not_found"
    assert missing.value.is_not_found

    with pytest.raises(ApiError) as bad_limit:
        client.list_jobs(limit=5000)
    assert (bad_limit.value.status, bad_limit.value.code) == (400, "invalid_query")
    assert bad_limit.value.field == "limit"

    with pytest.raises(ValueError):
        NewJob(at(datetime(2030, 1, 1)), Target.to_queue("q")).to_json()  # naive datetime


def test_a_call_the_keys_role_may_not_make_is_an_api_error_naming_the_roles() -> None:
    key = "hg_reader-key-of-the-sdk-tests"
    sha256 = hashlib.sha256(key.encode()).hexdigest()
    config = f'[[api_keys]]\nnamespace = "acme"\nrole = "reader"\nsha256 = "{sha256}"\n'
    with running_node(config) as node, Client(node.url, api_key=key) as reader:
        assert reader.list_jobs().jobs == []
        with pytest.raises(ApiError) as refused:
            reader.create_job(NewJob(after("1h"), Target.to_queue("q")))
    assert refused.value.status == 403
    assert refused.value.code == "insufficient_role"
    assert refused.value.field == "authorization"
    assert "writer or admin" in refused.value.message


def test_retry_after_is_read_in_both_forms() -> None:
    assert parse_retry_after("1") == 1.0
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now) == 30.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_unreachable_node_is_a_retryable_transport_error() -> None:
    with Client("http://127.0.0.1:9", timeout=2) as dead, pytest.raises(TransportError) as e:
        dead.healthz()
    assert e.value.is_retryable


def test_trigger_runs_and_queues(client: Client) -> None:
    job = client.create_job(
        NewJob(after("1h"), Target.to_queue("reports"), type="report", payload={"n": 1})
    )
    triggered = client.trigger_job(job.id, idempotency_key="try-1")
    assert triggered.delivery_id.startswith(job.id.replace("-", "") + "_")
    again = client.trigger_job(job.id, idempotency_key="try-1")
    assert again.delivery_id == triggered.delivery_id

    queue = client.get_queue("reports")
    assert (queue.name, queue.available) == ("reports", 1)
    assert [q.name for q in client.list_queues()] == ["reports"]
    messages = client.lease("reports", max=5, visibility_ms=5000)
    assert [m.delivery_id for m in messages] == [triggered.delivery_id]
    message = messages[0]
    assert (message.job_id, message.type, message.payload) == (job.id, "report", {"n": 1})
    assert message.attempt == 1 and not message.is_last_attempt
    extended = client.extend("reports", [message.receipt], visibility_ms=10_000)
    assert extended.succeeded == [message.receipt]
    assert extended.visible_until is not None
    nacked = client.nack("reports", [message.receipt], delay_ms=0)
    assert nacked.succeeded == [message.receipt]
    redelivered = client.lease("reports", wait_ms=5000)
    assert [(m.delivery_id, m.attempt) for m in redelivered] == [(triggered.delivery_id, 2)]
    stale = client.ack("reports", [message.receipt])
    assert stale.succeeded == []
    assert [(f.receipt, f.is_stale_receipt) for f in stale.failed] == [(message.receipt, True)]
    assert client.ack("reports", [redelivered[0].receipt]).succeeded == [redelivered[0].receipt]
    assert client.lease("reports") == []

    runs = client.list_job_runs(job.id)
    assert [r.delivery_id for r in runs.runs] == [triggered.delivery_id] * len(runs.runs)
    assert runs.runs[0].outcome == "delivered"


def test_allow_hands_each_occurrence_to_a_message_of_its_own(client: Client) -> None:
    job = client.create_job(
        NewJob(every("1h"), Target.to_queue("allowed"), overlap="allow", payload={"n": 1})
    )
    assert job.overlap == "allow"
    first_trigger = client.trigger_job(job.id)
    [first] = client.lease("allowed", wait_ms=5000, visibility_ms=60_000)
    assert (first.job_id, first.delivery_id, first.payload) == (
        job.id,
        first_trigger.delivery_id,
        {"n": 1},
    )
    # The first is leased and not acknowledged: the next occurrence still goes out.
    second_trigger = client.trigger_job(job.id)
    [second] = client.lease("allowed", wait_ms=5000, visibility_ms=60_000)
    assert second.delivery_id == second_trigger.delivery_id != first.delivery_id
    handed_off = client.list_jobs(label=f"hourglass/occurrence-of={job.id}").jobs
    assert len(handed_off) == 2
    delivering = [client.get_job(j.id).occurrence_of for j in handed_off]
    assert {o.delivery_id for o in delivering if o} == {first.delivery_id, second.delivery_id}
    acked = client.ack("allowed", [first.receipt, second.receipt])
    assert sorted(acked.succeeded) == sorted([first.receipt, second.receipt])
    runs = client.list_job_runs(job.id).runs
    assert {r.delivery_id for r in runs if r.outcome == "delivered"} == {
        first.delivery_id,
        second.delivery_id,
    }


def test_backfill_runs_a_past_range_once(client: Client) -> None:
    start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=10)
    job = client.create_job(NewJob(every("1h", start=start), Target.to_queue("backfilled")))
    from_, to = start + timedelta(hours=1), start + timedelta(hours=3)
    assert client.backfill_job(job.id, from_, to).occurrences == 2
    with pytest.raises(ApiError) as refused:
        client.backfill_job(job.id, to, from_)
    assert (refused.value.status, refused.value.field) == (422, "to")


def test_calendars_put_get_list_roll_and_refuse_a_delete_in_use(client: Client) -> None:
    weekends = CalendarIn("Europe/Berlin", ExcludeIn(weekdays=["SAT", "SUN"]))
    put = client.put_calendar("business", weekends)
    assert (put.name, put.timezone, put.replanned) == ("business", "Europe/Berlin", 0)
    assert client.get_calendar("business").exclude.weekdays == ["SAT", "SUN"]
    assert [c.name for c in client.list_calendars()] == ["business"]
    # The 5th at 09:00 Berlin: 5 January 2030 is a Saturday, rolled to Friday the 4th.
    payroll = cron(
        "0 0 9 5 * *",
        "Europe/Berlin",
        start="2030-01-01T00:00:00Z",
        calendar="business",
        roll="previous",
    )
    job = client.create_job(NewJob(payroll, Target.to_queue("payroll")))
    assert job.next_due_at == datetime(2030, 1, 5, 8, tzinfo=timezone.utc)
    assert job.next_fire_at == datetime(2030, 1, 4, 8, tzinfo=timezone.utc)
    with pytest.raises(ApiError) as in_use:
        client.delete_calendar("business")
    assert (in_use.value.status, in_use.value.code) == (409, "calendar_in_use")
    client.cancel_job(job.id)
    client.delete_calendar("business")
    with pytest.raises(ApiError) as gone:
        client.get_calendar("business")
    assert gone.value.status == 404
    assert client.list_calendars() == []


def test_anchors_move_their_jobs_and_a_callback_is_kept(client: Client) -> None:
    departs = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=10)
    put = client.put_anchor("flight-LH400", departs)
    assert (put.name, put.jobs_moved) == ("flight-LH400", 0)
    reminder = client.create_job(
        NewJob(
            anchored("flight-LH400", timedelta(hours=-8)),
            Target.to_queue("reminders"),
            on_failure=Callback(Target.to_queue("alerts")),
        )
    )
    assert reminder.next_due_at == departs - timedelta(hours=8)
    assert reminder.on_failure is not None
    assert reminder.on_failure.target.queue == "alerts"
    later = departs + timedelta(hours=3)
    assert client.put_anchor("flight-LH400", later).jobs_moved == 1
    assert client.get_job(reminder.id).next_due_at == later - timedelta(hours=8)
    assert [j.id for j in client.list_jobs(anchor="flight-LH400").jobs] == [reminder.id]
    assert [a.name for a in client.list_anchors()] == ["flight-LH400"]
    with pytest.raises(ApiError) as in_use:
        client.delete_anchor("flight-LH400", if_unused=True)
    assert (in_use.value.status, in_use.value.code) == (409, "anchor_in_use")
    assert client.delete_anchor("flight-LH400").jobs_cancelled == 1
    assert client.get_job(reminder.id).state == "cancelled"


def test_queue_messages_waiting_and_leased(client: Client) -> None:
    first = client.create_job(NewJob(after("1h"), Target.to_queue("outbox"), key="m1"))
    second = client.create_job(NewJob(after("1h"), Target.to_queue("outbox"), key="m2"))
    client.trigger_job(first.id)
    [held] = client.lease("outbox", wait_ms=5000, visibility_ms=60_000)
    assert held.job_id == first.id

    page = client.list_queue_messages("outbox")
    assert page.next_cursor is None
    by_id = {m.job_id: m for m in page.messages}
    assert [m.job_id for m in page.messages] == sorted(by_id)
    leased, waiting = by_id[first.id], by_id[second.id]
    assert (leased.status, leased.leased_until, leased.available_at) == (
        "leased",
        held.visible_until,
        None,
    )
    assert (leased.key, leased.delivery_id, leased.failed_attempts) == ("m1", held.delivery_id, 0)
    assert (waiting.status, waiting.available_at, waiting.leased_until) == (
        "scheduled",
        waiting.due_at,
        None,
    )
    assert first.last_error is None

    client.nack("outbox", [held.receipt], delay_ms=600_000)
    one = client.list_queue_messages("outbox", limit=1)
    assert one.next_cursor is not None
    rest = client.list_queue_messages("outbox", limit=1, cursor=one.next_cursor)
    nacked = next(m for m in one.messages + rest.messages if m.job_id == first.id)
    assert (nacked.status, nacked.failed_attempts) == ("scheduled", 1)
    assert nacked.last_error == "nacked by the worker"
    assert client.get_job(first.id).last_error == "nacked by the worker"
    with pytest.raises(ApiError) as bad:
        client.list_queue_messages("outbox", cursor="nope")
    assert (bad.value.status, bad.value.code, bad.value.field) == (400, "invalid_query", "cursor")


def test_dead_letters_replay_and_delete(client: Client) -> None:
    job = client.create_job(
        NewJob(after("1h"), Target.to_queue("flaky"), retry=Retry(max_attempts=1))
    )
    client.trigger_job(job.id)
    [message] = client.lease("flaky", wait_ms=5000)
    client.nack("flaky", [message.receipt])
    [dead] = client.list_dead_letters().dead_letters
    assert (dead.job_id, dead.delivery_id, dead.attempts) == (job.id, message.delivery_id, 1)
    assert dead.target.queue == "flaky"
    assert client.get_dead_letter(dead.id) == dead
    assert client.get_job(job.id).state == "failed"
    replayed = client.replay_dead_letter(dead.id)
    assert replayed.id != job.id and replayed.state == "active"
    assert client.list_dead_letters().dead_letters == []

    client.trigger_job(replayed.id)
    [again] = client.lease("flaky", wait_ms=5000)
    client.nack("flaky", [again.receipt])
    [dead2] = client.list_dead_letters().dead_letters
    client.delete_dead_letter(dead2.id)
    with pytest.raises(ApiError) as gone:
        client.get_dead_letter(dead2.id)
    assert gone.value.status == 404


def test_preview_health_breakers_metrics_secret(client: Client, namespace: str) -> None:
    preview = client.preview_schedule(every("15m", max_runs=3), count=5)
    assert len(preview.fire_times) == 3
    assert preview.fire_times[1] - preview.fire_times[0] == timedelta(minutes=15)
    assert "15m" in preview.description
    assert preview.nominal_times is None
    job_id = "0190f3c2-7b1e-7a3b-9c4d-5e6f708192a3"
    jittered = client.preview_schedule(
        every("15m", max_runs=3, jitter="5m"), count=5, job_id=job_id
    )
    assert jittered.nominal_times is not None and len(jittered.nominal_times) == 3
    for fire, due in zip(jittered.fire_times, jittered.nominal_times, strict=True):
        assert timedelta(0) <= fire - due < timedelta(minutes=5)
    assert client.healthz().status == "ok"
    assert client.readyz().status == "ready"
    assert client.list_open_breakers() == []
    assert "hourglass_build_info" in client.metrics()
    secret = client.rotate_signing_secret(overlap="0s")
    assert secret.namespace == namespace
    assert secret.signing_secret.startswith("whsec_")
    assert secret.previous_valid_until is None
    assert "whsec_" not in repr(secret)
    # Read back without rotating: the same secret, at every read.
    current = client.signing_secret()
    assert current.namespace == namespace
    assert current.signing_secret == secret.signing_secret
    assert current.previous_valid_until is None
    assert "whsec_" not in repr(current)
    assert client.signing_secret().signing_secret == secret.signing_secret


def test_list_nodes_shows_the_node_serving(client: Client) -> None:
    # The node's first heartbeat is written as its engine starts: wait until it shows.
    deadline = time.monotonic() + 30
    while not (nodes := client.list_nodes()):
        assert time.monotonic() < deadline, "the node never listed itself"
        time.sleep(0.05)
    assert len(nodes) == 1
    assert nodes[0].id
    assert nodes[0].claims_held >= 0
    assert nodes[0].started_at <= nodes[0].last_heartbeat


def test_whoami_says_what_the_key_may_do(client: Client) -> None:
    # The test node has no keys: development, an admin of every namespace.
    who = client.whoami()
    assert who.development is True
    assert who.role == "admin"
    assert who.all_namespaces is True
    routes = {(r.method, r.path) for r in who.routes}
    assert ("POST", "/v1/jobs") in routes
    assert ("GET", "/v1/nodes") in routes
    assert ("GET", "/healthz") not in routes


def test_get_summary_decodes_the_figures_the_dashboard_charts(client: Client) -> None:
    summary = client.get_summary()
    lateness = summary.node.fire_lateness
    # Cumulative counts by ascending bound, none above the total (the unbounded bucket).
    bounds = [b.le for b in lateness.buckets]
    counts = [b.count for b in lateness.buckets]
    assert len(bounds) == 13 and bounds == sorted(bounds)
    assert counts == sorted(counts) and all(c <= lateness.count for c in counts)
    assert summary.node.deliveries.delivered >= 0
    assert summary.store.jobs.active >= 0
    assert summary.store.queue_messages.available >= 0


def test_the_served_openapi_document_is_the_one_the_sdk_is_checked_against(client: Client) -> None:
    served = client.openapi()
    on_disk = json.loads((REPO / "crates/server/openapi.json").read_text())
    assert served == on_disk


def test_async_client(node: Node, namespace: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(node.url, namespace=namespace) as client:
            created = await asyncio.gather(
                *(
                    client.create_job(
                        NewJob(after("1h"), Target(webhook=Webhook("https://example.com/a")))
                    )
                    for _ in range(3)
                )
            )
            ids = {j.id for j in created}
            assert len(ids) == 3
            assert {j.id async for j in client.iter_jobs(page_size=2)} == ids
            one = created[0]
            assert (await client.get_job(one.id)).id == one.id
            patched = await client.update_job(one.id, JobPatch(type="renamed"))
            assert patched.type == "renamed"
            current = await client.signing_secret()
            assert current.signing_secret.startswith("whsec_")
            assert (await client.signing_secret()) == current
            assert (await client.cancel_job(one.id)).state == "cancelled"
            messages = await client.list_queue_messages("nobody")
            assert (messages.messages, messages.next_cursor) == ([], None)
            with pytest.raises(ApiError) as e:
                await client.create_job(NewJob(after("-5s"), Target.to_queue("q")))
            assert e.value.code == "invalid_duration"
            assert e.value.field == "schedule.after"

    asyncio.run(scenario())
