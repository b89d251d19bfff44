//! Items to records and back: the table's key layout, the attributes of each kind of item, how
//! each is decoded (a value that does not decode is corrupt data, not an outage), and how SDK
//! errors become [`StoreError`]s.
//!
//! One table holds every kind of item, told apart by the partition key's prefix. It has no
//! secondary index: every index write is a write unit more, so what is looked up by time or by
//! namespace is kept in items of its own, each serving many jobs.
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | job | `j#<id>` | `j` |
//! | a job's payload over 256 bytes (`payload.rs`) | `p#<job id>` | `p` |
//! | due entry (`entry.rs`) | `e#f#<shard>`, or `e#q#<shard>#<len(ns)>:<ns>#<queue>` | `<fire ms>#<root uid>#<part>` |
//! | snapshot of a create batch's fired entry (`snapshot.rs`) | `c#<entry pk>#<fire ms>#<root uid>` | `c` |
//! | settlement (`complete.rs`) | `s#<entry pk>#<fire ms>#<root uid>` | `<lease>#<uid>` |
//! | namespace registry (a create batch's ids) | `n#<ns>` | `<first id>#<uid>` |
//! | idempotency key | `k#<len(ns)>:<ns>#<key>` | `k` |
//! | run | `r#<job id>` | `<started ms>#<seq>` |
//! | dead letter | `d#<id>` | `d` |
//! | dead letters of a namespace | `dn#<ns>` | `<id>` |
//! | queue name | `qr#<ns>` | `<queue>` |
//! | signing secrets | `s#<ns>` | `s` |
//! | fence | `x` | `<ms>#<job id>#<token>` |
//! | table settings | `meta` | `meta` |
//! | node heartbeat (`nodes.rs`; not written by serverless ticks) | `nodes` | `<node id>` |
//! | audit entry (`audit.rs`) | `a#<ns>` | `<at ms>#<seq>` |
//! | anchor (`anchors.rs`) | `an#<ns>` | `<name>` |
//!
//! Numbers inside sort keys are zero-padded to 20 digits (negative instants count as 0), so
//! that string order is numeric order. Items that retention removes carry `ttl` (seconds since
//! the epoch), which DynamoDB's time to live deletes for free.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use hourglass_core::{JobId, JobSpec, JobState, from_ms};

use crate::rules::state_from_code;
use crate::{
    DeadLetter, JobRecord, KeyedTrigger, NewJob, Result, RunCursor, RunOutcome, RunRecord,
    StoreError,
};

pub(super) type Item = HashMap<String, AttributeValue>;

/// The sort key of every single-item kind whose partition key is enough.
pub(super) const JOB_SK: &str = "j";
pub(super) const KEY_SK: &str = "k";
pub(super) const LETTER_SK: &str = "d";
pub(super) const SECRETS_SK: &str = "s";
pub(super) const PAYLOAD_SK: &str = "p";

pub(super) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(super) fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A number as it sorts inside a string key.
pub(super) fn ord(value: i64) -> String {
    format!("{:020}", value.max(0))
}

pub(super) fn job_pk(id: JobId) -> String {
    format!("j#{id}")
}

pub(super) fn payload_pk(id: JobId) -> String {
    format!("p#{id}")
}

pub(super) fn key_pk(namespace: &str, key: &str) -> String {
    format!("k#{}:{namespace}#{key}", namespace.len())
}

pub(super) fn run_pk(id: JobId) -> String {
    format!("r#{id}")
}

pub(super) fn run_sk(cursor: RunCursor) -> String {
    format!("{}#{}", ord(cursor.started_ms), ord(cursor.seq))
}

pub(super) fn letter_pk(id: i64) -> String {
    format!("d#{id}")
}

pub(super) fn registry_pk(namespace: &str) -> String {
    format!("n#{namespace}")
}

pub(super) fn letters_pk(namespace: &str) -> String {
    format!("dn#{namespace}")
}

pub(super) fn queues_pk(namespace: &str) -> String {
    format!("qr#{namespace}")
}

pub(super) fn secrets_pk(namespace: &str) -> String {
    format!("s#{namespace}")
}

/// The primary key of an item whose sort key is fixed.
pub(super) fn key(pk: String, sk: &str) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

pub(super) fn job_key(id: JobId) -> Item {
    key(job_pk(id), JOB_SK)
}

