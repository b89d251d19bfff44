//! Claims and what ends them without a completion: taking due occurrences under a lease (for a
//! queue, lapsed leases from the lease schedule first), extending and releasing claims, and the
//! next due time a planner or a queue consumer waits for.

use std::sync::{Arc, Mutex, OnceLock};

use hourglass_core::{Claim, FencingToken, JobId, Occurrence, from_ms};
use jiff::Timestamp;
use rusqlite::{Connection, Row, params};

use super::SqliteStore;
use super::codec::{SpecCache, column_bytes, corrupt, id_from_blob, payload_column, unavailable};
use super::jobs::find_queue_key;
use super::leases::{Entry, FIRED, LeaseSchedule};
use crate::{Applied, ClaimScope, Lease, Release, Result};

/// A claim scope in owned form, so it can travel to the writer thread.
pub(super) enum Scope {
    Fired,
    Queue {
        namespace: String,
        queue: String,
        types: Option<Vec<String>>,
        max_bytes: Option<usize>,
    },
}

impl Scope {
    pub(super) fn from(scope: ClaimScope<'_>) -> Self {
        match scope {
            ClaimScope::Fired => Scope::Fired,
            ClaimScope::Queue {
                namespace,
                queue,
                types,
                max_bytes,
            } => Scope::Queue {
                namespace: namespace.to_owned(),
                queue: queue.to_owned(),
                types: types.map(<[String]>::to_vec),
                max_bytes,
            },
        }
    }
}

/// The occurrence's own fire time is `fire_ms` when unclaimed. A row still marked as leased is
/// being claimed again because that lease lapsed: its `fire_ms` is the lapsed lease's expiry, and
/// its fire time is the one the first claim kept in `lease_fire_ms` (which may still lie ahead,
/// if the lease was shorter than the claimer's lookahead).
macro_rules! own_fire_ms {
    () => {
        "CASE WHEN lease_owner IS NULL THEN fire_ms ELSE COALESCE(lease_fire_ms, fire_ms) END"
    };
}
const OWN_FIRE_MS: &str = own_fire_ms!();

/// What a claim reads: the occurrence's own fire time is the sixth column; the row number, by
/// which the claim then updates the row without another lookup by id, the eleventh.
const CLAIM_COLUMNS: &str = concat!(
    "id, namespace, spec, ",
    payload_column!(),
    ", due_ms, ",
    own_fire_ms!(),
    ", attempt, lease_token, runs, lease_owner, seq"
);

/// A claimed row as the writer read it. Its spec is decoded by the caller, off the writer thread,
/// which every write waits for.
struct Claimed {
    job_id: JobId,
    namespace: String,
    spec: Vec<u8>,
    /// Read straight into what the occurrence holds: a large payload is copied once.
    payload: Option<Arc<str>>,
    due_ms: i64,
    fire_ms: i64,
    attempt: u32,
    token: i64,
    runs: u64,
    /// The row's number, recorded in the lease schedule for the claim's completion.
    seq: i64,
    /// The owner of the lease that lapsed, when the row was still marked as leased.
    previous_owner: Option<String>,
}

impl Claimed {
    /// The occurrence handed out under a lease of `owner`.
    fn into_occurrence(self, specs: &SpecCache, owner: &str) -> Result<Occurrence> {
        Ok(Occurrence {
            job_id: self.job_id,
            namespace: self.namespace.into(),
            due: from_ms(self.due_ms),
            fire_at: from_ms(self.fire_ms),
            attempt: self.attempt,
            token: FencingToken::from_i64(self.token),
            runs_done: self.runs,
            spec: specs.decode(&self.spec)?,
            payload: self.payload,
            lapsed_owner: self
                .previous_owner
                .filter(|previous| previous != owner)
                .map(Arc::from),
        })
    }
}

