//! Fixtures for the backends' own tests beside the suite (several stores on one database or
//! table, events between them): a fixed instant, one-off jobs, leases and completions.

use std::time::Duration;

use hourglass_core::{
    Action, Completion, JobSpec, Occurrence, QueueTarget, Schedule, Target, WebhookTarget,
};

use crate::{Lease, NewJob};

/// The instant the backends' own tests start from.
pub fn t0() -> jiff::Timestamp {
    "2030-01-01T00:00:00Z".parse().unwrap()
}

/// `n` milliseconds.
pub fn ms(n: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_millis(n)
}

/// A one-off job of `namespace` due at `due`, to a webhook or to the pull queue `queue`.
pub fn job(namespace: &str, due: jiff::Timestamp, queue: Option<&str>) -> NewJob {
    let target = match queue {
        Some(name) => Target::Queue(QueueTarget { name: name.into() }),
        None => Target::Webhook(WebhookTarget {
            url: "https://example.com/hook".parse().unwrap(),
            headers: Default::default(),
            rate_limit: None,
            batch: None,
        }),
    };
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: namespace.into(),
        key: None,
        spec: JobSpec {
            job_type: None,
            schedule: Schedule::at(due),
            target,
            retry: Default::default(),
            misfire: Default::default(),
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: None,
        fingerprint: 1,
        first_due: due,
        now: t0(),
    }
}

/// The audit entry of a create in `namespace` as the engine hands it over (the store names the
/// jobs it creates).
pub fn create_entry(namespace: &str) -> crate::AuditRecord {
    crate::AuditRecord {
        at: t0(),
        namespace: namespace.into(),
        key_id: "k-test".into(),
        action: crate::AuditAction::Create,
        jobs: Vec::new(),
        count: 0,
        dead_letter: None,
        fields: Vec::new(),
        name: None,
    }
}

/// Every job the audit log of `namespace` names, in every entry (newest first).
pub async fn audited_jobs(store: &dyn crate::Store, namespace: &str) -> Vec<hourglass_core::JobId> {
    let query = crate::AuditQuery {
        namespace: namespace.into(),
        before: None,
        job: None,
        limit: 1000,
    };
    let entries = store.audit_entries(query).await.unwrap();
    entries.into_iter().flat_map(|e| e.record.jobs).collect()
}

/// A 30-second lease of `owner` with the clock at `now`.
pub fn lease(owner: &str, now: jiff::Timestamp) -> Lease {
    Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(30),
        now,
    }
}

/// The completion of a one-off's occurrence as delivered, recording no run (a plain update).
pub fn delivered_without_run(o: &Occurrence) -> Completion {
    Completion {
        job_id: o.job_id,
        token: o.token,
        due: o.due,
        attempt: None,
        action: Action::Delivered {
            next: None,
            skipped: 0,
        },
        callback: None,
        origin: None,
    }
}
