"""The API's JSON shapes as dataclasses.

Field names are the wire names (the API is snake_case already), so a model reads like the
OpenAPI document and the README. Each model names the OpenAPI schema(s) it stands for in
``__schema__``; ``scripts/sdk-openapi-check`` compares those fields with the document, so a field
the node adds and this package misses fails CI.

Models the node sends (``Job``, ``Message``, ...) are built with ``from_json``, which ignores
fields it does not know: an older client keeps working against a newer node. Models the caller
sends (``NewJob``, schedules, targets) have ``to_json``, which leaves out what was not set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar, cast

JSON: TypeAlias = Any
"""Any JSON value: a payload as ``json.loads`` returns it."""

JobState = Literal["active", "paused", "completed", "failed", "cancelled"]
MisfirePolicy = Literal["skip", "once", "all"]
RunOutcome = Literal["delivered", "retry", "dead_letter"]
ReceiptFailureCode = Literal["stale_receipt"]
HealthStatus = Literal["ok", "ready"]
ConnectionKind = Literal["aws", "eventbridge", "sqs", "sns", "lambda", "nats", "redis", "amqp"]
QueueMessageStatus = Literal["available", "scheduled", "leased"]
ErrorCode = Literal[
    "body_timeout",
    "body_too_large",
    "cron_never_fires",
    "engine_failed",
    "forbidden",
    "forbidden_target",
    "instant_in_past",
    "instant_too_far",
    "internal",
    "invalid_batch",
    "invalid_cron",
    "invalid_duration",
    "invalid_field",
    "invalid_header",
    "invalid_host",
    "invalid_id",
    "invalid_idempotency_key",
    "invalid_instant",
    "invalid_json",
    "invalid_misfire",
    "invalid_namespace",
    "invalid_query",
    "invalid_queue",
    "invalid_receipt",
    "invalid_schedule",
    "invalid_state",
    "invalid_target",
    "invalid_url",
    "key_conflict",
    "method_not_allowed",
    "missing_field",
    "not_found",
    "not_ready",
    "payload_too_large",
    "quota_exceeded",
    "rate_limited",
    "schedule_never_fires",
    "server_busy",
    "store_unavailable",
    "unauthorized",
    "unknown_connection",
    "unknown_field",
    "unknown_timezone",
    "unsupported_media_type",
]
"""The node's error codes when this package was made. ``ApiError.code`` is a plain ``str``: a
newer node may send a code that is not listed here."""

ENUMS: Mapping[str, object] = {
    "JobState": JobState,
    "ErrorCode": ErrorCode,
    "Misfire.policy": MisfirePolicy,
    "Run.outcome": RunOutcome,
    "ReceiptResults.failed[].code": ReceiptFailureCode,
    "Status.status": HealthStatus,
    "ConnectionList.connections[].kind": ConnectionKind,
    "QueueMessageStatus": QueueMessageStatus,
}
"""Which OpenAPI enum each ``Literal`` above mirrors (for the OpenAPI check)."""

UNWRAPPED: Mapping[str, str] = {
    "Error": "the envelope of every error answer; its `error` object becomes ApiError",
}
"""OpenAPI object schemas that have no model of their own here, and why."""


class _Unset:
    """The type of ``UNSET``."""

    _instance: ClassVar[_Unset | None] = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()
"""A field left out of the request (``None`` is sent as JSON ``null``, where that means
something: a patch's ``payload=None`` clears the payload)."""


# ---------------------------------------------------------------------------------------------
# Conversions


def instant_text(value: datetime | str) -> str:
    """An instant as the node reads it: RFC 3339 with an offset. Naive datetimes are refused:
    the node needs to know which zone they are in."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a datetime sent to hourglass must be timezone-aware")
    return value.isoformat(timespec="milliseconds")


def duration_text(value: timedelta | str) -> str:
    """A duration as the node reads it (``"90s"``, ``"1500ms"``); strings pass through as given."""
    if isinstance(value, str):
        return value
    ms = round(value.total_seconds() * 1000)
    if ms <= 0:
        raise ValueError("durations sent to hourglass must be positive")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def parse_instant(text: str) -> datetime:
    """An instant from the node (UTC, millisecond precision, ``Z``), timezone-aware."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python 3.10's fromisoformat takes 3 or 6 fractional digits only.
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if match and match.group(2):
        frac = (match.group(2)[1:] + "000000")[:6]
        text = f"{match.group(1)}.{frac}{match.group(3)}"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def _opt_instant(value: Any) -> datetime | None:
    return None if value is None else parse_instant(str(value))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _drop_unset(pairs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pairs.items() if v is not UNSET}


# ---------------------------------------------------------------------------------------------
# Schedules (sent)


@dataclass(frozen=True)
class AtSchedule:
    """Once, at an instant (at most 5 minutes in the past: it then fires at once)."""

    __schema__: ClassVar[tuple[str, ...]] = ("AtSchedule",)
    at: datetime | str

    def to_json(self) -> dict[str, Any]:
        return {"at": instant_text(self.at)}


@dataclass(frozen=True)
class AfterSchedule:
    """Once, after a delay from now (``"90s"``, ``timedelta(minutes=5)``)."""

    __schema__: ClassVar[tuple[str, ...]] = ("AfterSchedule",)
    after: timedelta | str

    def to_json(self) -> dict[str, Any]:
        return {"after": duration_text(self.after)}


@dataclass(frozen=True)
class CronSchedule:
    """A cron expression (5 fields, or 6 with seconds first) on an IANA zone's wall clock."""

    __schema__: ClassVar[tuple[str, ...]] = ("CronSchedule",)
    cron: str
    timezone: str | None = None
    start: datetime | str | None = None
    end: datetime | str | None = None
    max_runs: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cron": self.cron}
        if self.timezone is not None:
            out["timezone"] = self.timezone
        _bounds(out, self.start, self.end, self.max_runs)
        return out


@dataclass(frozen=True)
class EverySchedule:
    """A fixed interval (at least 1 s), anchored at ``start`` or at creation."""

    __schema__: ClassVar[tuple[str, ...]] = ("EverySchedule",)
    every: timedelta | str
    start: datetime | str | None = None
    end: datetime | str | None = None
    max_runs: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"every": duration_text(self.every)}
        _bounds(out, self.start, self.end, self.max_runs)
        return out


