"""What the generated models (``_models.py``) import: the JSON conversions of instants and
durations, ``UNSET``, and the methods a few models have beyond their fields."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from ._models import Target

T = TypeVar("T")

JSON: TypeAlias = Any
"""Any JSON value: a payload as ``json.loads`` returns it."""


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


def opt(convert: Callable[[Any], T], value: Any) -> T | None:
    """``convert(value)``, or ``None`` for a field the node left out or sent as ``null``."""
    return None if value is None else convert(value)


def dump(value: Any) -> Any:
    """A field's value as JSON: a model by its ``to_json``, datetimes and timedeltas as the text
    the node reads, sequences and mappings item by item."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, datetime):
        return instant_text(value)
    if isinstance(value, timedelta):
        return duration_text(value)
    if isinstance(value, Mapping):
        return {str(k): dump(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [dump(v) for v in value]
    return value.to_json()


def kind_of(model: Any) -> str | None:
    """The wire name of the one field that is set (``lambda_`` is ``lambda``), if any."""
    for f in fields(model):
        if getattr(model, f.name) is not None:
            return f.name.rstrip("_")
    return None


def exactly_one(model: Any) -> None:
    chosen = [f.name for f in fields(model) if getattr(model, f.name) is not None]
    if len(chosen) != 1:
        kinds = ", ".join(f.name for f in fields(model))
        raise ValueError(
            f"a {type(model).__name__} is exactly one of {kinds}; got {chosen or 'none'}"
        )


# ---------------------------------------------------------------------------------------------
# Methods of models


class TargetShorthands:
    """``Target.to_queue("emails")``, ``Target.to_webhook(url)``, ``Target.to_nats(connection,
    subject)``, ...: a target of each kind from that kind's fields. The bus and cloud kinds name a
    connection the node's operator configured (``Client.list_connections()`` lists them)."""

    @classmethod
    def to_webhook(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        rate_limit: int | None = None,
        batch: int | None = None,
    ) -> Target:
        """``batch``: deliver in batches of up to this many occurrences a request."""
        from ._models import Target, Webhook, WebhookBatch

        batching = WebhookBatch(batch) if batch is not None else None
        return Target(webhook=Webhook(url, headers, rate_limit, batching))

    @classmethod
    def to_queue(cls, name: str) -> Target:
        from ._models import Target

        return Target(queue=name)

    @classmethod
    def to_eventbridge(cls, connection: str, bus: str, source: str, detail_type: str) -> Target:
        from ._models import EventBridgeTarget, Target

        return Target(eventbridge=EventBridgeTarget(connection, bus, source, detail_type))

    @classmethod
    def to_sqs(cls, connection: str, queue_url: str, group_id: str | None = None) -> Target:
        from ._models import SqsTarget, Target

        return Target(sqs=SqsTarget(connection, queue_url, group_id))

    @classmethod
    def to_sns(cls, connection: str, topic_arn: str, group_id: str | None = None) -> Target:
        from ._models import SnsTarget, Target

        return Target(sns=SnsTarget(connection, topic_arn, group_id))

    @classmethod
    def to_lambda(cls, connection: str, function: str) -> Target:
        from ._models import LambdaTarget, Target

        return Target(lambda_=LambdaTarget(connection, function))

    @classmethod
    def to_nats(cls, connection: str, subject: str) -> Target:
        from ._models import NatsTarget, Target

        return Target(nats=NatsTarget(connection, subject))

    @classmethod
    def to_redis_stream(cls, connection: str, stream: str) -> Target:
        from ._models import RedisStreamTarget, Target

        return Target(redis_stream=RedisStreamTarget(connection, stream))

    @classmethod
    def to_amqp(cls, connection: str, exchange: str, routing_key: str | None = None) -> Target:
        from ._models import AmqpTarget, Target

        return Target(amqp=AmqpTarget(connection, exchange, routing_key))


class _Attempts(Protocol):
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...


class MessageHelpers:
    @property
    def is_last_attempt(self: _Attempts) -> bool:
        """Whether a failure now dead-letters the occurrence instead of retrying it."""
        return self.attempt >= self.max_attempts


class _Coded(Protocol):
    @property
    def code(self) -> str: ...


class ReceiptFailureHelpers:
    @property
    def is_stale_receipt(self: _Coded) -> bool:
        """The lease lapsed and another consumer has the message, or it was acked, nacked,
        edited or cancelled meanwhile."""
        return self.code == "stale_receipt"
