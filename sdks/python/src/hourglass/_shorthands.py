"""Shorthands for the generated models: the four kinds of schedule, and the union of the
targets that publish through a connection."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypeAlias

from ._models import (
    AfterSchedule,
    AmqpTarget,
    AnchorSchedule,
    AtSchedule,
    CronSchedule,
    EventBridgeTarget,
    EverySchedule,
    LambdaTarget,
    NatsTarget,
    RedisStreamTarget,
    Roll,
    SnsTarget,
    SqsTarget,
)

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


def at(
    instant: datetime | str,
    *,
    jitter: timedelta | str | None = None,
    calendar: str | None = None,
    roll: Roll | None = None,
) -> AtSchedule:
    """``Schedule`` shorthand: once at ``instant`` (up to ``jitter`` later), skipped or rolled
    (``roll``) if ``calendar`` excludes its day."""
    return AtSchedule(instant, jitter, calendar, roll)


def anchored(
    anchor: str,
    offset: timedelta | str | None = None,
    *,
    jitter: timedelta | str | None = None,
    calendar: str | None = None,
    roll: Roll | None = None,
) -> AnchorSchedule:
    """``Schedule`` shorthand: once at the namespace's anchor ``anchor`` plus ``offset`` (``"-8h"``
    or a ``timedelta``; negative is before it), re-timed whenever the anchor moves."""
    if isinstance(offset, timedelta):
        ms = round(offset.total_seconds() * 1000)
        offset = f"{ms}ms"
    return AnchorSchedule(anchor, offset, jitter, calendar, roll)


def after(
    delay: timedelta | str,
    *,
    jitter: timedelta | str | None = None,
    calendar: str | None = None,
    roll: Roll | None = None,
) -> AfterSchedule:
    """``Schedule`` shorthand: once after ``delay`` (up to ``jitter`` later), skipped or rolled
    (``roll``) if ``calendar`` excludes its day."""
    return AfterSchedule(delay, jitter, calendar, roll)


def cron(
    expression: str,
    timezone: str | None = None,
    *,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    max_runs: int | None = None,
    jitter: timedelta | str | None = None,
    calendar: str | None = None,
    roll: Roll | None = None,
) -> CronSchedule:
    """``Schedule`` shorthand: by cron expression, in ``timezone`` (default UTC); each occurrence
    up to ``jitter`` after its due time, and skipped or rolled (``roll``) on the days ``calendar``
    excludes."""
    return CronSchedule(expression, timezone, start, end, max_runs, jitter, calendar, roll)


def every(
    interval: timedelta | str,
    *,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    max_runs: int | None = None,
    jitter: timedelta | str | None = None,
    calendar: str | None = None,
    roll: Roll | None = None,
) -> EverySchedule:
    """``Schedule`` shorthand: every ``interval``; each occurrence up to ``jitter`` after its due
    time, and skipped or rolled (``roll``) on the days ``calendar`` excludes."""
    return EverySchedule(interval, start, end, max_runs, jitter, calendar, roll)