def _bounds(
    out: dict[str, Any],
    start: datetime | str | None,
    end: datetime | str | None,
    max_runs: int | None,
) -> None:
    if start is not None:
        out["start"] = instant_text(start)
    if end is not None:
        out["end"] = instant_text(end)
    if max_runs is not None:
        out["max_runs"] = max_runs


Schedule: TypeAlias = AtSchedule | AfterSchedule | CronSchedule | EverySchedule


def at(instant: datetime | str) -> AtSchedule:
    """``Schedule`` shorthand: once at ``instant``."""
    return AtSchedule(instant)


def after(delay: timedelta | str) -> AfterSchedule:
    """``Schedule`` shorthand: once after ``delay``."""
    return AfterSchedule(delay)


def cron(
    expression: str,
    timezone: str | None = None,
    *,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    max_runs: int | None = None,
) -> CronSchedule:
    """``Schedule`` shorthand: by cron expression, in ``timezone`` (default UTC)."""
    return CronSchedule(expression, timezone, start, end, max_runs)


def every(
    interval: timedelta | str,
    *,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    max_runs: int | None = None,
) -> EverySchedule:
    """``Schedule`` shorthand: every ``interval``."""
    return EverySchedule(interval, start, end, max_runs)


@dataclass(frozen=True)
class JobSchedule:
    """A job's schedule as the node shows it: ``after`` has become ``at``."""

    __schema__: ClassVar[tuple[str, ...]] = ("JobSchedule",)
    at: datetime | None = None
    cron: str | None = None
    timezone: str | None = None
    every: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    max_runs: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobSchedule:
        return cls(
            at=_opt_instant(data.get("at")),
            cron=_opt_str(data.get("cron")),
            timezone=_opt_str(data.get("timezone")),
            every=_opt_str(data.get("every")),
            start=_opt_instant(data.get("start")),
            end=_opt_instant(data.get("end")),
            max_runs=_opt_int(data.get("max_runs")),
        )


# ---------------------------------------------------------------------------------------------
# Targets, retry, misfire


@dataclass(frozen=True)
class WebhookBatch:
    """Deliver in batches of up to ``max_items`` (1 to 1000) occurrences a request; verify them
    with ``WebhookVerifier.verify_batch``."""

    __schema__: ClassVar[tuple[str, ...]] = ("WebhookBatch",)
    max_items: int

    def to_json(self) -> dict[str, Any]:
        return {"max_items": self.max_items}


@dataclass(frozen=True)
class Webhook:
    """A webhook target: the node POSTs each occurrence's payload to ``url``."""

    __schema__: ClassVar[tuple[str, ...]] = ("Webhook",)
    url: str
    headers: Mapping[str, str] | None = None
    rate_limit: int | None = None
    batch: WebhookBatch | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"url": self.url}
        if self.headers is not None:
            out["headers"] = dict(self.headers)
        if self.rate_limit is not None:
            out["rate_limit"] = self.rate_limit
        if self.batch is not None:
            out["batch"] = self.batch.to_json()
        return out


