//! Who asks the [`crate::Scheduler`] for a change, as the audit log records it: the id of the
//! API key that made the request (never the key). Each change the scheduler makes for an
//! [`Actor`] hands the store one entry (`hourglass_store`'s `AuditRecord`) naming it, which the
//! store writes in the change's transaction.

use hourglass_core::JobId;
use hourglass_store::{AuditAction, AuditRecord};
use jiff::Timestamp;

/// The caller of a change: the API key's id (see the server's `auth.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub key_id: String,
}

impl Actor {
    pub fn new(key_id: impl Into<String>) -> Self {
        Self {
            key_id: key_id.into(),
        }
    }

    /// The entry recording that this actor did `action` to `jobs` (their count, and the first
    /// [`hourglass_store::AUDIT_JOB_IDS`] of them) in `namespace` at `at`.
    pub(crate) fn entry(
        &self,
        namespace: &str,
        action: AuditAction,
        jobs: &[JobId],
        at: Timestamp,
    ) -> AuditRecord {
        AuditRecord {
            at,
            namespace: namespace.to_owned(),
            key_id: self.key_id.clone(),
            action,
            jobs: Vec::new(),
            count: 0,
            dead_letter: None,
            fields: Vec::new(),
            name: None,
        }
        .naming(jobs.iter().copied())
    }
}
