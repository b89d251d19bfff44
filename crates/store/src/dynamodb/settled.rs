//! Settlements' records: what a settlement item holds for each one-off it settles (its job at
//! the claimed version, the state it ends in, its counters and its run), packed ([`RECORDS`]:
//! about 6 bytes a delivered job, 25 with its run; older settlements hold postcard or JSON,
//! still read), and how readers find them: a root's settlements are one partition
//! (`Root::settlements`).

use hourglass_core::{JobId, from_ms};
use serde::{Deserialize, Serialize};

use super::Inner;
use super::entry::{LEASE_BITS, Root};
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

/// The attribute of a settlement's records, packed (`ids.rs`): in id order, each id sharing its
/// leading bytes with the one before, its head flagging a run that follows and a record whose
/// other fields are the record before's (a settlement's records are one call's deliveries from
/// one lease: the same version, lease, state, counters and time); the first time in full, the
/// others as varint offsets. About 6 bytes a delivered job without its run, 25 with it.
pub(super) const RECORDS: &str = "recp";
/// The attributes of records written before: postcard (about 33 bytes a job without its run, 60
/// with it), and JSON before that; both still read.
const POSTCARD_RECORDS: &str = "recb";
const JSON_RECORDS: &str = "recs";

/// Head flags of a packed record: a run follows; its other fields are the record before's.
const RUN: u8 = 0x80;
const SAME: u8 = 0x40;

/// A record's fields besides its id and run, its token as the lease counter it holds.
fn shared_fields(r: &Settled) -> (i64, i64, i64, u64, u64, Option<u32>, i64) {
    let ltok = r.tok.wrapping_sub(r.v.wrapping_shl(LEASE_BITS));
    (r.v, ltok, r.fin, r.ran, r.skip, r.att, r.up)
}

pub(super) fn pack(records: &[Settled]) -> aws_sdk_dynamodb::types::AttributeValue {
    let mut sorted: Vec<&Settled> = records.iter().collect();
    sorted.sort_by_key(|r| r.id);
    let base = sorted.first().map_or(0, |r| r.up);
    let mut writer = super::ids::Writer::with_capacity(sorted.len());
    writer.unsigned(sorted.len() as u64);
    writer.signed(base);
    let mut before: Option<&Settled> = None;
    for record in sorted {
        let same = before.is_some_and(|b| shared_fields(b) == shared_fields(record));
        let flags = if record.run.is_some() { RUN } else { 0 } | if same { SAME } else { 0 };
        writer.id(record.id, flags);
        if !same {
            writer.signed(record.v);
            writer.signed(record.tok.wrapping_sub(record.v.wrapping_shl(LEASE_BITS)));
            writer.signed(record.fin);
            writer.unsigned(record.ran);
            writer.unsigned(record.skip);
            writer.unsigned(record.att.map_or(0, |a| u64::from(a) + 1));
            writer.signed(record.up.wrapping_sub(base));
        }
        if let Some(run) = &record.run {
            writer.signed(run.due.wrapping_sub(record.up));
            writer.unsigned(u64::from(run.att));
            writer.signed(run.started.wrapping_sub(run.due));
            writer.unsigned(u64::from(run.lat));
            writer.unsigned(run.status.map_or(0, |s| u64::from(s) + 1));
            writer.text(run.err.as_deref());
            writer.text(run.resp.as_deref());
            writer.text(Some(&run.out));
        }
        before = Some(record);
    }
    aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
        writer.bytes,
    ))
}

fn unpack_packed(bytes: &[u8]) -> Result<Vec<Settled>> {
    let mut reader = super::ids::Reader::new(bytes, "settlement records");
    let corrupt = || StoreError::Corrupt("settlement records malformed".into());
    let number = |value: u64| u32::try_from(value).map_err(|_| corrupt());
    let count = reader.unsigned()?;
    let base = reader.signed()?;
    let mut out: Vec<Settled> = Vec::new();
    while !reader.done() {
        let (id, flags) = reader.id()?;
        if flags & !(RUN | SAME) != 0 {
            return Err(corrupt());
        }
        let mut record = if flags & SAME != 0 {
            let before = out.last().ok_or_else(corrupt)?;
            Settled {
                id,
                run: None,
                ..before.clone()
            }
        } else {
            let v = reader.signed()?;
            Settled {
                id,
                v,
                tok: reader.signed()?.wrapping_add(v.wrapping_shl(LEASE_BITS)),
                fin: reader.signed()?,
                ran: reader.unsigned()?,
                skip: reader.unsigned()?,
                att: match reader.unsigned()? {
                    0 => None,
                    att => Some(number(att - 1)?),
                },
                up: reader.signed()?.wrapping_add(base),
                run: None,
            }
        };
        if flags & RUN != 0 {
            let due = reader.signed()?.wrapping_add(record.up);
            record.run = Some(SettledRun {
                due,
                att: number(reader.unsigned()?)?,
                started: reader.signed()?.wrapping_add(due),
                lat: number(reader.unsigned()?)?,
                status: match reader.unsigned()? {
                    0 => None,
                    status => Some(u16::try_from(status - 1).map_err(|_| corrupt())?),
                },
                err: reader.text()?,
                resp: reader.text()?,
                out: reader.text()?.ok_or_else(corrupt)?,
            });
        }
        out.push(record);
    }
    if out.len() as u64 != count {
        return Err(corrupt());
    }
    Ok(out)
}