_C = TypeVar("_C", bound="_ConnectionTarget")


@dataclass(frozen=True)
class _ConnectionTarget:
    """The field every bus and cloud target has: ``connection`` names one the node's operator
    configured (``[connections.NAME]`` in its config file) for this namespace;
    ``Client.list_connections()`` lists them."""

    connection: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls: type[_C], data: Mapping[str, Any]) -> _C:
        values: dict[str, Any] = {}
        for f in fields(cls):
            required = f.default is MISSING
            values[f.name] = str(data[f.name]) if required else _opt_str(data.get(f.name))
        return cls(**values)


@dataclass(frozen=True)
class EventBridgeTarget(_ConnectionTarget):
    """PutEvents to an EventBridge bus (a name or ARN): the payload, a JSON object, is the
    event's ``detail``; the occurrence's facts are in its ``resources``."""

    __schema__: ClassVar[tuple[str, ...]] = ("EventBridgeTarget",)
    bus: str
    source: str
    detail_type: str


@dataclass(frozen=True)
class SqsTarget(_ConnectionTarget):
    """A message to an SQS queue: the body is the payload. ``group_id`` is for FIFO queues
    (default: the job id)."""

    __schema__: ClassVar[tuple[str, ...]] = ("SqsTarget",)
    queue_url: str
    group_id: str | None = None


@dataclass(frozen=True)
class SnsTarget(_ConnectionTarget):
    """A message published to an SNS topic: the message is the payload. ``group_id`` is for
    FIFO topics (default: the job id)."""

    __schema__: ClassVar[tuple[str, ...]] = ("SnsTarget",)
    topic_arn: str
    group_id: str | None = None


@dataclass(frozen=True)
class LambdaTarget(_ConnectionTarget):
    """An asynchronous invocation of a Lambda function (a name or ARN); the event is
    ``{"delivery_id", "job_id", "type", "due_at", "attempt", "payload"}``."""

    __schema__: ClassVar[tuple[str, ...]] = ("LambdaTarget",)
    function: str


@dataclass(frozen=True)
class NatsTarget(_ConnectionTarget):
    """A NATS JetStream publish of the payload on ``subject`` (``Nats-Msg-Id``: the delivery
    id)."""

    __schema__: ClassVar[tuple[str, ...]] = ("NatsTarget",)
    subject: str


@dataclass(frozen=True)
class RedisStreamTarget(_ConnectionTarget):
    """An ``XADD`` to a Redis stream, with fields ``payload``, ``delivery_id``, ``job_id``,
    ``due_at``, ``attempt`` and ``job_type``."""

    __schema__: ClassVar[tuple[str, ...]] = ("RedisStreamTarget",)
    stream: str


@dataclass(frozen=True)
class AmqpTarget(_ConnectionTarget):
    """A persistent, confirmed AMQP 0-9-1 publish to ``exchange`` (``""``: the default
    exchange) with ``routing_key``."""

    __schema__: ClassVar[tuple[str, ...]] = ("AmqpTarget",)
    exchange: str
    routing_key: str | None = None


ConnectionTarget: TypeAlias = (
    EventBridgeTarget
    | SqsTarget
    | SnsTarget
    | LambdaTarget
    | NatsTarget
    | RedisStreamTarget
    | AmqpTarget
)
"""A target published through one of the operator's connections."""


def _target_kind(target: Target | JobTarget) -> str | None:
    """The API's name of the kind a target has (the field ``lambda_`` is ``lambda``)."""
    for f in fields(target):
        if getattr(target, f.name) is not None:
            return f.name.rstrip("_")
    return None


