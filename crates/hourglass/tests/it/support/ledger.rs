//! What the test knows it was promised (acknowledged jobs, and creates answered with an error),
//! and the accounting that holds the receiver's deliveries against it.
//!
//! `hourglass-bench` has an accounting of its own (`crates/bench/src/accounting.rs`), but it
//! cannot serve here: it lives in a binary crate (whose modules no test can import), and it only
//! counts, per delivery id. These tests need the evidence per job: which job is missing, which
//! payload arrived, whether a job came under two delivery ids, and whether a delivery of an
//! unknown job belongs to a create that was refused but committed anyway.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Api, Delivery, NodeProc, Receiver, instant_ms, now_ms, rfc3339_ms};

/// What the test knows about an acknowledged job.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    pub due_ms: i64,
    pub n: u64,
}

/// Acknowledged jobs by id, and the payload numbers of creates that were answered with an error
/// (their jobs may or may not exist: a commit can succeed just as its answer is lost).
#[derive(Default)]
pub struct Ledger {
    pub jobs: HashMap<String, Expected>,
    pub unacknowledged: BTreeSet<u64>,
    next_n: u64,
}

/// The jobs of one batch create as the test planned them: (payload number, due ms).
pub type Planned = Vec<(u64, i64)>;

/// The body of a batch create of one-off webhook jobs, one per due time, and their numbers.
pub fn batch_body(ledger: &mut Ledger, url: &str, dues: &[i64]) -> (Value, Planned) {
    let planned: Planned = dues
        .iter()
        .map(|&due| {
            ledger.next_n += 1;
            (ledger.next_n, due)
        })
        .collect();
    let jobs: Vec<Value> = planned
        .iter()
        .map(|(n, due)| {
            json!({
                "type": "cluster.test",
                "schedule": {"at": rfc3339_ms(*due)},
                "target": {"webhook": {"url": url}},
                "payload": {"n": n},
            })
        })
        .collect();
    (json!({"jobs": jobs}), planned)
}

impl Ledger {
    /// Creates one one-off job per due time in one batch, which must be acknowledged (201), and
    /// records them.
    pub async fn create_batch(&mut self, api: &Api, url: &str, dues: &[i64]) {
        let (body, planned) = batch_body(self, url, dues);
        let (status, answer) = api.call("POST", "/v1/jobs/batch", Some(body)).await;
        assert_eq!(status, 201, "batch create on {}: {answer}", api.base);
        self.acknowledge(&planned, &answer);
    }

    /// Records the jobs of an acknowledged batch create, checking what the node answered.
    pub fn acknowledge(&mut self, planned: &[(u64, i64)], body: &Value) {
        let created = body["jobs"]
            .as_array()
            .unwrap_or_else(|| panic!("batch answer without jobs: {body}"));
        assert_eq!(created.len(), planned.len(), "batch answer: {body}");
        assert_eq!(body["created"], planned.len(), "batch answer: {body}");
        for (job, &(n, due_ms)) in created.iter().zip(planned) {
            let id = job["id"].as_str().expect("job id").to_string();
            assert_eq!(
                instant_ms(&job["next_due_at"]),
                due_ms,
                "next_due_at of a new job is its `at`: {job}"
            );
            assert_eq!(
                job["payload"],
                json!({"n": n}),
                "payload of a new job: {job}"
            );
            let previous = self.jobs.insert(id.clone(), Expected { due_ms, n });
            assert!(previous.is_none(), "job id {id} handed out twice");
        }
    }

    pub fn refused(&mut self, planned: &[(u64, i64)]) {
        self.unacknowledged.extend(planned.iter().map(|(n, _)| *n));
    }

    pub fn last_due_ms(&self) -> i64 {
        self.jobs.values().map(|e| e.due_ms).max().unwrap_or(0)
    }

    /// Whether every acknowledged job has at least one delivery.
    pub fn all_delivered(&self, hooks: &[Delivery]) -> bool {
        if hooks.len() < self.jobs.len() {
            return false;
        }
        let seen: HashSet<&str> = hooks.iter().map(|h| h.job_id()).collect();
        self.jobs.keys().all(|id| seen.contains(id.as_str()))
    }
}

/// Waits until every acknowledged job has a delivery, or until a minute after the last one is
/// due (a failure: the caller's accounting says which are missing). Panics at once if a node
/// dies meanwhile.
pub async fn wait_all_delivered(ledger: &Ledger, hooks: &Receiver, procs: &mut [NodeProc]) -> bool {
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis((ledger.last_due_ms() - now_ms()).max(0) as u64)
        + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        for node in procs.iter_mut() {
            if let Some(status) = node.exited() {
                panic!(
                    "node {} exited unexpectedly ({status}) while jobs were due",
                    node.name
                );
            }
        }
        if ledger.all_delivered(&hooks.deliveries()) {
            return true;
        }
        hooks
            .wait_count(hooks.count() + 1, Duration::from_secs(1))
            .await;
    }
    false
}

