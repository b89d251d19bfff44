//! What every published message says about its occurrence, whatever the system: the delivery id
//! (the same on every attempt, for deduplication), the job id, its type, the nominal due time and
//! the attempt. Each publisher puts these where that system's consumers look (README, Targets).

use hourglass_core::Occurrence;

/// The occurrence's facts as text, ready for headers and attributes.
pub struct Meta {
    pub delivery_id: String,
    pub job_id: String,
    pub job_type: Option<String>,
    /// RFC 3339 with milliseconds, in UTC: `2026-11-26T09:00:00.000Z`.
    pub due_at: String,
    pub attempt: String,
}

impl Meta {
    pub fn of(occ: &Occurrence) -> Self {
        // The occurrence as its job knows it: a handed-off `allow` occurrence is its parent's.
        let (job_id, due) = occ.origin();
        Self {
            delivery_id: occ.delivery_id().to_string(),
            job_id: job_id.to_string(),
            job_type: occ.spec.job_type.clone(),
            due_at: format!("{due:.3}"),
            attempt: occ.attempt.to_string(),
        }
    }

    /// The facts as (name, value) pairs under one of the naming schemes below, in the order
    /// delivery id, job id, due at, attempt, job type; the type is left out when the job has none.
    pub fn pairs(&self, names: &'static Names) -> impl Iterator<Item = (&'static str, &str)> {
        let values = [
            Some(self.delivery_id.as_str()),
            Some(self.job_id.as_str()),
            Some(self.due_at.as_str()),
            Some(self.attempt.as_str()),
            self.job_type.as_deref(),
        ];
        names
            .iter()
            .zip(values)
            .filter_map(|(name, value)| Some((*name, value?)))
    }
}

/// The names the facts go under in one system, in [`Meta::pairs`]' order.
pub type Names = [&'static str; 5];

/// Message attributes and AMQP headers.
pub const HEADER_NAMES: Names = [
    "hourglass-delivery-id",
    "hourglass-job-id",
    "hourglass-due-at",
    "hourglass-attempt",
    "hourglass-job-type",
];

/// NATS headers, capitalised as NATS headers usually are.
pub const NATS_NAMES: Names = [
    "Hourglass-Delivery-Id",
    "Hourglass-Job-Id",
    "Hourglass-Due-At",
    "Hourglass-Attempt",
    "Hourglass-Job-Type",
];

/// Redis stream fields.
pub const FIELD_NAMES: Names = ["delivery_id", "job_id", "due_at", "attempt", "job_type"];

/// EventBridge `resources`, as `hourglass:<name>/<value>`.
pub const RESOURCE_NAMES: Names = ["delivery-id", "job-id", "due-at", "attempt", "job-type"];

/// The payload as the job stored it (JSON text), `null` when it has none.
pub fn payload(occ: &Occurrence) -> &str {
    occ.payload.as_deref().unwrap_or("null")
}