pub(super) fn payload_key(id: JobId) -> Item {
    key(payload_pk(id), PAYLOAD_SK)
}

/// Which due entries a job's occurrences are listed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane<'a> {
    /// Fired by the engine.
    Fired,
    /// One pull queue of one namespace.
    Queue { namespace: &'a str, queue: &'a str },
}

impl<'a> Lane<'a> {
    pub(super) fn of_spec(namespace: &'a str, spec: &'a JobSpec) -> Self {
        match spec.target.queue() {
            Some(queue) => Lane::Queue { namespace, queue },
            None => Lane::Fired,
        }
    }

    /// Whether `pk` is a partition of the fired lane's entries.
    pub(super) fn is_fired(pk: &str) -> bool {
        pk.starts_with("e#f#")
    }

    /// The partition of this lane's due entries in shard `shard`.
    pub(super) fn partition(self, shard: u32) -> String {
        match self {
            Lane::Fired => format!("e#f#{shard}"),
            Lane::Queue { namespace, queue } => {
                format!("e#q#{shard}#{}:{namespace}#{queue}", namespace.len())
            }
        }
    }
}

/// The fire time an entry's sort key starts with: no job it or any later entry lists is due
/// earlier.
pub(super) fn fire_of_entry_sk(sk: &str) -> i64 {
    sk.split_once('#')
        .and_then(|(fire, _)| fire.parse().ok())
        .unwrap_or(0)
}

/// The first entry sort key after every entry whose jobs fall due at or before `ms`.
pub(super) fn fire_bound_after(ms: i64) -> String {
    ord(ms.saturating_add(1))
}

pub(super) fn encode_spec(spec: &JobSpec) -> String {
    serde_json::to_string(spec).expect("job spec serializes")
}

fn decode_spec(text: &str) -> Result<JobSpec> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("job spec: {e}")))
}

pub(super) fn state_code(state: JobState) -> i64 {
    crate::rules::state_code(state)
}

/// Reading attributes, a missing or mistyped one being corrupt data.
pub(super) trait Attrs {
    fn opt_str(&self, name: &str) -> Result<Option<&str>>;
    fn opt_num(&self, name: &str) -> Result<Option<i64>>;

    fn str(&self, name: &str) -> Result<&str> {
        self.opt_str(name)?
            .ok_or_else(|| StoreError::Corrupt(format!("item without attribute {name}")))
    }

    fn num(&self, name: &str) -> Result<i64> {
        self.opt_num(name)?
            .ok_or_else(|| StoreError::Corrupt(format!("item without attribute {name}")))
    }
}

impl Attrs for Item {
    fn opt_str(&self, name: &str) -> Result<Option<&str>> {
        match self.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(text)) => Ok(Some(text)),
            Some(other) => Err(StoreError::Corrupt(format!(
                "attribute {name} is not a string: {other:?}"
            ))),
        }
    }

    fn opt_num(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(text)) => text.parse().map(Some).map_err(|_| {
                StoreError::Corrupt(format!("attribute {name} is not an integer: {text}"))
            }),
            Some(other) => Err(StoreError::Corrupt(format!(
                "attribute {name} is not a number: {other:?}"
            ))),
        }
    }
}

pub(super) fn job_id(text: &str) -> Result<JobId> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("job id {text:?}")))
}

/// A new job's item, active with its first occurrence due, scheduled by the entry `root`, and
/// expiring at `ttl` (seconds) if given.
pub(super) fn new_job_item(job: &NewJob, root: &super::entry::Root, ttl: Option<i64>) -> Item {
    let mut item = job_key(job.id);
    let mut put = |name: &str, value| {
        item.insert(name.to_owned(), value);
    };
    put("id", s(job.id.to_string()));
    put("ns", s(&job.namespace));
    if let Some(key) = &job.key {
        put("key", s(key));
    }
    if let Some(job_type) = &job.spec.job_type {
        put("jtype", s(job_type));
    }
    if let Some(queue) = job.spec.target.queue() {
        put("queue", s(queue));
    }
    put("st", n(state_code(JobState::Active)));
    put("spec", s(encode_spec(&job.spec)));
    match &job.payload {
        // Written beside the job item, as version 0 (the job's first token).
        Some(payload) if super::payload::lives_out(payload) => put(super::payload::VERSION, n(0)),
        Some(payload) => put("payload", s(payload)),
        None => {}
    }
    put("fp", n(job.fingerprint));
    put("due", n(job.first_due.as_millisecond()));
    put("fire", n(job.first_fire().as_millisecond()));
    for counter in ["att", "runs", "skip", "tok"] {
        put(counter, n(0));
    }
    put("cr", n(job.now.as_millisecond()));
    put("up", n(job.now.as_millisecond()));
    put("epk", s(&root.pk));
    put("ekey", s(&root.key));
    if let Some(ttl) = ttl {
        put("ttl", n(ttl));
    }
    item
}