@dataclass(frozen=True)
class Target:
    """Where occurrences go: exactly one of a webhook, a pull queue, or a bus or cloud service
    through a connection the operator configured (``Target.to_nats("bus", "jobs.reminder")``).
    The field ``lambda_`` is the API's ``lambda`` (a Python keyword)."""

    __schema__: ClassVar[tuple[str, ...]] = ("Target",)
    webhook: Webhook | None = None
    queue: str | None = None
    eventbridge: EventBridgeTarget | None = None
    sqs: SqsTarget | None = None
    sns: SnsTarget | None = None
    lambda_: LambdaTarget | None = None
    nats: NatsTarget | None = None
    redis_stream: RedisStreamTarget | None = None
    amqp: AmqpTarget | None = None

    def __post_init__(self) -> None:
        chosen = [f.name for f in fields(self) if getattr(self, f.name) is not None]
        if len(chosen) != 1:
            kinds = ", ".join(f.name for f in fields(self))
            raise ValueError(f"a target is exactly one of {kinds}; got {chosen or 'none'}")

    @property
    def kind(self) -> str:
        """The API's name of this target's kind: ``webhook``, ``queue``, ``nats``, ..."""
        return _target_kind(self) or ""

    @classmethod
    def to_webhook(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        rate_limit: int | None = None,
        batch: int | None = None,
    ) -> Target:
        """``batch``: deliver in batches of up to this many occurrences a request."""
        return cls(
            webhook=Webhook(
                url, headers, rate_limit, WebhookBatch(batch) if batch is not None else None
            )
        )

    @classmethod
    def to_queue(cls, name: str) -> Target:
        return cls(queue=name)

    @classmethod
    def to_eventbridge(cls, connection: str, bus: str, source: str, detail_type: str) -> Target:
        return cls(eventbridge=EventBridgeTarget(connection, bus, source, detail_type))

    @classmethod
    def to_sqs(cls, connection: str, queue_url: str, group_id: str | None = None) -> Target:
        return cls(sqs=SqsTarget(connection, queue_url, group_id))

    @classmethod
    def to_sns(cls, connection: str, topic_arn: str, group_id: str | None = None) -> Target:
        return cls(sns=SnsTarget(connection, topic_arn, group_id))

    @classmethod
    def to_lambda(cls, connection: str, function: str) -> Target:
        return cls(lambda_=LambdaTarget(connection, function))

    @classmethod
    def to_nats(cls, connection: str, subject: str) -> Target:
        return cls(nats=NatsTarget(connection, subject))

    @classmethod
    def to_redis_stream(cls, connection: str, stream: str) -> Target:
        return cls(redis_stream=RedisStreamTarget(connection, stream))

    @classmethod
    def to_amqp(cls, connection: str, exchange: str, routing_key: str | None = None) -> Target:
        return cls(amqp=AmqpTarget(connection, exchange, routing_key))

    def to_json(self) -> dict[str, Any]:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                return {f.name.rstrip("_"): value if isinstance(value, str) else value.to_json()}
        raise ValueError("a target without a kind")


@dataclass(frozen=True)
class WebhookOut:
    """A webhook target as the node shows it: header values are ``<redacted>``."""

    __schema__: ClassVar[tuple[str, ...]] = ("TargetOut.webhook",)
    url: str
    headers: dict[str, str]
    rate_limit: int | None = None
    batch: WebhookBatch | None = None


