//! Every operation of the API with the [`crate::Client`] method that calls it, as the OpenAPI
//! document (`crates/server/openapi.json`) names them. A test holds this table to the document
//! (an operation without a row fails it) and to the client's source (a row without its method
//! fails it), so the client covers the whole API.

/// One operation: its OpenAPI `operationId`, method and path, and the client's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub id: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    /// The [`crate::Client`] method that calls it.
    pub rust: &'static str,
}

const fn op(
    id: &'static str,
    method: &'static str,
    path: &'static str,
    rust: &'static str,
) -> Operation {
    Operation {
        id,
        method,
        path,
        rust,
    }
}

/// The API's operations, in the document's order. `createJobs` has a second method,
/// `create_jobs_minimal`, for its `Prefer: return=minimal` answer.
pub const OPERATIONS: &[Operation] = &[
    op("createJob", "POST", "/v1/jobs", "create_job"),
    op("listJobs", "GET", "/v1/jobs", "list_jobs"),
    op("createJobs", "POST", "/v1/jobs/batch", "create_jobs"),
    op("getJob", "GET", "/v1/jobs/{id}", "get_job"),
    op("updateJob", "PATCH", "/v1/jobs/{id}", "update_job"),
    op("cancelJob", "DELETE", "/v1/jobs/{id}", "cancel_job"),
    op("pauseJob", "POST", "/v1/jobs/{id}/pause", "pause_job"),
    op("resumeJob", "POST", "/v1/jobs/{id}/resume", "resume_job"),
    op("triggerJob", "POST", "/v1/jobs/{id}/trigger", "trigger_job"),
    op(
        "backfillJob",
        "POST",
        "/v1/jobs/{id}/backfill",
        "backfill_job",
    ),
    op("bulkJobs", "POST", "/v1/jobs/bulk/{action}", "bulk_jobs"),
    op("listJobRuns", "GET", "/v1/jobs/{id}/runs", "job_runs"),
    op("listAnchors", "GET", "/v1/anchors", "list_anchors"),
    op("getAnchor", "GET", "/v1/anchors/{name}", "get_anchor"),
    op("putAnchor", "PUT", "/v1/anchors/{name}", "put_anchor"),
    op(
        "deleteAnchor",
        "DELETE",
        "/v1/anchors/{name}",
        "delete_anchor",
    ),
    op("listCalendars", "GET", "/v1/calendars", "list_calendars"),
    op("getCalendar", "GET", "/v1/calendars/{name}", "get_calendar"),
    op("putCalendar", "PUT", "/v1/calendars/{name}", "put_calendar"),
    op(
        "deleteCalendar",
        "DELETE",
        "/v1/calendars/{name}",
        "delete_calendar",
    ),
    op(
        "listDeadLetters",
        "GET",
        "/v1/dead-letters",
        "list_dead_letters",
    ),
    op(
        "getDeadLetter",
        "GET",
        "/v1/dead-letters/{id}",
        "get_dead_letter",
    ),
    op(
        "deleteDeadLetter",
        "DELETE",
        "/v1/dead-letters/{id}",
        "delete_dead_letter",
    ),
    op(
        "replayDeadLetter",
        "POST",
        "/v1/dead-letters/{id}/replay",
        "replay_dead_letter",
    ),
    op("listAudit", "GET", "/v1/audit", "list_audit"),
    op("listOpenBreakers", "GET", "/v1/breakers", "list_breakers"),
    op(
        "listConnections",
        "GET",
        "/v1/connections",
        "list_connections",
    ),
    op("whoami", "GET", "/v1/whoami", "whoami"),
    op("listNodes", "GET", "/v1/nodes", "list_nodes"),
    op("getSummary", "GET", "/v1/summary", "summary"),
    op("listQueues", "GET", "/v1/queues", "list_queues"),
    op("getQueue", "GET", "/v1/queues/{name}", "queue_stats"),
    op(
        "listQueueMessages",
        "GET",
        "/v1/queues/{name}/messages",
        "queue_messages",
    ),
    op("leaseMessages", "POST", "/v1/queues/{name}/lease", "lease"),
    op("ackMessages", "POST", "/v1/queues/{name}/ack", "ack"),
    op("nackMessages", "POST", "/v1/queues/{name}/nack", "nack"),
    op(
        "extendMessages",
        "POST",
        "/v1/queues/{name}/extend",
        "extend",
    ),
    op(
        "getSigningSecret",
        "GET",
        "/v1/signing-secret",
        "signing_secret",
    ),
    op(
        "rotateSigningSecret",
        "POST",
        "/v1/signing-secret",
        "rotate_signing_secret",
    ),
    op(
        "previewSchedule",
        "POST",
        "/v1/schedules/preview",
        "preview_schedule",
    ),
    op("getOpenApi", "GET", "/v1/openapi.json", "openapi"),
    op("healthz", "GET", "/healthz", "healthz"),
    op("readyz", "GET", "/readyz", "readyz"),
    op("metrics", "GET", "/metrics", "metrics"),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::OPERATIONS;

    /// The document's operations as (operationId, METHOD, path).
    fn documented() -> BTreeSet<(String, String, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../server/openapi.json");
        let text = std::fs::read_to_string(path).expect("the OpenAPI document");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let mut ops = BTreeSet::new();
        for (route, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("a path item") {
                if let Some(id) = op.get("operationId").and_then(|id| id.as_str()) {
                    ops.insert((id.to_owned(), method.to_uppercase(), route.clone()));
                }
            }
        }
        ops
    }

    #[test]
    fn every_documented_operation_has_a_client_method() {
        let table: BTreeSet<(String, String, String)> = OPERATIONS
            .iter()
            .map(|o| (o.id.to_owned(), o.method.to_owned(), o.path.to_owned()))
            .collect();
        assert_eq!(table.len(), OPERATIONS.len(), "an operation listed twice");
        let documented = documented();
        let missing: Vec<_> = documented.difference(&table).collect();
        assert!(
            missing.is_empty(),
            "operations of openapi.json without a client method: {missing:?}"
        );
        let extra: Vec<_> = table.difference(&documented).collect();
        assert!(
            extra.is_empty(),
            "rows of OPERATIONS that openapi.json does not have: {extra:?}"
        );
    }

    /// Each row's method is a public async method of `Client` whose doc comment names the
    /// route, in the client's source.
    #[test]
    fn each_row_names_a_client_method_documented_with_its_route() {
        let source: String = ["mod.rs", "jobs.rs", "queues.rs", "node.rs"]
            .iter()
            .map(|file| {
                let path = format!("{}/src/client/{file}", env!("CARGO_MANIFEST_DIR"));
                std::fs::read_to_string(path).expect("the client's source")
            })
            .collect();
        for op in OPERATIONS {
            let signature = format!("    pub async fn {}", op.rust);
            let at = source
                .find(&format!("{signature}("))
                .or_else(|| source.find(&format!("{signature}<")))
                .unwrap_or_else(|| panic!("no Client::{} for {}", op.rust, op.id));
            let doc: String = source[..at]
                .lines()
                .rev()
                .take_while(|line| line.trim_start().starts_with("///"))
                .collect();
            let route = format!("`{} {}`", op.method, op.path);
            assert!(
                doc.contains(&route),
                "Client::{}'s doc comment does not name {route}",
                op.rust
            );
        }
    }
}