fn claim_rows(
    conn: &Connection,
    scope: &Scope,
    horizon: i64,
    limit: usize,
    lease: &Lease,
    leases: &LeaseSchedule,
    taken: &mut Vec<(JobId, Entry)>,
) -> Result<Vec<Claimed>> {
    let now = lease.now.as_millisecond();
    let lease_until = now.saturating_add(hourglass_core::duration_ms(lease.ttl));
    let is_queue = matches!(scope, Scope::Queue { .. });
    let mut claimed = Vec::new();
    // Per claimed row: whether an earlier lease of it lapsed, and its row number.
    let mut rows_to_claim = Vec::new();
    let max_bytes = match scope {
        Scope::Queue { max_bytes, .. } => *max_bytes,
        Scope::Fired => None,
    };
    let mut picked = Picked {
        is_queue,
        max_bytes,
        bytes: 0,
        claimed: &mut claimed,
        rows: &mut rows_to_claim,
        taken,
    };
    // Lapsed leases first (the schedule's entries due now), then unleased rows by fire time.
    let schedule_key = match scope {
        Scope::Fired => {
            take_lapsed(conn, Kind::Fired, None, now, limit, leases, &mut picked)?;
            claim_unleased(conn, Kind::Fired, None, horizon, limit, &mut picked)?;
            FIRED
        }
        Scope::Queue {
            namespace,
            queue,
            types,
            ..
        } => {
            let Some(key) = find_queue_key(conn, namespace, queue)? else {
                return Ok(Vec::new());
            };
            let types = types.as_deref();
            take_lapsed(
                conn,
                Kind::Queue(key),
                types,
                now,
                limit,
                leases,
                &mut picked,
            )?;
            claim_unleased(conn, Kind::Queue(key), types, horizon, limit, &mut picked)?;
            key
        }
    };
    // Rows are updated a chunk a statement: a statement of its own per row opened its cursors
    // and reset once a row, about a sixth of the row's update. A queue message whose lease ran
    // out unacked spent an attempt (`read_claimed` counts it), so those go in chunks of their
    // own; a fired claim that lapsed (its node stopped before delivering) did not.
    for spent in [false, true] {
        let seqs: Vec<i64> = rows_to_claim
            .iter()
            .filter(|&&(lapsed, _)| (is_queue && lapsed) == spent)
            .map(|&(_, seq)| seq)
            .collect();
        for (size, chunk) in chunks(&seqs) {
            let mut update = conn
                .prepare_cached(claim_update_sql(size))
                .map_err(unavailable)?;
            let mut params: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(chunk.len() + 3);
            let spent = spent as i64;
            params.push(&lease_until);
            params.push(&lease.owner);
            params.push(&spent);
            params.extend(chunk.iter().map(|s| s as &dyn rusqlite::ToSql));
            update.execute(params.as_slice()).map_err(unavailable)?;
        }
    }
    leases.add_all(claimed.iter().zip(rows_to_claim).map(|(c, (lapsed, seq))| {
        // A lapsed lease taken again is looked at once more right away: should this transaction
        // not commit, the row keeps the lapsed lease, and its entry must not wait for the new
        // expiry. The look finds the new lease and moves the entry to its expiry.
        let check_at = if lapsed { now } else { lease_until };
        let entry = Entry {
            seq,
            queue_key: schedule_key,
            token: c.token,
            check_at,
        };
        (c.job_id, entry)
    }));
    Ok(claimed)
}

/// The chunk sizes claims update rows in: few distinct statements for the statement cache.
const CHUNKS: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

/// `seqs` cut into chunks of the sizes in [`CHUNKS`], largest first, each with its size's index.
fn chunks(seqs: &[i64]) -> impl Iterator<Item = (usize, &[i64])> {
    let mut rest = seqs;
    std::iter::from_fn(move || {
        let size = CHUNKS.iter().position(|&c| c <= rest.len())?;
        let (chunk, tail) = rest.split_at(CHUNKS[size]);
        rest = tail;
        Some((size, chunk))
    })
}

/// The update that leases a chunk of `CHUNKS[size]` rows, numbered from `?4`: the lease expiry
/// `?1`, owner `?2`, and attempts spent `?3`. Built once a size.
///
/// `OR FAIL`: a statement that writes several rows and may abort half-way makes SQLite copy each
/// page it touches to a statement journal first, to undo its own rows. Nothing here can abort
/// (the only constraints are NOT NULLs of sums), and if anything did, the error fails the whole
/// write request, whose savepoint the writer rolls back (`writer.rs`).
fn claim_update_sql(size: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        CHUNKS
            .iter()
            .map(|&n| {
                let seqs: Vec<String> = (4..4 + n).map(|i| format!("?{i}")).collect();
                let seqs = seqs.join(",");
                format!(
                    "UPDATE OR FAIL jobs SET fire_ms = ?1, lease_fire_ms = {OWN_FIRE_MS}, lease_owner = ?2,
                                     lease_token = lease_token + 1, attempt = attempt + ?3
                     WHERE seq IN ({seqs})"
                )
            })
            .collect()
    });
    &all[size]
}

/// Which rows a claim takes: a queue's messages, or occurrences the engine fires.
#[derive(Clone, Copy)]
enum Kind {
    Queue(i64),
    Fired,
}

