"""Bus and cloud targets, and the connections they name, against a node with a config file.

No bus or cloud service runs: the jobs are due in an hour, so nothing is published while the
tests run (the node connects only to publish)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from hourglass import (
    AmqpTarget,
    ApiError,
    AsyncClient,
    Client,
    EventBridgeTarget,
    JobPatch,
    JobTarget,
    LambdaTarget,
    NatsTarget,
    NewJob,
    RedisStreamTarget,
    SnsTarget,
    SqsTarget,
    Target,
    after,
)

from .conftest import Node, running_node

# Names and kinds only matter here; the AWS connection has static credentials and a local
# endpoint so that nothing would leave the machine even if something were published. The NATS
# connections point where nothing listens (the discard port), so the node cannot ask for streams
# and takes the jobs, whatever runs on this machine's NATS port.
CONFIG = """
[connections.bus]
kind = "nats"
url = "nats://127.0.0.1:9"

[connections.aws]
kind = "aws"
region = "eu-central-1"
endpoint_url = "http://127.0.0.1:9"
access_key_id = "AKIDEXAMPLE"
secret_access_key = "not-a-secret"

[connections.r]
kind = "redis"
url = "redis://127.0.0.1:6379/0"

[connections.rmq]
kind = "amqp"
url = "amqp://guest:guest@127.0.0.1:5672/%2f"

[connections.elsewhere]
kind = "nats"
url = "nats://127.0.0.1:9"
namespaces = ["someone-else"]
"""

QUEUE_URL = "https://sqs.eu-central-1.amazonaws.com/123456789012/reminders.fifo"


@pytest.fixture(scope="module")
def bus_node() -> Iterator[Node]:
    with running_node(CONFIG) as started:
        yield started


@pytest.fixture
def bus_client(bus_node: Node, namespace: str) -> Iterator[Client]:
    with Client(bus_node.url, namespace=namespace) as c:
        yield c


def test_nats_and_sqs_jobs_come_back_with_their_typed_targets(bus_client: Client) -> None:
    nats = bus_client.create_job(
        NewJob(after("1h"), Target.to_nats("bus", "jobs.reminder"), type="reminder")
    )
    sqs = bus_client.create_job(
        NewJob(after("1h"), Target.to_sqs("aws", QUEUE_URL, group_id="acme"), payload={"n": 1})
    )
    assert nats.target == JobTarget(nats=NatsTarget("bus", "jobs.reminder"))
    assert nats.target.kind == "nats"
    assert sqs.target.sqs == SqsTarget("aws", QUEUE_URL, "acme")
    assert sqs.target.kind == "sqs"

    assert bus_client.get_job(nats.id) == nats
    assert bus_client.get_job(sqs.id).target.sqs == SqsTarget(
        connection="aws", queue_url=QUEUE_URL, group_id="acme"
    )
    listed = {j.id: j.target for j in bus_client.iter_jobs()}
    assert listed == {nats.id: nats.target, sqs.id: sqs.target}

    without_group = bus_client.update_job(sqs.id, JobPatch(target=Target.to_sqs("aws", QUEUE_URL)))
    assert without_group.target.sqs == SqsTarget("aws", QUEUE_URL)
    assert without_group.target.sqs.group_id is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            Target.to_eventbridge("aws", "orders", "hourglass", "job-reminder"),
            JobTarget(eventbridge=EventBridgeTarget("aws", "orders", "hourglass", "job-reminder")),
        ),
        (
            Target.to_sns("aws", "arn:aws:sns:eu-central-1:123456789012:reminders"),
            JobTarget(sns=SnsTarget("aws", "arn:aws:sns:eu-central-1:123456789012:reminders")),
        ),
        (
            Target.to_lambda("aws", "reminders"),
            JobTarget(lambda_=LambdaTarget("aws", "reminders")),
        ),
        (
            Target.to_redis_stream("r", "jobs"),
            JobTarget(redis_stream=RedisStreamTarget("r", "jobs")),
        ),
        (
            Target.to_amqp("rmq", "jobs", routing_key="reminder"),
            JobTarget(amqp=AmqpTarget("rmq", "jobs", "reminder")),
        ),
        # The node shows a routing key left out as "".
        (Target.to_amqp("rmq", ""), JobTarget(amqp=AmqpTarget("rmq", "", ""))),
    ],
    ids=lambda value: getattr(value, "kind", None) or "",
)
def test_every_kind_round_trips(bus_client: Client, target: Target, expected: JobTarget) -> None:
    # An EventBridge event's detail is the payload: a JSON object.
    job = bus_client.create_job(NewJob(after("1h"), target, payload={"flight": "LH 400"}))
    assert job.target == expected
    assert job.target.kind == target.kind
    assert bus_client.get_job(job.id).target == expected


def test_list_connections(bus_client: Client) -> None:
    connections = {c.name: c for c in bus_client.list_connections()}
    # `elsewhere` is for another namespace only: not listed here.
    assert {name: c.kind for name, c in connections.items()} == {
        "aws": "aws",
        "bus": "nats",
        "r": "redis",
        "rmq": "amqp",
    }
    # Every namespace may use `bus`: its publish counts would be theirs too, so none are shown.
    assert connections["bus"].published is None


def test_an_unknown_connection_is_a_typed_api_error(bus_client: Client) -> None:
    with pytest.raises(ApiError) as unknown:
        bus_client.create_job(NewJob(after("1h"), Target.to_nats("nope", "jobs.reminder")))
    assert unknown.value.status == 422
    assert unknown.value.code == "unknown_connection"
    assert unknown.value.field == "target.nats.connection"
    assert not unknown.value.is_retryable

    # One the namespace may not use answers the same.
    with pytest.raises(ApiError) as not_ours:
        bus_client.create_job(NewJob(after("1h"), Target.to_nats("elsewhere", "jobs.reminder")))
    assert (not_ours.value.code, not_ours.value.field) == (
        "unknown_connection",
        "target.nats.connection",
    )

    # A connection of another kind is a malformed field.
    with pytest.raises(ApiError) as wrong_kind:
        bus_client.create_job(NewJob(after("1h"), Target.to_sqs("bus", QUEUE_URL)))
    assert (wrong_kind.value.status, wrong_kind.value.field) == (422, "target.sqs.connection")
    assert bus_client.list_jobs().jobs == []


def test_async_client_lists_connections(bus_node: Node, namespace: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(bus_node.url, namespace=namespace) as client:
            assert sorted(c.name for c in await client.list_connections()) == [
                "aws",
                "bus",
                "r",
                "rmq",
            ]
            job = await client.create_job(NewJob(after("1h"), Target.to_lambda("aws", "f")))
            assert job.target.lambda_ == LambdaTarget("aws", "f")

    asyncio.run(scenario())


def test_a_target_is_exactly_one_kind() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Target()
    with pytest.raises(ValueError, match="exactly one"):
        Target(queue="q", nats=NatsTarget("bus", "s"))
    assert Target.to_lambda("aws", "f").to_json() == {
        "lambda": {"connection": "aws", "function": "f"}
    }
    assert Target.to_sqs("aws", QUEUE_URL).to_json() == {
        "sqs": {"connection": "aws", "queue_url": QUEUE_URL}
    }
    assert JobTarget.from_json({"kafka": {"topic": "t"}}).kind is None


def test_the_node_without_a_config_file_has_no_connections(client: Client) -> None:
    assert client.list_connections() == []
    with pytest.raises(ApiError) as unknown:
        client.create_job(NewJob(after("1h"), Target.to_nats("bus", "jobs.reminder")))
    assert unknown.value.code == "unknown_connection"