def _opt_target(cls: type[_C], value: Any) -> _C | None:
    return cls.from_json(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class JobTarget:
    """A job's target as the node shows it: one field is set (none for a kind this package
    does not know yet). The field ``lambda_`` is the API's ``lambda``."""

    __schema__: ClassVar[tuple[str, ...]] = ("TargetOut",)
    webhook: WebhookOut | None = None
    queue: str | None = None
    eventbridge: EventBridgeTarget | None = None
    sqs: SqsTarget | None = None
    sns: SnsTarget | None = None
    lambda_: LambdaTarget | None = None
    nats: NatsTarget | None = None
    redis_stream: RedisStreamTarget | None = None
    amqp: AmqpTarget | None = None

    @property
    def kind(self) -> str | None:
        """The API's name of this target's kind (``None``: one this package does not know)."""
        return _target_kind(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobTarget:
        hook = data.get("webhook")
        webhook = None
        if isinstance(hook, Mapping):
            webhook = WebhookOut(
                url=str(hook["url"]),
                headers={str(k): str(v) for k, v in (hook.get("headers") or {}).items()},
                rate_limit=_opt_int(hook.get("rate_limit")),
                batch=WebhookBatch(int(batch["max_items"]))
                if isinstance(batch := hook.get("batch"), Mapping)
                else None,
            )
        return cls(
            webhook=webhook,
            queue=_opt_str(data.get("queue")),
            eventbridge=_opt_target(EventBridgeTarget, data.get("eventbridge")),
            sqs=_opt_target(SqsTarget, data.get("sqs")),
            sns=_opt_target(SnsTarget, data.get("sns")),
            lambda_=_opt_target(LambdaTarget, data.get("lambda")),
            nats=_opt_target(NatsTarget, data.get("nats")),
            redis_stream=_opt_target(RedisStreamTarget, data.get("redis_stream")),
            amqp=_opt_target(AmqpTarget, data.get("amqp")),
        )


@dataclass(frozen=True)
class Retry:
    """A retry policy. Sent: fields left ``None`` take the node's defaults (10 attempts, 1s,
    15m). Read back: all three are set."""

    __schema__: ClassVar[tuple[str, ...]] = ("Retry", "RetryOut")
    max_attempts: int | None = None
    initial_backoff: timedelta | str | None = None
    max_backoff: timedelta | str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_attempts is not None:
            out["max_attempts"] = self.max_attempts
        if self.initial_backoff is not None:
            out["initial_backoff"] = duration_text(self.initial_backoff)
        if self.max_backoff is not None:
            out["max_backoff"] = duration_text(self.max_backoff)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Retry:
        return cls(
            max_attempts=_opt_int(data.get("max_attempts")),
            initial_backoff=_opt_str(data.get("initial_backoff")),
            max_backoff=_opt_str(data.get("max_backoff")),
        )


@dataclass(frozen=True)
class Misfire:
    """What a recurring job does about occurrences missed by more than the misfire threshold:
    ``skip`` them, fire ``once`` and resume from now, or fire ``all`` younger than ``window``."""

    __schema__: ClassVar[tuple[str, ...]] = ("Misfire",)
    policy: MisfirePolicy = "once"
    window: timedelta | str | None = None

    def to_json(self) -> Any:
        if self.window is None:
            return self.policy
        return {"policy": self.policy, "window": duration_text(self.window)}

    @classmethod
    def from_json(cls, data: Any) -> Misfire:
        if isinstance(data, str):
            return cls(policy=cast(MisfirePolicy, data))
        return cls(policy=data["policy"], window=_opt_str(data.get("window")))


# ---------------------------------------------------------------------------------------------
# Jobs


@dataclass(frozen=True)
class NewJob:
    """A job to create: ``client.create_job(NewJob(after("5s"), Target.to_queue("emails")))``.

    With a ``key``, creating the same job again is safe: the node answers with the existing job
    (same body), or ``409 key_conflict`` (another body)."""

    __schema__: ClassVar[tuple[str, ...]] = ("CreateJob",)
    schedule: Schedule
    target: Target
    payload: JSON = UNSET
    key: str | None = None
    type: str | None = None
    retry: Retry | None = None
    misfire: Misfire | MisfirePolicy | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schedule": self.schedule.to_json(), "target": self.target.to_json()}
        if self.key is not None:
            out["key"] = self.key
        if self.type is not None:
            out["type"] = self.type
        if self.payload is not UNSET:
            out["payload"] = self.payload
        if self.retry is not None:
            out["retry"] = self.retry.to_json()
        if self.misfire is not None:
            out["misfire"] = _misfire_json(self.misfire)
        return out


def _misfire_json(misfire: Misfire | MisfirePolicy) -> Any:
    return misfire if isinstance(misfire, str) else misfire.to_json()


@dataclass(frozen=True)
class JobPatch:
    """The fields of a job to replace (``PATCH``); ``UNSET`` ones are left as they are."""

    __schema__: ClassVar[tuple[str, ...]] = ("PatchJob",)
    type: str = UNSET
    schedule: Schedule = UNSET
    target: Target = UNSET
    payload: JSON = UNSET
    retry: Retry = UNSET
    misfire: Misfire | MisfirePolicy = UNSET

    def to_json(self) -> dict[str, Any]:
        return _drop_unset(
            {
                "type": self.type,
                "schedule": self.schedule.to_json() if self.schedule is not UNSET else UNSET,
                "target": self.target.to_json() if self.target is not UNSET else UNSET,
                "payload": self.payload,
                "retry": self.retry.to_json() if self.retry is not UNSET else UNSET,
                "misfire": _misfire_json(self.misfire) if self.misfire is not UNSET else UNSET,
            }
        )


@dataclass(frozen=True)
class Job:
    """A stored job."""

    __schema__: ClassVar[tuple[str, ...]] = ("Job",)
    id: str
    namespace: str
    key: str | None
    type: str | None
    state: JobState
    schedule: JobSchedule
    target: JobTarget
    payload: JSON
    retry: Retry
    misfire: Misfire
    next_due_at: datetime | None
    next_attempt_at: datetime | None
    attempt: int
    #: Why the latest failed attempt failed (at most 1 KiB), until an occurrence is delivered.
    last_error: str | None
    runs: int
    skipped: int
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def _fields(data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "id": str(data["id"]),
            "namespace": str(data["namespace"]),
            "key": _opt_str(data.get("key")),
            "type": _opt_str(data.get("type")),
            "state": data["state"],
            "schedule": JobSchedule.from_json(data["schedule"]),
            "target": JobTarget.from_json(data["target"]),
            "payload": data.get("payload"),
            "retry": Retry.from_json(data["retry"]),
            "misfire": Misfire.from_json(data["misfire"]),
            "next_due_at": _opt_instant(data.get("next_due_at")),
            "next_attempt_at": _opt_instant(data.get("next_attempt_at")),
            "attempt": int(data["attempt"]),
            "last_error": _opt_str(data.get("last_error")),
            "runs": int(data["runs"]),
            "skipped": int(data["skipped"]),
            "created_at": parse_instant(data["created_at"]),
            "updated_at": parse_instant(data["updated_at"]),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        return cls(**cls._fields(data))


@dataclass(frozen=True)
class TriggeredJob(Job):
    """A job just triggered, and the delivery id of the occurrence the trigger made."""

    __schema__: ClassVar[tuple[str, ...]] = ("triggerJob.200",)
    delivery_id: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TriggeredJob:
        return cls(**cls._fields(data), delivery_id=str(data["delivery_id"]))


@dataclass(frozen=True)
class BatchJob(Job):
    """A job of a batch create, and whether this call created it (``False``: an idempotent
    repeat of an existing job with the same key and body)."""

    __schema__: ClassVar[tuple[str, ...]] = ("BatchCreated.jobs[]",)
    created: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchJob:
        return cls(**cls._fields(data), created=bool(data["created"]))


@dataclass(frozen=True)
class BatchCreated:
    """What a batch create answers: how many jobs are new, and every job in request order."""

    __schema__: ClassVar[tuple[str, ...]] = ("BatchCreated",)
    created: int
    jobs: list[BatchJob]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchCreated:
        return cls(int(data["created"]), [BatchJob.from_json(j) for j in data["jobs"]])


@dataclass(frozen=True)
class BatchJobBrief:
    """A job of a minimal batch answer (``prefer="return=minimal"``): what a bulk loader needs
    to find it again."""

    __schema__: ClassVar[tuple[str, ...]] = ("BatchCreatedMinimal.jobs[]",)
    id: str
    key: str | None
    state: JobState
    next_due_at: datetime | None
    created: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchJobBrief:
        return cls(
            id=str(data["id"]),
            key=_opt_str(data.get("key")),
            state=data["state"],
            next_due_at=_opt_instant(data.get("next_due_at")),
            created=bool(data["created"]),
        )


@dataclass(frozen=True)
class BatchCreatedMinimal:
    """A batch create's minimal answer: how many jobs are new, and each job briefly, in request
    order."""

    __schema__: ClassVar[tuple[str, ...]] = ("BatchCreatedMinimal",)
    created: int
    jobs: list[BatchJobBrief]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchCreatedMinimal:
        return cls(int(data["created"]), [BatchJobBrief.from_json(j) for j in data["jobs"]])


@dataclass(frozen=True)
class JobList:
    """A page of jobs; ``next_cursor`` is set when the page is full."""

    __schema__: ClassVar[tuple[str, ...]] = ("JobList",)
    jobs: list[Job]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobList:
        return cls([Job.from_json(j) for j in data["jobs"]], _opt_str(data.get("next_cursor")))


@dataclass(frozen=True)
class Run:
    """One delivery attempt of a job."""

    __schema__: ClassVar[tuple[str, ...]] = ("Run",)
    delivery_id: str
    due_at: datetime
    attempt: int
    started_at: datetime
    latency_ms: int
    status_code: int | None
    error: str | None
    #: The start (1 KiB) of what the target answered to a failed attempt.
    response: str | None
    outcome: RunOutcome

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Run:
        return cls(
            delivery_id=str(data["delivery_id"]),
            due_at=parse_instant(data["due_at"]),
            attempt=int(data["attempt"]),
            started_at=parse_instant(data["started_at"]),
            latency_ms=int(data["latency_ms"]),
            status_code=_opt_int(data.get("status_code")),
            error=_opt_str(data.get("error")),
            response=_opt_str(data.get("response")),
            outcome=data["outcome"],
        )


@dataclass(frozen=True)
class RunList:
    """A page of runs, newest first."""

    __schema__: ClassVar[tuple[str, ...]] = ("RunList",)
    runs: list[Run]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunList:
        return cls([Run.from_json(r) for r in data["runs"]], _opt_str(data.get("next_cursor")))


@dataclass(frozen=True)
class DeadLetter:
    """An occurrence that failed for good."""

    __schema__: ClassVar[tuple[str, ...]] = ("DeadLetter",)
    id: str
    job_id: str
    delivery_id: str
    due_at: datetime
    attempts: int
    reason: str
    type: str | None
    target: JobTarget
    payload: JSON
    created_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeadLetter:
        return cls(
            id=str(data["id"]),
            job_id=str(data["job_id"]),
            delivery_id=str(data["delivery_id"]),
            due_at=parse_instant(data["due_at"]),
            attempts=int(data["attempts"]),
            reason=str(data["reason"]),
            type=_opt_str(data.get("type")),
            target=JobTarget.from_json(data["target"]),
            payload=data.get("payload"),
            created_at=parse_instant(data["created_at"]),
        )


@dataclass(frozen=True)
class DeadLetterList:
    """A page of dead letters."""

    __schema__: ClassVar[tuple[str, ...]] = ("DeadLetterList",)
    dead_letters: list[DeadLetter]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeadLetterList:
        return cls(
            [DeadLetter.from_json(d) for d in data["dead_letters"]],
            _opt_str(data.get("next_cursor")),
        )


@dataclass(frozen=True)
class SigningSecret:
    """A freshly rotated signing secret: shown this once."""

    __schema__: ClassVar[tuple[str, ...]] = ("SigningSecret",)
    namespace: str
    signing_secret: str = field(repr=False)
    previous_valid_until: datetime | None
    note: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SigningSecret:
        return cls(
            namespace=str(data["namespace"]),
            signing_secret=str(data["signing_secret"]),
            previous_valid_until=_opt_instant(data.get("previous_valid_until")),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class SchedulePreview:
    """The next due times of a schedule, and the schedule in words."""

    __schema__: ClassVar[tuple[str, ...]] = ("SchedulePreview",)
    fire_times: list[datetime]
    description: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SchedulePreview:
        return cls([parse_instant(t) for t in data["fire_times"]], str(data["description"]))


@dataclass(frozen=True)
class Status:
    """``/healthz`` and ``/readyz``."""

    __schema__: ClassVar[tuple[str, ...]] = ("Status",)
    status: HealthStatus

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Status:
        return cls(data["status"])


# ---------------------------------------------------------------------------------------------
# Queues


@dataclass(frozen=True)
class Message:
    """One leased occurrence of a job on a pull queue."""

    __schema__: ClassVar[tuple[str, ...]] = ("Message",)
    job_id: str
    type: str | None
    payload: JSON
    delivery_id: str
    """The same on every redelivery of this occurrence: deduplicate on it."""
    attempt: int
    max_attempts: int
    due_at: datetime
    visible_until: datetime
    receipt: str

    @property
    def is_last_attempt(self) -> bool:
        """Whether a failure now dead-letters the occurrence instead of retrying it."""
        return self.attempt >= self.max_attempts

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            job_id=str(data["job_id"]),
            type=_opt_str(data.get("type")),
            payload=data.get("payload"),
            delivery_id=str(data["delivery_id"]),
            attempt=int(data["attempt"]),
            max_attempts=int(data["max_attempts"]),
            due_at=parse_instant(data["due_at"]),
            visible_until=parse_instant(data["visible_until"]),
            receipt=str(data["receipt"]),
        )


@dataclass(frozen=True)
class LeaseResult:
    """What a lease answers (``Client.lease`` returns its ``messages``)."""

    __schema__: ClassVar[tuple[str, ...]] = ("LeaseResult",)
    messages: list[Message]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LeaseResult:
        return cls([Message.from_json(m) for m in data["messages"]])


@dataclass(frozen=True)
class ReceiptFailure:
    """A receipt an ack, nack or extend did not apply to."""

    __schema__: ClassVar[tuple[str, ...]] = ("ReceiptResults.failed[]",)
    receipt: str
    code: str
    message: str

    @property
    def is_stale_receipt(self) -> bool:
        """The lease lapsed and another consumer has the message, or it was acked, nacked,
        edited or cancelled meanwhile."""
        return self.code == "stale_receipt"


@dataclass(frozen=True)
class ReceiptResults:
    """Per receipt: which ones the ack, nack or extend applied to."""

    __schema__: ClassVar[tuple[str, ...]] = ("ReceiptResults",)
    succeeded: list[str]
    failed: list[ReceiptFailure]
    visible_until: datetime | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReceiptResults:
        return cls(
            succeeded=[str(r) for r in data["succeeded"]],
            failed=[
                ReceiptFailure(str(f["receipt"]), str(f["code"]), str(f.get("message", "")))
                for f in data["failed"]
            ],
            visible_until=_opt_instant(data.get("visible_until")),
        )


@dataclass(frozen=True)
class Queue:
    """A pull queue's counts."""

    __schema__: ClassVar[tuple[str, ...]] = ("Queue",)
    name: str
    available: int
    in_flight: int
    scheduled: int
    oldest_available_age_ms: int | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Queue:
        return cls(
            name=str(data["name"]),
            available=int(data["available"]),
            in_flight=int(data["in_flight"]),
            scheduled=int(data["scheduled"]),
            oldest_available_age_ms=_opt_int(data.get("oldest_available_age_ms")),
        )


@dataclass(frozen=True)
class QueueList:
    """A page of the namespace's queues (``Client.list_queues`` follows every page)."""

    __schema__: ClassVar[tuple[str, ...]] = ("QueueList",)
    queues: list[Queue]
    next_cursor: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueList:
        return cls([Queue.from_json(q) for q in data["queues"]], data.get("next_cursor"))


@dataclass(frozen=True)
class QueueMessage:
    """A queue's message as an operator sees it (``Client.list_queue_messages``): an active job
    targeting the queue, waiting or leased. It has no receipt: only the worker holding a lease
    settles it."""

    __schema__: ClassVar[tuple[str, ...]] = ("QueueMessage",)
    job_id: str
    key: str | None
    type: str | None
    status: QueueMessageStatus
    due_at: datetime
    available_at: datetime | None
    """When a lease can take it; ``None`` while leased."""
    leased_until: datetime | None
    """While leased: when the lease lapses unless its worker settles or extends it first."""
    failed_attempts: int
    max_attempts: int
    delivery_id: str
    last_error: str | None
    payload: JSON
    created_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueMessage:
        return cls(
            job_id=str(data["job_id"]),
            key=_opt_str(data.get("key")),
            type=_opt_str(data.get("type")),
            status=data["status"],
            due_at=parse_instant(data["due_at"]),
            available_at=_opt_instant(data.get("available_at")),
            leased_until=_opt_instant(data.get("leased_until")),
            failed_attempts=int(data["failed_attempts"]),
            max_attempts=int(data["max_attempts"]),
            delivery_id=str(data["delivery_id"]),
            last_error=_opt_str(data.get("last_error")),
            payload=data.get("payload"),
            created_at=parse_instant(data["created_at"]),
        )


@dataclass(frozen=True)
class QueueMessageList:
    """A page of a queue's messages, oldest first; ``next_cursor`` is set when the page is
    full."""

    __schema__: ClassVar[tuple[str, ...]] = ("QueueMessageList",)
    messages: list[QueueMessage]
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueMessageList:
        return cls(
            [QueueMessage.from_json(m) for m in data["messages"]],
            _opt_str(data.get("next_cursor")),
        )


@dataclass(frozen=True)
class Breaker:
    """A destination whose circuit breaker is open on this node."""

    __schema__: ClassVar[tuple[str, ...]] = ("BreakerList.breakers[]",)
    destination: str
    open_since: datetime


@dataclass(frozen=True)
class BreakerList:
    """Open breakers (``Client.list_open_breakers`` returns its ``breakers``)."""

    __schema__: ClassVar[tuple[str, ...]] = ("BreakerList",)
    breakers: list[Breaker]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BreakerList:
        return cls(
            [
                Breaker(str(b["destination"]), parse_instant(b["open_since"]))
                for b in data["breakers"]
            ]
        )


# ---------------------------------------------------------------------------------------------
# Connections


@dataclass(frozen=True)
class PublishCounts:
    """This node's publishes through a connection since it started: acknowledged, failed and
    to be retried, refused for good (dead-lettered)."""

    __schema__: ClassVar[tuple[str, ...]] = ("ConnectionList.connections[].published",)
    delivered: int
    retry: int
    rejected: int


@dataclass(frozen=True)
class Connection:
    """A bus or cloud connection the namespace may use: its name (what a target's
    ``connection`` names) and kind. Endpoints and credentials stay in the operator's config."""

    __schema__: ClassVar[tuple[str, ...]] = ("ConnectionList.connections[]",)
    name: str
    kind: ConnectionKind
    #: This node's publishes through it; ``None`` for a connection other namespaces share.
    published: PublishCounts | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Connection:
        published = data.get("published")
        return cls(
            name=str(data["name"]),
            kind=data["kind"],
            published=None
            if published is None
            else PublishCounts(
                delivered=int(published["delivered"]),
                retry=int(published["retry"]),
                rejected=int(published["rejected"]),
            ),
        )


@dataclass(frozen=True)
class ConnectionList:
    """The namespace's connections (``Client.list_connections`` returns its ``connections``)."""

    __schema__: ClassVar[tuple[str, ...]] = ("ConnectionList",)
    connections: list[Connection]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConnectionList:
        return cls([Connection.from_json(c) for c in data["connections"]])


def jobs_json(jobs: Sequence[NewJob]) -> dict[str, Any]:
    return {"jobs": [j.to_json() for j in jobs]}