/// What a claim has picked so far: the messages, and per message whether an earlier lease of it
/// lapsed and its row number; and the entries it took from the lease schedule, to be put back if
/// the claim fails.
struct Picked<'a> {
    is_queue: bool,
    /// The claim's budget of payload bytes, and what it took so far.
    max_bytes: Option<usize>,
    bytes: usize,
    claimed: &'a mut Vec<Claimed>,
    rows: &'a mut Vec<(bool, i64)>,
    taken: &'a mut Vec<(JobId, Entry)>,
}

impl Picked<'_> {
    fn push(&mut self, row: &Row<'_>) -> Result<()> {
        let (c, lapsed) = read_claimed(row, self.is_queue)?;
        self.bytes += c.payload.as_deref().map_or(0, str::len);
        self.rows.push((lapsed, c.seq));
        self.claimed.push(c);
        Ok(())
    }

    /// Whether the claim has all it may take: `limit` rows, or its budget of payload bytes.
    fn full(&self, limit: usize) -> bool {
        self.claimed.len() >= limit || !crate::under_byte_budget(self.max_bytes, self.bytes)
    }
}

/// Reads a row of `CLAIM_COLUMNS` into the message a claim hands out (with its row number), and
/// whether an earlier lease of it lapsed.
fn read_claimed(row: &Row<'_>, is_queue: bool) -> Result<(Claimed, bool)> {
    let mut attempt: u32 = row.get(6).map_err(corrupt)?;
    let token: i64 = row.get(7).map_err(corrupt)?;
    let runs: i64 = row.get(8).map_err(corrupt)?;
    // A row still marked as leased is claimed again because its lease ran out. For a queue
    // message that lease (unacked) was a failed attempt.
    let previous_owner = row.get::<_, Option<String>>(9).map_err(corrupt)?;
    let lapsed = previous_owner.is_some();
    if lapsed && is_queue {
        attempt += 1;
    }
    let claimed = Claimed {
        job_id: id_from_blob(row.get(0).map_err(corrupt)?)?,
        namespace: row.get(1).map_err(corrupt)?,
        spec: column_bytes(row, 2)?.to_vec(),
        payload: row
            .get_ref(3)
            .and_then(|v| Ok(v.as_str_or_null()?))
            .map_err(corrupt)?
            .map(Arc::from),
        due_ms: row.get(4).map_err(corrupt)?,
        fire_ms: row.get(5).map_err(corrupt)?,
        attempt: attempt + 1,
        token: token + 1,
        runs: runs as u64,
        seq: row.get(10).map_err(corrupt)?,
        previous_owner,
    };
    Ok((claimed, lapsed))
}

/// Takes the lapsed leases of `kind`, earliest expiry first, up to `limit`, looking at each
/// row: an entry whose lease has ended is dropped, one whose lease was extended goes back at its
/// new expiry, and one of a type this claim does not take stays for another claim.
fn take_lapsed(
    conn: &Connection,
    kind: Kind,
    types: Option<&[String]>,
    now: i64,
    limit: usize,
    leases: &LeaseSchedule,
    picked: &mut Picked<'_>,
) -> Result<()> {
    let mut kept = Vec::new();
    // The row must still be of the entry's kind: an entry outlives an edit that moved its job
    // to another queue, or between a queue and a fired target, whose new lease is not this
    // one's to take.
    // Both looks take the same three parameters; a fired row has no queue key, bound as NULL.
    let (schedule_key, bound_key, kind_filter) = match kind {
        Kind::Queue(key) => (key, Some(key), "queue_key = ?3"),
        Kind::Fired => (FIRED, None, "queue IS NULL AND ?3 IS NULL"),
    };
    let mut look = conn
        .prepare_cached(&format!(
            "SELECT {CLAIM_COLUMNS}, job_type, fire_ms FROM jobs
             WHERE seq = ?1 AND id = ?2 AND state = 0 AND lease_owner IS NOT NULL
               AND {kind_filter}"
        ))
        .map_err(unavailable)?;
    while !picked.full(limit) {
        let Some((job, entry)) = leases.pop_due(schedule_key, now) else {
            break;
        };
        picked.taken.push((job, entry));
        let mut rows = look
            .query(params![entry.seq, job.as_bytes().as_slice(), bound_key])
            .map_err(unavailable)?;
        let Some(row) = rows.next().map_err(unavailable)? else {
            continue;
        };
        let token: i64 = row.get(7).map_err(corrupt)?;
        let expiry: i64 = row.get(12).map_err(corrupt)?;
        if expiry > now {
            kept.push((
                job,
                Entry {
                    token,
                    check_at: expiry,
                    ..entry
                },
            ));
            continue;
        }
        if let Some(types) = types {
            let job_type: Option<String> = row.get(11).map_err(corrupt)?;
            if !job_type.is_some_and(|t| types.contains(&t)) {
                kept.push((job, Entry { token, ..entry }));
                continue;
            }
        }
        picked.push(row)?;
    }
    for (job, entry) in kept {
        leases.add(job, entry);
    }
    Ok(())
}

