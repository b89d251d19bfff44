/**
 * Every endpoint of the node's API: its OpenAPI `operationId`, method and path, and the name of
 * the `Client` method that calls it. The client builds its requests from this table, and the
 * OpenAPI check compares it with the document.
 */
export interface Operation {
  readonly method: "GET" | "POST" | "PATCH" | "DELETE";
  readonly path: string;
  readonly client: string;
}

export const operations = {
  createJob: { method: "POST", path: "/v1/jobs", client: "createJob" },
  listJobs: { method: "GET", path: "/v1/jobs", client: "listJobs" },
  createJobs: { method: "POST", path: "/v1/jobs/batch", client: "createJobs" },
  getJob: { method: "GET", path: "/v1/jobs/{id}", client: "getJob" },
  updateJob: { method: "PATCH", path: "/v1/jobs/{id}", client: "updateJob" },
  cancelJob: { method: "DELETE", path: "/v1/jobs/{id}", client: "cancelJob" },
  pauseJob: { method: "POST", path: "/v1/jobs/{id}/pause", client: "pauseJob" },
  resumeJob: { method: "POST", path: "/v1/jobs/{id}/resume", client: "resumeJob" },
  triggerJob: { method: "POST", path: "/v1/jobs/{id}/trigger", client: "triggerJob" },
  listJobRuns: { method: "GET", path: "/v1/jobs/{id}/runs", client: "listJobRuns" },
  listDeadLetters: { method: "GET", path: "/v1/dead-letters", client: "listDeadLetters" },
  getDeadLetter: { method: "GET", path: "/v1/dead-letters/{id}", client: "getDeadLetter" },
  deleteDeadLetter: { method: "DELETE", path: "/v1/dead-letters/{id}", client: "deleteDeadLetter" },
  replayDeadLetter: { method: "POST", path: "/v1/dead-letters/{id}/replay", client: "replayDeadLetter" },
  listOpenBreakers: { method: "GET", path: "/v1/breakers", client: "listOpenBreakers" },
  listConnections: { method: "GET", path: "/v1/connections", client: "listConnections" },
  listQueues: { method: "GET", path: "/v1/queues", client: "listQueues" },
  getQueue: { method: "GET", path: "/v1/queues/{name}", client: "getQueue" },
  listQueueMessages: { method: "GET", path: "/v1/queues/{name}/messages", client: "listQueueMessages" },
  leaseMessages: { method: "POST", path: "/v1/queues/{name}/lease", client: "lease" },
  ackMessages: { method: "POST", path: "/v1/queues/{name}/ack", client: "ack" },
  nackMessages: { method: "POST", path: "/v1/queues/{name}/nack", client: "nack" },
  extendMessages: { method: "POST", path: "/v1/queues/{name}/extend", client: "extend" },
  rotateSigningSecret: { method: "POST", path: "/v1/signing-secret", client: "rotateSigningSecret" },
  previewSchedule: { method: "POST", path: "/v1/schedules/preview", client: "previewSchedule" },
  getOpenApi: { method: "GET", path: "/v1/openapi.json", client: "openapi" },
  healthz: { method: "GET", path: "/healthz", client: "healthz" },
  readyz: { method: "GET", path: "/readyz", client: "readyz" },
  metrics: { method: "GET", path: "/metrics", client: "metrics" },
} as const satisfies Record<string, Operation>;

export type OperationId = keyof typeof operations;
