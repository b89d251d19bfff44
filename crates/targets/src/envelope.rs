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
        Self {
            delivery_id: occ.delivery_id().to_string(),
            job_id: occ.job_id.to_string(),
            job_type: occ.spec.job_type.clone(),
            due_at: format!("{:.3}", occ.due),
            attempt: occ.attempt.to_string(),
        }
    }

    /// The facts as (name, value) pairs, with `prefix` before each name (`hourglass-` for
    /// headers, `hourglass_` for attribute names that may not contain '-'). The type is left out
    /// when the job has none.
    pub fn pairs(&self, prefix: &str) -> Vec<(String, &str)> {
        let mut out = vec![
            (format!("{prefix}delivery-id"), self.delivery_id.as_str()),
            (format!("{prefix}job-id"), self.job_id.as_str()),
            (format!("{prefix}due-at"), self.due_at.as_str()),
            (format!("{prefix}attempt"), self.attempt.as_str()),
        ];
        if let Some(job_type) = &self.job_type {
            out.push((format!("{prefix}job-type"), job_type.as_str()));
        }
        out
    }
}

/// The payload as the job stored it (JSON text), `null` when it has none.
pub fn payload(occ: &Occurrence) -> &str {
    occ.payload.as_deref().unwrap_or("null")
}
