"""Every endpoint of the node's API: its OpenAPI ``operationId``, method and path, and the name
of the ``Client``/``AsyncClient`` method that calls it. The clients build their requests from
this table, and ``scripts/sdk-openapi-check`` compares it with the OpenAPI document."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    id: str
    method: str
    path: str
    python: str


def _ops(*rows: tuple[str, str, str, str]) -> dict[str, Operation]:
    return {row[0]: Operation(*row) for row in rows}


OPERATIONS = _ops(
    ("createJob", "POST", "/v1/jobs", "create_job"),
    ("listJobs", "GET", "/v1/jobs", "list_jobs"),
    ("createJobs", "POST", "/v1/jobs/batch", "create_jobs"),
    ("getJob", "GET", "/v1/jobs/{id}", "get_job"),
    ("updateJob", "PATCH", "/v1/jobs/{id}", "update_job"),
    ("cancelJob", "DELETE", "/v1/jobs/{id}", "cancel_job"),
    ("pauseJob", "POST", "/v1/jobs/{id}/pause", "pause_job"),
    ("resumeJob", "POST", "/v1/jobs/{id}/resume", "resume_job"),
    ("triggerJob", "POST", "/v1/jobs/{id}/trigger", "trigger_job"),
    ("listJobRuns", "GET", "/v1/jobs/{id}/runs", "list_job_runs"),
    ("listDeadLetters", "GET", "/v1/dead-letters", "list_dead_letters"),
    ("getDeadLetter", "GET", "/v1/dead-letters/{id}", "get_dead_letter"),
    ("deleteDeadLetter", "DELETE", "/v1/dead-letters/{id}", "delete_dead_letter"),
    ("replayDeadLetter", "POST", "/v1/dead-letters/{id}/replay", "replay_dead_letter"),
    ("listOpenBreakers", "GET", "/v1/breakers", "list_open_breakers"),
    ("listConnections", "GET", "/v1/connections", "list_connections"),
    ("listQueues", "GET", "/v1/queues", "list_queues"),
    ("getQueue", "GET", "/v1/queues/{name}", "get_queue"),
    ("listQueueMessages", "GET", "/v1/queues/{name}/messages", "list_queue_messages"),
    ("leaseMessages", "POST", "/v1/queues/{name}/lease", "lease"),
    ("ackMessages", "POST", "/v1/queues/{name}/ack", "ack"),
    ("nackMessages", "POST", "/v1/queues/{name}/nack", "nack"),
    ("extendMessages", "POST", "/v1/queues/{name}/extend", "extend"),
    ("rotateSigningSecret", "POST", "/v1/signing-secret", "rotate_signing_secret"),
    ("previewSchedule", "POST", "/v1/schedules/preview", "preview_schedule"),
    ("getOpenApi", "GET", "/v1/openapi.json", "openapi"),
    ("healthz", "GET", "/healthz", "healthz"),
    ("readyz", "GET", "/readyz", "readyz"),
    ("metrics", "GET", "/metrics", "metrics"),
)
