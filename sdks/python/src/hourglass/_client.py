"""``Client`` (blocking) and ``AsyncClient``: one method per endpoint of the node's API."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, overload
from urllib.parse import quote

import httpx

from ._errors import DecodeError, HourglassError, TransportError, error_from_answer
from ._errors import parse_retry_after as _parse_retry_after
from ._models import (
    AckRequest,
    Anchor,
    AnchorDeleted,
    AnchorIn,
    AnchorList,
    AuditList,
    BackfillAccepted,
    BackfillRequest,
    BatchCreate,
    BatchCreated,
    BatchCreatedMinimal,
    Breaker,
    BreakerList,
    BulkChanged,
    Calendar,
    CalendarIn,
    CalendarList,
    Connection,
    ConnectionList,
    CurrentSigningSecret,
    DeadLetter,
    DeadLetterList,
    ExtendRequest,
    Identity,
    Job,
    JobList,
    JobPatch,
    JobState,
    LeaseRequest,
    LeaseResult,
    Message,
    NackRequest,
    NewJob,
    Node,
    NodeList,
    Queue,
    QueueList,
    QueueMessageList,
    ReceiptResults,
    RunList,
    Schedule,
    SchedulePreview,
    SchedulePreviewRequest,
    SigningSecret,
    Status,
    Summary,
    TriggeredJob,
)
from ._operations import OPERATIONS
from ._support import instant_text

# What a bulk call does to each job it selects.
BulkAction = Literal["pause", "resume", "cancel", "trigger"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds a request gets by default; a lease gets its ``wait_ms`` on top."""

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def job_ref(job: str) -> str:
    """The path segment for a job: its id (a UUID) as it is, ``key:...`` as it is (the key
    percent-encoded), and anything else as a key. A key that looks like a UUID is written with
    its ``key:`` prefix."""
    if _UUID.match(job):
        return job
    key = job[4:] if job.startswith("key:") else job
    return "key:" + quote(key, safe="")


def _segment(value: str) -> str:
    return quote(value, safe="")


class _Request:
    """A request built from the operation table, before a transport sends it."""

    __slots__ = ("body", "extra_timeout", "headers", "method", "path", "query")

    def __init__(
        self,
        op: str,
        path_params: Mapping[str, str] | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        extra_timeout: float = 0.0,
    ) -> None:
        operation = OPERATIONS[op]
        path = operation.path
        for name, value in (path_params or {}).items():
            path = path.replace("{" + name + "}", value)
        self.method = operation.method
        self.path = path
        self.query = {k: _query_values(v) for k, v in (query or {}).items() if v is not None}
        self.body = body
        self.headers = dict(headers or {})
        self.extra_timeout = extra_timeout


def _query_value(value: Any) -> str:
    if isinstance(value, datetime):
        return instant_text(value)
    return str(value)


def _query_values(value: Any) -> str | list[str]:
    # A parameter that repeats (``label``) is a list: one ``name=value`` each.
    if isinstance(value, (list, tuple)):
        return [_query_value(v) for v in value]
    return _query_value(value)


def _labels(label: str | Sequence[str] | None) -> list[str] | None:
    """Label selectors as the query repeats them: one (``"tenant=acme"``) or several, ANDed."""
    if label is None:
        return None
    return [label] if isinstance(label, str) else list(label)


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        namespace: str | None,
        timeout: float,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base url {base_url!r} is not an http(s) url")
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._headers = {"accept": "application/json", "user-agent": "hourglass-python/0.1.0"}
        if api_key is not None:
            self._headers["authorization"] = f"Bearer {api_key}"
        if namespace is not None:
            self._headers["hourglass-namespace"] = namespace

    def __repr__(self) -> str:
        # The API key stays out of logs.
        return f"{type(self).__name__}({self.base_url!r})"

    def _build(self, http: httpx.Client | httpx.AsyncClient, req: _Request) -> httpx.Request:
        headers = {**self._headers, **req.headers}
        content = None
        if req.body is not None:
            content = json.dumps(req.body, separators=(",", ":")).encode()
        # The node wants the JSON type on every write, also without a body (pause, trigger).
        if req.body is not None or req.method in ("POST", "PUT", "PATCH"):
            headers["content-type"] = "application/json"
        timeout = self._timeout + req.extra_timeout
        return http.build_request(
            req.method,
            self.base_url + req.path,
            params=req.query or None,
            content=content,
            headers=headers,
            timeout=timeout,
        )

    @staticmethod
    def _result(response: httpx.Response, raw: bool = False) -> Any:
        if response.is_success:
            if raw or response.status_code == 204:
                return response.text
            try:
                return response.json()
            except ValueError as e:
                raise DecodeError(f"unexpected answer from {response.url}: {e}") from e
        retry_after = _parse_retry_after(response.headers.get("retry-after"))
        raise error_from_answer(
            response.status_code, str(response.url), response.content, retry_after
        )