/// The job record an item holds, as the item alone tells it: a claim's lease lives in the job's
/// entry and a settled delivery in a settlement (`jobs.rs` adds both). A payload that lives in
/// its own item (`payload.rs`) is not read here: the record has none until
/// [`Inner::read_payload`](super::Inner) fills it in.
pub(super) fn job_from_item(item: &Item) -> Result<JobRecord> {
    let state = state_from_code(item.num("st")?)?;
    Ok(JobRecord {
        id: job_id(item.str("id")?)?,
        namespace: item.str("ns")?.to_owned(),
        key: item.opt_str("key")?.map(str::to_owned),
        state,
        spec: decode_spec(item.str("spec")?)?,
        payload: item.opt_str("payload")?.map(str::to_owned),
        next_due: item.opt_num("due")?.map(from_ms),
        next_attempt: match state {
            JobState::Active => item.opt_num("fire")?.map(from_ms),
            _ => None,
        },
        leased_until: None,
        last_error: item.opt_str("lerr")?.map(str::to_owned),
        attempt: item.num("att")? as u32,
        runs: item.num("runs")? as u64,
        skipped: item.num("skip")? as u64,
        created_at: from_ms(item.num("cr")?),
        updated_at: from_ms(item.num("up")?),
        token: hourglass_core::FencingToken::from_i64(super::entry::record_token(item.num("tok")?)),
        last_trigger: match (item.opt_str("tkey")?, item.opt_num("tdue")?) {
            (Some(key), Some(due)) => Some(KeyedTrigger {
                key: key.to_owned(),
                due: from_ms(due),
            }),
            _ => None,
        },
    })
}

pub(super) fn run_from_item(item: &Item) -> Result<RunRecord> {
    Ok(RunRecord {
        cursor: RunCursor {
            started_ms: item.num("started")?,
            seq: item.num("seq")?,
        },
        job_id: job_id(item.str("job")?)?,
        due: from_ms(item.num("due")?),
        attempt: item.num("att")? as u32,
        started_at: from_ms(item.num("started")?),
        latency_ms: item.num("lat")? as u32,
        status: item.opt_num("status")?.map(|s| s as u16),
        error: item.opt_str("err")?.map(str::to_owned),
        response: item.opt_str("resp")?.map(str::to_owned),
        outcome: RunOutcome::from_stored(item.str("outcome")?)?,
    })
}

pub(super) fn letter_from_item(item: &Item) -> Result<DeadLetter> {
    Ok(DeadLetter {
        id: item.num("id")?,
        namespace: item.str("ns")?.to_owned(),
        job_id: job_id(item.str("job")?)?,
        due: from_ms(item.num("due")?),
        attempts: item.num("atts")? as u32,
        reason: item.str("reason")?.to_owned(),
        spec: decode_spec(item.str("spec")?)?,
        payload: item.opt_str("payload")?.map(str::to_owned),
        created_at: from_ms(item.num("cr")?),
    })
}

/// An SDK failure as the store reports it: the service's code and message, or why the request
/// did not get an answer.
pub(super) fn unavailable<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Unavailable(format!("dynamodb: {}", DisplayErrorContext(&e)))
}

/// Whether a failed conditional write failed on its condition (a fence, a key taken), which is
/// an answer, not an outage.
pub(super) fn condition_failed<E, R>(e: &SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    e.as_service_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "ConditionalCheckFailedException")
}

/// For a cancelled transaction: which of its actions failed their condition.
pub(super) fn cancelled_on_condition(
    e: &SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError>,
) -> Option<Vec<bool>> {
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancel)) => Some(
            cancel
                .cancellation_reasons()
                .iter()
                .map(|r| r.code() == Some("ConditionalCheckFailed"))
                .collect(),
        ),
        _ => None,
    }
}
