//! Settlements' records: what a settlement item holds for each one-off it settles (its job at
//! the claimed version, the state it ends in, its counters and its run), packed with postcard
//! (varints, no field names: about 60 bytes a delivered job with its run, a third of the same
//! record in JSON, which older settlements hold and which is still read), and how readers find
//! them: a root's settlements are one partition (`Root::settlements`).

use hourglass_core::{JobId, from_ms};
use serde::{Deserialize, Serialize};

use super::Inner;
use super::entry::Root;
use super::item::{Attrs, Item};
use super::table::Query;
use crate::rules::state_from_code;
use crate::{JobRecord, Result, RunCursor, RunOutcome, RunRecord, StoreError};

/// One job's completion as a settlement records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Settled {
    pub(super) id: JobId,
    /// The job's version when claimed.
    pub(super) v: i64,
    /// The claim's token.
    pub(super) tok: i64,
    /// The state the job ends in.
    pub(super) fin: i64,
    pub(super) ran: u64,
    pub(super) skip: u64,
    #[serde(default)]
    pub(super) att: Option<u32>,
    /// When it was recorded.
    pub(super) up: i64,
    #[serde(default)]
    pub(super) run: Option<SettledRun>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SettledRun {
    pub(super) due: i64,
    pub(super) att: u32,
    pub(super) started: i64,
    pub(super) lat: u32,
    #[serde(default)]
    pub(super) status: Option<u16>,
    #[serde(default)]
    pub(super) err: Option<String>,
    #[serde(default)]
    pub(super) resp: Option<String>,
    pub(super) out: String,
}

impl Settled {
    /// The job as this record leaves it.
    pub(super) fn apply(&self, record: &mut JobRecord) {
        if let Ok(state) = state_from_code(self.fin) {
            record.state = state;
        }
        record.runs += self.ran;
        record.skipped += self.skip;
        if let Some(att) = self.att {
            record.attempt = att;
        }
        record.next_attempt = None;
        record.leased_until = None;
        record.last_error = None;
        record.updated_at = from_ms(self.up);
        record.token = hourglass_core::FencingToken::from_i64(self.tok + 1);
    }

    fn run_record(&self) -> Option<Result<RunRecord>> {
        let run = self.run.as_ref()?;
        let outcome = match RunOutcome::from_stored(&run.out) {
            Ok(outcome) => outcome,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(RunRecord {
            cursor: RunCursor {
                started_ms: run.started,
                seq: self.tok + 1,
            },
            job_id: self.id,
            due: from_ms(run.due),
            attempt: run.att,
            started_at: from_ms(run.started),
            latency_ms: run.lat,
            status: run.status,
            error: run.err.clone(),
            response: run.resp.clone(),
            outcome,
        }))
    }
}

/// The attribute of a settlement's records, packed (postcard: varints, no field names; about 60
/// bytes a delivered job, a third of the same record in JSON).
pub(super) const RECORDS: &str = "recb";
/// The attribute of records written as JSON, still read.
const JSON_RECORDS: &str = "recs";

pub(super) fn pack(records: &[Settled]) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
        postcard::to_allocvec(records).expect("records serialize"),
    ))
}

fn unpack(item: &Item) -> Result<Vec<Settled>> {
    let corrupt =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("settlement records: {e}"));
    match item.get(RECORDS) {
        Some(aws_sdk_dynamodb::types::AttributeValue::B(blob)) => {
            postcard::from_bytes(blob.as_ref()).map_err(|e| corrupt(&e))
        }
        Some(other) => Err(corrupt(&format!("{other:?}"))),
        None => serde_json::from_str(item.str(JSON_RECORDS)?).map_err(|e| corrupt(&e)),
    }
}

/// Every record of a root's settlements.
async fn records(inner: &Inner, root: &Root) -> Result<Vec<Settled>> {
    let mut out = Vec::new();
    for item in inner.query(&Query::new(root.settlements())).await? {
        out.extend(unpack(&item)?);
    }
    Ok(out)
}

/// The settled completion of job `id` at `version` under `root`, if there is one.
pub(super) async fn settled(
    inner: &Inner,
    root: &Root,
    id: JobId,
    version: i64,
) -> Result<Option<Settled>> {
    Ok(records(inner, root)
        .await?
        .into_iter()
        .find(|r| r.id == id && r.v == version))
}

/// The run a settlement recorded for job `id` at `version`, if any.
pub(super) async fn settled_run(
    inner: &Inner,
    root: &Root,
    id: JobId,
    version: i64,
) -> Result<Option<RunRecord>> {
    settled(inner, root, id, version)
        .await?
        .and_then(|r| r.run_record())
        .transpose()
}

/// The (job, version) pairs a root's settlements hold: what a new lease of its entry skips.
pub(super) async fn settled_jobs(
    inner: &Inner,
    root: &Root,
) -> Result<std::collections::HashSet<(JobId, i64)>> {
    Ok(records(inner, root)
        .await?
        .into_iter()
        .map(|r| (r.id, r.v))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::item::s;
    use super::*;

    fn delivered(i: u64) -> Settled {
        Settled {
            id: uuid::Uuid::now_v7(),
            v: 1,
            tok: (1 << 20) | 3,
            fin: 3,
            ran: 1,
            skip: 0,
            att: Some(1),
            up: 1_795_857_101_000 + i as i64,
            run: Some(SettledRun {
                due: 1_795_857_100_000,
                att: 1,
                started: 1_795_857_100_002,
                lat: 3,
                status: Some(200),
                err: None,
                resp: Some("ok".into()),
                out: "delivered".into(),
            }),
        }
    }

    fn item_with(attr: &str, value: aws_sdk_dynamodb::types::AttributeValue) -> Item {
        let mut item = Item::new();
        item.insert(attr.into(), value);
        item
    }

    #[test]
    fn packed_records_read_back_and_are_a_third_of_json() {
        let records: Vec<Settled> = (0..100).map(delivered).collect();
        let packed = pack(&records);
        let json = serde_json::to_string(&records).unwrap();
        let packed_len = packed.as_b().unwrap().as_ref().len();
        assert!(
            packed_len * 3 < json.len(),
            "packed {packed_len} bytes, JSON {}",
            json.len()
        );
        let back = unpack(&item_with(RECORDS, packed)).unwrap();
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            json,
            "every field read back"
        );
        // Records written as JSON still read.
        let old = unpack(&item_with(JSON_RECORDS, s(json.clone()))).unwrap();
        assert_eq!(serde_json::to_string(&old).unwrap(), json);
        // A settlement whose bytes are cut is refused as corrupt, not misread.
        let cut =
            aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                pack(&records).as_b().unwrap().as_ref()[..packed_len / 2].to_vec(),
            ));
        assert!(matches!(
            unpack(&item_with(RECORDS, cut)),
            Err(StoreError::Corrupt(_))
        ));
    }
}