/// Fills the claim up to `limit` with unleased rows of `kind` due by `horizon`, in due order.
fn claim_unleased(
    conn: &Connection,
    kind: Kind,
    types: Option<&[String]>,
    horizon: i64,
    limit: usize,
    picked: &mut Picked<'_>,
) -> Result<()> {
    if picked.full(limit) {
        return Ok(());
    }
    let left = (limit - picked.claimed.len()) as i64;
    // `lease_owner IS NULL` lets SQLite use the partial due indexes.
    let mut rows_of = |mut select: rusqlite::CachedStatement<'_>,
                       params: &[&dyn rusqlite::ToSql]|
     -> Result<()> {
        let mut rows = select.query(params).map_err(unavailable)?;
        // Rows read past the byte budget are left as they are: only picked rows are updated.
        while let Some(row) = rows.next().map_err(unavailable)? {
            picked.push(row)?;
            if picked.full(limit) {
                break;
            }
        }
        Ok(())
    };
    match kind {
        Kind::Fired => rows_of(
            conn.prepare_cached(&format!(
                "SELECT {CLAIM_COLUMNS} FROM jobs
                 WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL AND fire_ms <= ?1
                 ORDER BY fire_ms LIMIT ?2"
            ))
            .map_err(unavailable)?,
            params![horizon, left],
        ),
        Kind::Queue(queue_key) => {
            // Types filter: a JSON array checked with json_each, so one cached statement serves
            // every filter.
            let types = types.map(|t| serde_json::to_string(t).expect("strings encode"));
            rows_of(
                conn.prepare_cached(&format!(
                    "SELECT {CLAIM_COLUMNS} FROM jobs
                     WHERE state = 0 AND queue_key = ?3 AND lease_owner IS NULL AND fire_ms <= ?1
                       AND (?4 IS NULL OR job_type IN (SELECT value FROM json_each(?4)))
                     ORDER BY fire_ms LIMIT ?2"
                ))
                .map_err(unavailable)?,
                params![horizon, left, queue_key, types],
            )
        }
    }
}

impl SqliteStore {
    /// [`Store::claim_due`]: claims in the writer, and puts back the lease schedule's entries
    /// the claim took when it or its group commit fails.
    pub(super) async fn claim(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        let owner = lease.owner.clone();
        let lease = lease.clone();
        let horizon = horizon.as_millisecond();
        let scope = Scope::from(scope);
        let leases = self.leases.clone();
        let popped = Arc::new(Mutex::new(Vec::new()));
        let record = popped.clone();
        let claimed = self
            .write(move |conn| {
                let mut taken = Vec::new();
                let claimed = claim_rows(conn, &scope, horizon, limit, &lease, &leases, &mut taken);
                *record.lock().expect("popped entries poisoned") = taken;
                claimed
            })
            .await;
        if claimed.is_err() {
            // The claim (its savepoint rolled back), or its group's commit, failed. Each entry it
            // took from the schedule is still a lease's, or was judged against its row as the
            // transaction saw it, which may include an earlier request of the group that is now
            // rolled back: an ack (the entry was dropped) or a new lease (the entry went back at
            // that lease's expiry). Each goes back as it was, due for a look now, which settles
            // it against the row again. Without this, a failed commit could leave a leased
            // message with no entry, never to be available again until a restart.
            let popped = std::mem::take(&mut *popped.lock().expect("popped entries poisoned"));
            self.leases.add_all(popped);
        }
        claimed?
            .into_iter()
            .map(|c| c.into_occurrence(&self.specs, &owner))
            .collect()
    }
}

/// Moves the lease expiry of claims that still hold their token.
pub(super) fn extend_in_tx(
    conn: &Connection,
    leases: &LeaseSchedule,
    claims: Vec<Claim>,
    until: i64,
    now: i64,
) -> Result<Vec<Applied>> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE jobs SET fire_ms = ?3, updated_ms = ?4
             WHERE id = ?1 AND lease_token = ?2 AND state = 0 AND lease_owner IS NOT NULL",
        )
        .map_err(unavailable)?;
    claims
        .into_iter()
        .map(|Claim { job_id: id, token }| {
            let token = token.as_i64();
            let changed = stmt
                .execute(params![id.as_bytes().as_slice(), token, until, now])
                .map_err(unavailable)?;
            if changed == 0 {
                return Ok(Applied::StaleLease);
            }
            // A shorter extension must be looked at by its own expiry; a longer one is
            // put back at its expiry when the schedule's earlier look finds it.
            leases.check_by(id, token, until);
            Ok(Applied::Yes)
        })
        .collect()
}

