//! The audit log's shapes: `GET /v1/audit`'s query and its page of entries.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::instant;

/// What a request that changed something did, as the audit log names it.
pub const AUDIT_ACTIONS: [&str; 9] = [
    "create",
    "change",
    "pause",
    "resume",
    "cancel",
    "trigger",
    "replay",
    "purge",
    "rotate_secret",
];

/// One entry of the namespace's audit log: one API request that changed something. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "One API request that changed something in the namespace.")
)]
pub struct AuditEntry {
    /// `create`, `change` (a `PATCH`), `pause`, `resume`, `cancel`, `trigger`, `replay` (a dead
    /// letter replayed), `purge` (a dead letter deleted), `rotate_secret`, `put_calendar`,
    /// `delete_calendar`, `put_anchor` (created or moved) or `delete_anchor`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "change",
            pattern = "^(create|change|pause|resume|cancel|trigger|replay|purge|rotate_secret|put_calendar|delete_calendar|put_anchor|delete_anchor)$"
        )
    )]
    pub action: String,
    /// When the change was made.
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub at: Timestamp,
    /// Where it goes in the log: pass it as `cursor` to read the entries before it.
    pub cursor: String,
    /// The dead letter a `replay` or `purge` concerns.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub dead_letter_id: Option<String>,
    /// For a `change`, the fields it changed (`type`, `schedule`, `target`, `retry`,
    /// `misfire`, `payload`); empty otherwise.
    pub fields: Vec<String>,
    /// How many jobs it concerns: a batch create's jobs, of which `jobs` lists the first 20; a
    /// calendar put's re-planned jobs, an anchor put's moved ones, an anchor delete's cancelled
    /// ones.
    pub job_count: u32,
    /// The jobs it concerns (created, changed, made by a replay, re-planned by a calendar put,
    /// moved by an anchor put); the first 20. An anchor delete lists none (`job_count` counts
    /// them; `GET /v1/jobs?anchor=` finds them).
    pub jobs: Vec<Uuid>,
    /// The id of the API key that made the request: the first 12 hex digits of its SHA-256
    /// (`sha256` in its `[[api_keys]]` entry), `open` on a node without keys. Never the key.
    #[cfg_attr(feature = "openapi", schema(example = "3f9a1c0d2b7e"))]
    pub key_id: String,
    /// The calendar or anchor a `put_calendar`, `delete_calendar`, `put_anchor` or
    /// `delete_anchor` concerns; `null` otherwise.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub name: Option<String>,
    pub namespace: String,
}

/// `GET /v1/audit`: a page of the namespace's audit log, newest first. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "A page of the namespace's audit log, newest first.")
)]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    /// The last entry's cursor when the page is full: pass it as `cursor` for the next page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_cursor: Option<String>,
}

/// `GET /v1/audit`'s query.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The previous page's `next_cursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Only entries about this job (its id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}