fn unpack(item: &Item) -> Result<Vec<Settled>> {
    let corrupt =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("settlement records: {e}"));
    match (item.get(RECORDS), item.get(POSTCARD_RECORDS)) {
        (Some(aws_sdk_dynamodb::types::AttributeValue::B(blob)), _) => unpack_packed(blob.as_ref()),
        (None, Some(aws_sdk_dynamodb::types::AttributeValue::B(blob))) => {
            postcard::from_bytes(blob.as_ref()).map_err(|e| corrupt(&e))
        }
        (Some(other), _) | (None, Some(other)) => Err(corrupt(&format!("{other:?}"))),
        (None, None) => serde_json::from_str(item.str(JSON_RECORDS)?).map_err(|e| corrupt(&e)),
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
    fn packed_records_read_back_in_a_fraction_of_the_older_forms() {
        // A settlement's records: one call's, all recorded at once.
        let with_runs: Vec<Settled> = (0..100)
            .map(|i| Settled {
                up: 1_795_857_101_000,
                ..delivered(i)
            })
            .collect();
        let mut without: Vec<Settled> = (0..100)
            .map(|_| Settled {
                run: None,
                up: 1_795_857_101_000,
                ..delivered(0)
            })
            .collect();
        // One unlike the others: another version, a failure's texts.
        without[7].v = 3;
        without[7].tok = (3 << 20) | 3;
        let mut odd = delivered(5);
        odd.run.as_mut().unwrap().err = Some("connection refused".into());
        odd.run.as_mut().unwrap().status = None;
        odd.att = None;
        without.push(odd);
        for (records, per_job) in [(&with_runs, 32), (&without, 8)] {
            let packed = pack(records);
            let packed_len = packed.as_b().unwrap().as_ref().len();
            let postcard_len = postcard::to_allocvec(records).unwrap().len();
            assert!(
                packed_len <= per_job * records.len() + 64 && packed_len * 2 < postcard_len,
                "packed {packed_len} bytes, postcard {postcard_len}"
            );
            let mut sorted = records.clone();
            sorted.sort_by_key(|r| r.id);
            let json = serde_json::to_string(&sorted).unwrap();
            let back = unpack(&item_with(RECORDS, packed.clone())).unwrap();
            assert_eq!(
                serde_json::to_string(&back).unwrap(),
                json,
                "every field read back"
            );
            // Records written before, as postcard or JSON, still read.
            let older = aws_sdk_dynamodb::types::AttributeValue::B(
                aws_sdk_dynamodb::primitives::Blob::new(postcard::to_allocvec(&sorted).unwrap()),
            );
            let old = unpack(&item_with(POSTCARD_RECORDS, older)).unwrap();
            assert_eq!(serde_json::to_string(&old).unwrap(), json);
            let old = unpack(&item_with(JSON_RECORDS, s(json.clone()))).unwrap();
            assert_eq!(serde_json::to_string(&old).unwrap(), json);
            // A settlement whose bytes are cut anywhere is refused as corrupt, not misread.
            let bytes = packed.as_b().unwrap().as_ref();
            for cut in (0..bytes.len()).step_by(7) {
                let cut = aws_sdk_dynamodb::types::AttributeValue::B(
                    aws_sdk_dynamodb::primitives::Blob::new(bytes[..cut].to_vec()),
                );
                assert!(matches!(
                    unpack(&item_with(RECORDS, cut)),
                    Err(StoreError::Corrupt(_))
                ));
            }
        }
    }
}