/// Deliveries held against the ledger.
#[derive(Default)]
pub struct Accounting {
    /// Acknowledged jobs never delivered.
    pub missing: Vec<String>,
    /// Deliveries of jobs the test never had acknowledged and whose payload is no refused create.
    pub unknown: Vec<String>,
    /// Deliveries of refused creates whose commit went through after all.
    pub refused_but_delivered: usize,
    pub early: Vec<String>,
    /// Jobs delivered under more than one delivery id.
    pub mixed_ids: Vec<String>,
    /// Deliveries whose due header or payload is not the job's.
    pub wrong: Vec<String>,
    /// Jobs delivered more than once, and the extra deliveries.
    pub duplicated_jobs: Vec<String>,
    pub extra_deliveries: usize,
    /// Per acknowledged job: (due ms, first receive ms).
    pub first: HashMap<String, (i64, i64)>,
    /// Every delivery of an acknowledged job after its first: (due ms, receive ms).
    pub redelivered: Vec<(i64, i64)>,
}

pub fn account(ledger: &Ledger, hooks: &[Delivery]) -> Accounting {
    let mut acc = Accounting::default();
    let mut by_job: HashMap<&str, Vec<&Delivery>> = HashMap::new();
    for h in hooks {
        by_job.entry(h.job_id()).or_default().push(h);
    }
    for (id, expected) in &ledger.jobs {
        if !by_job.contains_key(id.as_str()) {
            acc.missing
                .push(format!("{id} due {}", rfc3339_ms(expected.due_ms)));
        }
    }
    for (id, list) in &by_job {
        let ids: BTreeSet<&str> = list.iter().map(|h| h.webhook_id()).collect();
        if ids.len() != 1 {
            acc.mixed_ids.push(format!("{id}: {ids:?}"));
        }
        if list.len() > 1 {
            acc.duplicated_jobs.push(id.to_string());
            acc.extra_deliveries += list.len() - 1;
        }
        for h in list {
            if h.received_ms < h.due_ms() {
                acc.early.push(format!(
                    "{id}: received {} ms before its due {}",
                    h.due_ms() - h.received_ms,
                    rfc3339_ms(h.due_ms())
                ));
            }
        }
        match ledger.jobs.get(*id) {
            Some(expected) => {
                for h in list {
                    if h.due_ms() != expected.due_ms || h.n() != Some(expected.n) {
                        acc.wrong.push(format!(
                            "{id}: due {} n {:?}, expected due {} n {}",
                            rfc3339_ms(h.due_ms()),
                            h.n(),
                            rfc3339_ms(expected.due_ms),
                            expected.n
                        ));
                    }
                }
                let mut times: Vec<i64> = list.iter().map(|h| h.received_ms).collect();
                times.sort_unstable();
                acc.first
                    .insert(id.to_string(), (expected.due_ms, times[0]));
                acc.redelivered
                    .extend(times[1..].iter().map(|at| (expected.due_ms, *at)));
            }
            None => {
                if list[0]
                    .n()
                    .is_some_and(|n| ledger.unacknowledged.contains(&n))
                {
                    acc.refused_but_delivered += 1;
                } else {
                    acc.unknown
                        .push(format!("{id} (payload n {:?})", list[0].n()));
                }
            }
        }
    }
    acc.missing.sort();
    acc
}

impl Accounting {
    /// Asserts the delivery guarantees: nothing lost, nothing unknown, nothing early, one
    /// delivery id per job, the right due time and payload.
    pub fn assert_guarantees(&self) {
        let examples = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>();
        assert!(
            self.missing.is_empty(),
            "{} acknowledged jobs never delivered, e.g. {:?}",
            self.missing.len(),
            examples(&self.missing)
        );
        assert!(
            self.unknown.is_empty(),
            "{} deliveries of jobs never created, e.g. {:?}",
            self.unknown.len(),
            examples(&self.unknown)
        );
        assert!(
            self.early.is_empty(),
            "{} deliveries before their due time, e.g. {:?}",
            self.early.len(),
            examples(&self.early)
        );
        assert!(
            self.mixed_ids.is_empty(),
            "{} jobs delivered under more than one delivery id, e.g. {:?}",
            self.mixed_ids.len(),
            examples(&self.mixed_ids)
        );
        assert!(
            self.wrong.is_empty(),
            "{} deliveries with another due time or payload, e.g. {:?}",
            self.wrong.len(),
            examples(&self.wrong)
        );
    }

    /// First-delivery lateness (ms) of the acknowledged jobs that `filter` selects by due time.
    pub fn lateness(&self, filter: impl Fn(i64) -> bool) -> Vec<i64> {
        self.first
            .values()
            .filter(|(due, _)| filter(*due))
            .map(|(due, first)| first - due)
            .collect()
    }
}