def _decode(build: Callable[[Any], T], data: Any) -> T:
    try:
        return build(data)
    except (KeyError, TypeError, ValueError) as e:
        raise DecodeError(f"unexpected answer shape: {e!r}") from e


# The request of each endpoint, shared by both clients.


def _list_jobs(
    state: JobState | None,
    type: str | None,
    due_before: datetime | str | None,
    due_after: datetime | str | None,
    limit: int | None,
    cursor: str | None,
    payload: bool = False,
    label: str | Sequence[str] | None = None,
    anchor: str | None = None,
) -> _Request:
    query = {
        "anchor": anchor,
        "state": state,
        "type": type,
        "label": _labels(label),
        "due_before": due_before,
        "due_after": due_after,
        "limit": limit,
        "cursor": cursor,
        "payload": "true" if payload else None,
    }
    return _Request("listJobs", query=query)


def _bulk(
    action: BulkAction,
    label: str | Sequence[str],
    type: str | None,
    cursor: str | None,
) -> _Request:
    query = {"label": _labels(label), "type": type, "cursor": cursor}
    return _Request("bulkJobs", {"action": _segment(action)}, query=query)


def _create_jobs(jobs: Sequence[NewJob], prefer: str | None) -> _Request:
    headers = {"prefer": prefer} if prefer is not None else None
    return _Request("createJobs", body=BatchCreate(jobs).to_json(), headers=headers)


def _decode_batch(data: Any, prefer: str | None) -> BatchCreated | BatchCreatedMinimal:
    if prefer == "return=minimal":
        return _decode(BatchCreatedMinimal.from_json, data)
    return _decode(BatchCreated.from_json, data)


def _trigger(job: str, idempotency_key: str | None) -> _Request:
    headers = {"idempotency-key": idempotency_key} if idempotency_key is not None else None
    return _Request("triggerJob", {"id": job_ref(job)}, headers=headers)


def _calendar(op: str, name: str, body: Any = None) -> _Request:
    return _Request(op, {"name": _segment(name)}, body=body)


def _anchor(op: str, name: str, body: Any = None, query: Any = None) -> _Request:
    return _Request(op, {"name": _segment(name)}, body=body, query=query)


def _delete_anchor(name: str, if_unused: bool) -> _Request:
    return _anchor("deleteAnchor", name, query={"if_unused": "true" if if_unused else None})


def _backfill(job: str, from_: datetime | str, to: datetime | str) -> _Request:
    body = BackfillRequest(from_, to).to_json()
    return _Request("backfillJob", {"id": job_ref(job)}, body=body)


def _lease(
    queue: str, max: int | None, wait_ms: int | None, visibility_ms: int | None, types: Any
) -> _Request:
    body = LeaseRequest(max, wait_ms, visibility_ms, list(types) if types else None).to_json()
    extra = (wait_ms or 0) / 1000
    return _Request("leaseMessages", {"name": _segment(queue)}, body=body, extra_timeout=extra)


def _receipts(op: str, queue: str, body: AckRequest | NackRequest | ExtendRequest) -> _Request:
    return _Request(op, {"name": _segment(queue)}, body=body.to_json())


def _page(limit: int | None, cursor: str | None) -> dict[str, Any]:
    return {"limit": limit, "cursor": cursor}


def _queue_messages(
    name: str, limit: int | None, cursor: str | None, payload: bool = False
) -> _Request:
    query = {**_page(limit, cursor), "payload": "true" if payload else None}
    return _Request("listQueueMessages", {"name": _segment(name)}, query=query)