/// Hands claims back unfired, restoring their fire time.
pub(super) fn release_in_tx(conn: &Connection, claims: Vec<Release>) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE jobs SET fire_ms = ?3, lease_owner = NULL, lease_fire_ms = NULL
             WHERE id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    for c in claims {
        stmt.execute(params![
            c.job_id.as_bytes().as_slice(),
            c.token.as_i64(),
            c.fire_at.as_millisecond()
        ])
        .map_err(unavailable)?;
    }
    Ok(())
}

/// The check time of the first fired claim's entry that still belongs to a live lease, if it
/// comes before `unclaimed`. Entries left by edits of claimed jobs (a pause, a cancel, an update)
/// stay until a claim looks at them; they must not make a next due time. Run after the query
/// that gave `unclaimed`, so a claim committed in between is seen by one or the other.
fn first_live_check(
    conn: &Connection,
    leases: &LeaseSchedule,
    unclaimed: Option<i64>,
) -> Result<Option<i64>> {
    let mut look = conn
        .prepare_cached(
            "SELECT 1 FROM jobs
             WHERE seq = ?1 AND id = ?2 AND lease_token = ?3 AND state = 0
               AND lease_owner IS NOT NULL AND queue IS NULL",
        )
        .map_err(unavailable)?;
    let mut after = None;
    while let Some((job, entry)) = leases.entry_after(FIRED, after) {
        if unclaimed.is_some_and(|u| u <= entry.check_at) {
            return Ok(None);
        }
        let live = look
            .exists(params![entry.seq, job.as_bytes().as_slice(), entry.token])
            .map_err(unavailable)?;
        if live {
            return Ok(Some(entry.check_at));
        }
        after = Some((entry.check_at, job.as_u128()));
    }
    Ok(None)
}

pub(super) fn next_due(
    conn: &Connection,
    leases: &LeaseSchedule,
    scope: &Scope,
) -> Result<Option<Timestamp>> {
    let min: Option<i64> = match scope {
        Scope::Fired => {
            let unclaimed: Option<i64> = conn
                .prepare_cached(
                    "SELECT MIN(fire_ms) FROM jobs
                     WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL",
                )
                .map_err(unavailable)?
                .query_row([], |r| r.get(0))
                .map_err(unavailable)?;
            // Claimed rows are not in the due index: the schedule says when the first of their
            // leases may run out.
            Ok(unclaimed
                .into_iter()
                .chain(first_live_check(conn, leases, unclaimed)?)
                .min())
        }
        Scope::Queue {
            namespace, queue, ..
        } => match find_queue_key(conn, namespace, queue)? {
            None => Ok(None),
            Some(key) => conn
                .prepare_cached(
                    "SELECT MIN(fire_ms) FROM jobs
                     WHERE state = 0 AND queue_key = ?1 AND lease_owner IS NULL",
                )
                .map_err(unavailable)?
                .query_row([key], |r| r.get::<_, Option<i64>>(0))
                // Leased messages are not in the due index: the schedule says when the
                // first of their leases may run out.
                .map(|unleased| unleased.into_iter().chain(leases.next_check(key)).min()),
        },
    }
    .map_err(unavailable)?;
    Ok(min.map(from_ms))
}

#[cfg(test)]
mod tests {
    use super::{CHUNKS, chunks};

    #[test]
    fn chunks_cover_every_row_once_in_order_at_known_sizes() {
        for n in [0, 1, 2, 63, 64, 65, 130, 1000] {
            let seqs: Vec<i64> = (0..n).collect();
            let cut: Vec<_> = chunks(&seqs).collect();
            assert!(
                cut.iter().all(|(size, c)| CHUNKS[*size] == c.len()),
                "{n}: every chunk has its size"
            );
            let joined: Vec<i64> = cut.iter().flat_map(|(_, c)| c.iter().copied()).collect();
            assert_eq!(joined, seqs, "{n}: every row once, in order");
            assert!(
                cut.len() <= n as usize / 64 + CHUNKS.len(),
                "{n}: {} statements",
                cut.len()
            );
        }
    }
}