def _preview(schedule: Schedule, count: int | None, job_id: str | None) -> _Request:
    body = SchedulePreviewRequest(schedule, count, job_id).to_json()
    return _Request("previewSchedule", body=body)


def _rotate(overlap: str | None) -> _Request:
    return _Request("rotateSigningSecret", body={} if overlap is None else {"overlap": overlap})


class Client(_Base):
    """A blocking client for one node.

    >>> client = Client("http://127.0.0.1:7070", api_key="...")
    >>> job = client.create_job(NewJob(after("5s"), Target.to_queue("emails")))

    Every method raises ``ApiError`` when the node refuses the request (``code``, ``message``,
    ``field``, ``status``, ``retry_after``), ``TransportError`` when it cannot be reached.
    Jobs are named by id or by key (``"nightly-export"`` or ``"key:nightly-export"``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, namespace=namespace, timeout=timeout)
        self._http = http_client or httpx.Client()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: _Request, raw: bool = False) -> Any:
        request = self._build(self._http, req)
        try:
            response = self._http.send(request)
        except httpx.HTTPError as e:
            raise TransportError(str(request.url), e) from e
        return self._result(response, raw)

    # Jobs

    def create_job(self, job: NewJob) -> Job:
        """Creates a job. With a ``key`` already used by a job with the same body, answers that
        job (an idempotent repeat); with another body, raises ``ApiError`` ``key_conflict``."""
        return _decode(Job.from_json, self._send(_Request("createJob", body=job.to_json())))

    @overload
    def create_jobs(self, jobs: Sequence[NewJob], *, prefer: None = None) -> BatchCreated: ...
    @overload
    def create_jobs(
        self, jobs: Sequence[NewJob], *, prefer: Literal["return=minimal"]
    ) -> BatchCreatedMinimal: ...
    def create_jobs(
        self, jobs: Sequence[NewJob], *, prefer: Literal["return=minimal"] | None = None
    ) -> BatchCreated | BatchCreatedMinimal:
        """Creates up to 1,000 jobs in one transaction: all or none. With
        ``prefer="return=minimal"`` each job is answered by its id, key, state and due time only
        (for bulk loaders)."""
        data = self._send(_create_jobs(jobs, prefer))
        return _decode_batch(data, prefer)

    def list_jobs(
        self,
        *,
        state: JobState | None = None,
        type: str | None = None,
        due_before: datetime | str | None = None,
        due_after: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        payload: bool = False,
        label: str | Sequence[str] | None = None,
        anchor: str | None = None,
    ) -> JobList:
        """One page of jobs; pass ``next_cursor`` as ``cursor`` for the next (or use
        ``iter_jobs``). Payloads are left out unless ``payload=True``. ``label`` selects by
        labels: ``"tenant=acme"`` (equality) or ``"kind"`` (existence), or a list of them, ANDed;
        ``anchor`` lists the jobs on an anchor."""
        req = _list_jobs(state, type, due_before, due_after, limit, cursor, payload, label, anchor)
        return _decode(JobList.from_json, self._send(req))

    def iter_jobs(
        self,
        *,
        state: JobState | None = None,
        type: str | None = None,
        due_before: datetime | str | None = None,
        due_after: datetime | str | None = None,
        page_size: int | None = None,
        label: str | Sequence[str] | None = None,
    ) -> Iterator[Job]:
        """Every job matching the filters, fetching pages as needed."""
        cursor = None
        while True:
            page = self.list_jobs(
                state=state,
                type=type,
                due_before=due_before,
                due_after=due_after,
                limit=page_size,
                cursor=cursor,
                label=label,
            )
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get_job(self, id: str) -> Job:
        return _decode(Job.from_json, self._send(_Request("getJob", {"id": job_ref(id)})))

    def update_job(self, id: str, patch: JobPatch) -> Job:
        """Replaces the fields ``patch`` sets."""
        req = _Request("updateJob", {"id": job_ref(id)}, body=patch.to_json())
        return _decode(Job.from_json, self._send(req))

    def cancel_job(self, id: str) -> Job:
        """Cancels the job; an occurrence being delivered at this instant may still arrive."""
        return _decode(Job.from_json, self._send(_Request("cancelJob", {"id": job_ref(id)})))

    def pause_job(self, id: str) -> Job:
        return _decode(Job.from_json, self._send(_Request("pauseJob", {"id": job_ref(id)})))

    def resume_job(self, id: str) -> Job:
        """Resumes a paused job (a recurring job continues from now)."""
        return _decode(Job.from_json, self._send(_Request("resumeJob", {"id": job_ref(id)})))

    def trigger_job(self, id: str, *, idempotency_key: str | None = None) -> TriggeredJob:
        """Fires an occurrence now. With ``idempotency_key``, a retry of this call changes
        nothing and answers the first trigger's ``delivery_id``."""
        return _decode(TriggeredJob.from_json, self._send(_trigger(id, idempotency_key)))

    def bulk_jobs(
        self,
        action: BulkAction,
        label: str | Sequence[str],
        *,
        type: str | None = None,
        cursor: str | None = None,
    ) -> BulkChanged:
        """Pauses, resumes, cancels or triggers (``action``) the namespace's live jobs that every
        ``label`` selector picks. One call changes at most 1000; when ``more``, call again with
        ``cursor=next_cursor`` (a repeated ``trigger`` without it fires the first ones again)."""
        return _decode(BulkChanged.from_json, self._send(_bulk(action, label, type, cursor)))

    def backfill_job(self, id: str, from_: datetime | str, to: datetime | str) -> BackfillAccepted:
        """Runs each nominal occurrence of a recurring job in ``[from_, to)`` once, paced, before
        its own; answers how many it runs (0 when earlier backfills ran them all)."""
        return _decode(BackfillAccepted.from_json, self._send(_backfill(id, from_, to)))

    def list_job_runs(
        self, id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> RunList:
        """Delivery attempts of a job, newest first."""
        req = _Request("listJobRuns", {"id": job_ref(id)}, query=_page(limit, cursor))
        return _decode(RunList.from_json, self._send(req))

    # Dead letters

    def list_dead_letters(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> DeadLetterList:
        req = _Request("listDeadLetters", query=_page(limit, cursor))
        return _decode(DeadLetterList.from_json, self._send(req))

    def get_dead_letter(self, id: str | int) -> DeadLetter:
        req = _Request("getDeadLetter", {"id": _segment(str(id))})
        return _decode(DeadLetter.from_json, self._send(req))

    def delete_dead_letter(self, id: str | int) -> None:
        self._send(_Request("deleteDeadLetter", {"id": _segment(str(id))}))

    def replay_dead_letter(self, id: str | int) -> Job:
        """Replays a dead letter as a new one-off job due now, and removes the dead letter."""
        req = _Request("replayDeadLetter", {"id": _segment(str(id))})
        return _decode(Job.from_json, self._send(req))

    def list_audit(
        self, *, limit: int | None = None, cursor: str | None = None, job: str | None = None
    ) -> AuditList:
        """The namespace's audit log, newest first: who (the API key's id) changed what, when.
        Only the entries about ``job`` when given. For writers and admins."""
        req = _Request("listAudit", query={**_page(limit, cursor), "job": job})
        return _decode(AuditList.from_json, self._send(req))

    # Calendars

    def list_calendars(self) -> list[Calendar]:
        """The namespace's calendars, in name order."""
        return _decode(CalendarList.from_json, self._send(_Request("listCalendars"))).calendars

    def get_calendar(self, name: str) -> Calendar:
        return _decode(Calendar.from_json, self._send(_calendar("getCalendar", name)))

    def put_calendar(self, name: str, calendar: CalendarIn) -> Calendar:
        """Creates or replaces a calendar; the node re-plans the jobs that name it
        (``replanned`` in the answer)."""
        req = _calendar("putCalendar", name, calendar.to_json())
        return _decode(Calendar.from_json, self._send(req))

    def delete_calendar(self, name: str) -> None:
        """Deletes a calendar no active or paused job names (else ``calendar_in_use``)."""
        self._send(_calendar("deleteCalendar", name))

    # Anchors

    def list_anchors(self) -> list[Anchor]:
        """The namespace's anchors, in name order."""
        return _decode(AnchorList.from_json, self._send(_Request("listAnchors"))).anchors

    def get_anchor(self, name: str) -> Anchor:
        return _decode(Anchor.from_json, self._send(_anchor("getAnchor", name)))

    def put_anchor(self, name: str, at: datetime | str) -> Anchor:
        """Creates an anchor at ``at``, or moves it there with every active or paused job that
        refers to it (``jobs_moved`` in the answer)."""
        req = _anchor("putAnchor", name, AnchorIn(instant_text(at)).to_json())
        return _decode(Anchor.from_json, self._send(req))

    def delete_anchor(self, name: str, *, if_unused: bool = False) -> AnchorDeleted:
        """Deletes an anchor and cancels its active or paused jobs; with ``if_unused``, refused
        (``anchor_in_use``) while any refers to it."""
        return _decode(AnchorDeleted.from_json, self._send(_delete_anchor(name, if_unused)))

    def list_open_breakers(self) -> list[Breaker]:
        return _decode(BreakerList.from_json, self._send(_Request("listOpenBreakers"))).breakers

    def list_connections(self) -> list[Connection]:
        """The bus and cloud connections this namespace may name in targets (names and kinds),
        with this node's publish counts."""
        data = self._send(_Request("listConnections"))
        return _decode(ConnectionList.from_json, data).connections

    def list_nodes(self) -> list[Node]:
        """The cluster's live nodes, by id, each as its latest heartbeat said (version, start,
        last heartbeat, claims held). Cluster-wide: an admin key when the node has keys."""
        return _decode(NodeList.from_json, self._send(_Request("listNodes"))).nodes

    def whoami(self) -> Identity:
        """This client's API key as the node sees it: the namespace its requests act in, its
        role, and every route it may call."""
        return _decode(Identity.from_json, self._send(_Request("whoami")))

    def get_summary(self) -> Summary:
        """The figures the dashboard charts: this node's delivery counters and gauges, and the
        whole store's counts. Every namespace's: an admin key when the node has keys."""
        return _decode(Summary.from_json, self._send(_Request("getSummary")))

    # Queues

    def list_queues(self, *, limit: int | None = None, cursor: str | None = None) -> list[Queue]:
        """Every queue of the namespace by name (after ``cursor``, when given): the pages the
        node answers, ``limit`` queues each (default 1,000), followed."""
        queues: list[Queue] = []
        while True:
            req = _Request("listQueues", query=_page(limit or 1000, cursor))
            page = _decode(QueueList.from_json, self._send(req))
            queues.extend(page.queues)
            if page.next_cursor is None:
                return queues
            cursor = page.next_cursor

    def get_queue(self, name: str) -> Queue:
        """One queue's counts (zeros for a queue no job targets)."""
        req = _Request("getQueue", {"name": _segment(name)})
        return _decode(Queue.from_json, self._send(req))

    def list_queue_messages(
        self,
        name: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        payload: bool = False,
    ) -> QueueMessageList:
        """One page of the queue's messages, oldest first: waiting or leased, each with when it
        becomes available or when its lease lapses. Leases nothing."""
        request = _queue_messages(name, limit, cursor, payload)
        return _decode(QueueMessageList.from_json, self._send(request))

    def lease(
        self,
        queue: str,
        *,
        max: int | None = None,
        wait_ms: int | None = None,
        visibility_ms: int | None = None,
        types: Sequence[str] | None = None,
    ) -> list[Message]:
        """Leases up to ``max`` due messages (node default 10), long-polling up to ``wait_ms``
        (at most 20,000) when none is available; an empty list means the wait ran out."""
        req = _lease(queue, max, wait_ms, visibility_ms, types)
        return _decode(LeaseResult.from_json, self._send(req)).messages

    def ack(self, queue: str, receipts: Sequence[str]) -> ReceiptResults:
        """Completes the messages (a recurring job moves on to its next occurrence)."""
        req = _receipts("ackMessages", queue, AckRequest(receipts))
        return _decode(ReceiptResults.from_json, self._send(req))

    def nack(
        self, queue: str, receipts: Sequence[str], *, delay_ms: int | None = None
    ) -> ReceiptResults:
        """A failed attempt: the messages come back after ``delay_ms`` (default: the job's
        retry backoff), or are dead-lettered after the job's last attempt."""
        req = _receipts("nackMessages", queue, NackRequest(receipts, delay_ms))
        return _decode(ReceiptResults.from_json, self._send(req))

    def extend(self, queue: str, receipts: Sequence[str], *, visibility_ms: int) -> ReceiptResults:
        """Keeps the messages invisible to other consumers for ``visibility_ms`` from now."""
        req = _receipts("extendMessages", queue, ExtendRequest(receipts, visibility_ms))
        return _decode(ReceiptResults.from_json, self._send(req))

    # The rest

    def signing_secret(self) -> CurrentSigningSecret:
        """The namespace's current webhook signing secret, read without rotating it (a namespace
        without one gets it now): what ``verify_webhook`` checks deliveries with."""
        return _decode(CurrentSigningSecret.from_json, self._send(_Request("getSigningSecret")))

    def rotate_signing_secret(self, *, overlap: str | None = None) -> SigningSecret:
        """Rotates the namespace's webhook signing secret and returns the new one. The replaced
        one keeps signing for ``overlap`` (node default ``24h``; ``0s`` drops it)."""
        return _decode(SigningSecret.from_json, self._send(_rotate(overlap)))

    def preview_schedule(
        self, schedule: Schedule, *, count: int | None = None, job_id: str | None = None
    ) -> SchedulePreview:
        """The next due times of a schedule, and the schedule in words; stores nothing. With a
        jitter, ``fire_times`` are job ``job_id``'s (its offsets depend on its id) and
        ``nominal_times`` the due times."""
        return _decode(SchedulePreview.from_json, self._send(_preview(schedule, count, job_id)))

    def openapi(self) -> dict[str, Any]:
        """The node's OpenAPI document."""
        data: dict[str, Any] = self._send(_Request("getOpenApi"))
        return data

    def healthz(self) -> Status:
        return _decode(Status.from_json, self._send(_Request("healthz")))

    def readyz(self) -> Status:
        """``ready``, or ``ApiError`` 503 while the node is not ready."""
        return _decode(Status.from_json, self._send(_Request("readyz")))

    def metrics(self) -> str:
        """Prometheus/OpenMetrics text (an admin key when keys are configured)."""
        text: str = self._send(_Request("metrics"), raw=True)
        return text


class AsyncClient(_Base):
    """The asyncio twin of ``Client``: the same methods, awaited.

    >>> async with AsyncClient("http://127.0.0.1:7070") as client:
    ...     job = await client.get_job("nightly-export")
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, api_key=api_key, namespace=namespace, timeout=timeout)
        self._http = http_client or httpx.AsyncClient(
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: _Request, raw: bool = False) -> Any:
        request = self._build(self._http, req)
        try:
            response = await self._http.send(request)
        except httpx.HTTPError as e:
            raise TransportError(str(request.url), e) from e
        return self._result(response, raw)

    # Jobs

    async def create_job(self, job: NewJob) -> Job:
        """See ``Client.create_job``."""
        data = await self._send(_Request("createJob", body=job.to_json()))
        return _decode(Job.from_json, data)

    @overload
    async def create_jobs(self, jobs: Sequence[NewJob], *, prefer: None = None) -> BatchCreated: ...
    @overload
    async def create_jobs(
        self, jobs: Sequence[NewJob], *, prefer: Literal["return=minimal"]
    ) -> BatchCreatedMinimal: ...
    async def create_jobs(
        self, jobs: Sequence[NewJob], *, prefer: Literal["return=minimal"] | None = None
    ) -> BatchCreated | BatchCreatedMinimal:
        """See ``Client.create_jobs``."""
        data = await self._send(_create_jobs(jobs, prefer))
        return _decode_batch(data, prefer)

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        type: str | None = None,
        due_before: datetime | str | None = None,
        due_after: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        payload: bool = False,
        label: str | Sequence[str] | None = None,
        anchor: str | None = None,
    ) -> JobList:
        req = _list_jobs(state, type, due_before, due_after, limit, cursor, payload, label, anchor)
        return _decode(JobList.from_json, await self._send(req))

    async def iter_jobs(
        self,
        *,
        state: JobState | None = None,
        type: str | None = None,
        due_before: datetime | str | None = None,
        due_after: datetime | str | None = None,
        page_size: int | None = None,
        label: str | Sequence[str] | None = None,
    ) -> AsyncIterator[Job]:
        """Every job matching the filters, fetching pages as needed (``async for``)."""
        cursor = None
        while True:
            page = await self.list_jobs(
                state=state,
                type=type,
                due_before=due_before,
                due_after=due_after,
                limit=page_size,
                cursor=cursor,
                label=label,
            )
            for job in page.jobs:
                yield job
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_job(self, id: str) -> Job:
        return _decode(Job.from_json, await self._send(_Request("getJob", {"id": job_ref(id)})))

    async def update_job(self, id: str, patch: JobPatch) -> Job:
        req = _Request("updateJob", {"id": job_ref(id)}, body=patch.to_json())
        return _decode(Job.from_json, await self._send(req))

    async def cancel_job(self, id: str) -> Job:
        data = await self._send(_Request("cancelJob", {"id": job_ref(id)}))
        return _decode(Job.from_json, data)

    async def pause_job(self, id: str) -> Job:
        data = await self._send(_Request("pauseJob", {"id": job_ref(id)}))
        return _decode(Job.from_json, data)

    async def resume_job(self, id: str) -> Job:
        data = await self._send(_Request("resumeJob", {"id": job_ref(id)}))
        return _decode(Job.from_json, data)

    async def trigger_job(self, id: str, *, idempotency_key: str | None = None) -> TriggeredJob:
        data = await self._send(_trigger(id, idempotency_key))
        return _decode(TriggeredJob.from_json, data)

    async def bulk_jobs(
        self,
        action: BulkAction,
        label: str | Sequence[str],
        *,
        type: str | None = None,
        cursor: str | None = None,
    ) -> BulkChanged:
        data = await self._send(_bulk(action, label, type, cursor))
        return _decode(BulkChanged.from_json, data)

    async def backfill_job(
        self, id: str, from_: datetime | str, to: datetime | str
    ) -> BackfillAccepted:
        data = await self._send(_backfill(id, from_, to))
        return _decode(BackfillAccepted.from_json, data)

    async def list_job_runs(
        self, id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> RunList:
        req = _Request("listJobRuns", {"id": job_ref(id)}, query=_page(limit, cursor))
        return _decode(RunList.from_json, await self._send(req))

    # Dead letters

    async def list_dead_letters(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> DeadLetterList:
        req = _Request("listDeadLetters", query=_page(limit, cursor))
        return _decode(DeadLetterList.from_json, await self._send(req))

    async def get_dead_letter(self, id: str | int) -> DeadLetter:
        req = _Request("getDeadLetter", {"id": _segment(str(id))})
        return _decode(DeadLetter.from_json, await self._send(req))

    async def delete_dead_letter(self, id: str | int) -> None:
        await self._send(_Request("deleteDeadLetter", {"id": _segment(str(id))}))

    async def replay_dead_letter(self, id: str | int) -> Job:
        req = _Request("replayDeadLetter", {"id": _segment(str(id))})
        return _decode(Job.from_json, await self._send(req))

    async def list_audit(
        self, *, limit: int | None = None, cursor: str | None = None, job: str | None = None
    ) -> AuditList:
        """The namespace's audit log, newest first: who (the API key's id) changed what, when.
        Only the entries about ``job`` when given. For writers and admins."""
        req = _Request("listAudit", query={**_page(limit, cursor), "job": job})
        return _decode(AuditList.from_json, await self._send(req))

    # Calendars

    async def list_calendars(self) -> list[Calendar]:
        data = await self._send(_Request("listCalendars"))
        return _decode(CalendarList.from_json, data).calendars

    async def get_calendar(self, name: str) -> Calendar:
        return _decode(Calendar.from_json, await self._send(_calendar("getCalendar", name)))

    async def put_calendar(self, name: str, calendar: CalendarIn) -> Calendar:
        req = _calendar("putCalendar", name, calendar.to_json())
        return _decode(Calendar.from_json, await self._send(req))

    async def delete_calendar(self, name: str) -> None:
        await self._send(_calendar("deleteCalendar", name))

    # Anchors

    async def list_anchors(self) -> list[Anchor]:
        data = await self._send(_Request("listAnchors"))
        return _decode(AnchorList.from_json, data).anchors

    async def get_anchor(self, name: str) -> Anchor:
        return _decode(Anchor.from_json, await self._send(_anchor("getAnchor", name)))

    async def put_anchor(self, name: str, at: datetime | str) -> Anchor:
        req = _anchor("putAnchor", name, AnchorIn(instant_text(at)).to_json())
        return _decode(Anchor.from_json, await self._send(req))

    async def delete_anchor(self, name: str, *, if_unused: bool = False) -> AnchorDeleted:
        data = await self._send(_delete_anchor(name, if_unused))
        return _decode(AnchorDeleted.from_json, data)

    async def list_open_breakers(self) -> list[Breaker]:
        data = await self._send(_Request("listOpenBreakers"))
        return _decode(BreakerList.from_json, data).breakers

    async def list_connections(self) -> list[Connection]:
        data = await self._send(_Request("listConnections"))
        return _decode(ConnectionList.from_json, data).connections

    async def list_nodes(self) -> list[Node]:
        return _decode(NodeList.from_json, await self._send(_Request("listNodes"))).nodes

    async def whoami(self) -> Identity:
        return _decode(Identity.from_json, await self._send(_Request("whoami")))

    async def get_summary(self) -> Summary:
        return _decode(Summary.from_json, await self._send(_Request("getSummary")))

    # Queues

    async def list_queues(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> list[Queue]:
        """Every queue of the namespace by name (after ``cursor``, when given): the pages the
        node answers, ``limit`` queues each (default 1,000), followed."""
        queues: list[Queue] = []
        while True:
            req = _Request("listQueues", query=_page(limit or 1000, cursor))
            page = _decode(QueueList.from_json, await self._send(req))
            queues.extend(page.queues)
            if page.next_cursor is None:
                return queues
            cursor = page.next_cursor

    async def get_queue(self, name: str) -> Queue:
        req = _Request("getQueue", {"name": _segment(name)})
        return _decode(Queue.from_json, await self._send(req))

    async def list_queue_messages(
        self,
        name: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        payload: bool = False,
    ) -> QueueMessageList:
        data = await self._send(_queue_messages(name, limit, cursor, payload))
        return _decode(QueueMessageList.from_json, data)

    async def lease(
        self,
        queue: str,
        *,
        max: int | None = None,
        wait_ms: int | None = None,
        visibility_ms: int | None = None,
        types: Sequence[str] | None = None,
    ) -> list[Message]:
        req = _lease(queue, max, wait_ms, visibility_ms, types)
        return _decode(LeaseResult.from_json, await self._send(req)).messages

    async def ack(self, queue: str, receipts: Sequence[str]) -> ReceiptResults:
        req = _receipts("ackMessages", queue, AckRequest(receipts))
        return _decode(ReceiptResults.from_json, await self._send(req))

    async def nack(
        self, queue: str, receipts: Sequence[str], *, delay_ms: int | None = None
    ) -> ReceiptResults:
        req = _receipts("nackMessages", queue, NackRequest(receipts, delay_ms))
        return _decode(ReceiptResults.from_json, await self._send(req))

    async def extend(
        self, queue: str, receipts: Sequence[str], *, visibility_ms: int
    ) -> ReceiptResults:
        req = _receipts("extendMessages", queue, ExtendRequest(receipts, visibility_ms))
        return _decode(ReceiptResults.from_json, await self._send(req))

    # The rest

    async def signing_secret(self) -> CurrentSigningSecret:
        return _decode(
            CurrentSigningSecret.from_json, await self._send(_Request("getSigningSecret"))
        )

    async def rotate_signing_secret(self, *, overlap: str | None = None) -> SigningSecret:
        return _decode(SigningSecret.from_json, await self._send(_rotate(overlap)))

    async def preview_schedule(
        self, schedule: Schedule, *, count: int | None = None, job_id: str | None = None
    ) -> SchedulePreview:
        request = _preview(schedule, count, job_id)
        return _decode(SchedulePreview.from_json, await self._send(request))

    async def openapi(self) -> dict[str, Any]:
        data: dict[str, Any] = await self._send(_Request("getOpenApi"))
        return data

    async def healthz(self) -> Status:
        return _decode(Status.from_json, await self._send(_Request("healthz")))

    async def readyz(self) -> Status:
        return _decode(Status.from_json, await self._send(_Request("readyz")))

    async def metrics(self) -> str:
        text: str = await self._send(_Request("metrics"), raw=True)
        return text


__all__ = ["DEFAULT_TIMEOUT", "AsyncClient", "Client", "HourglassError", "job_ref"]
