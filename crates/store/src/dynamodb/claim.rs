//! Claims and what ends them without a completion. A claim reads each shard's entries due by the
//! horizon (strongly consistent; of the fired lane, only the shards a recent probe saw work due
//! in: `floors.rs`), and leases each entry it takes with one conditional update:
//! unleased or lapsed, and at the lease counter it read, so two claimers never both win. An
//! entry with a job due by the horizon is taken whole, its later jobs too (up to
//! [`CLAIM_REACH`] past the horizon, an entry's window: `Store::claim_reach`). When the limit
//! takes only part of an entry, the rest is split off into a part of the same root in the same
//! transaction. It then hands out the jobs of an entry no lease held before from the entry's
//! snapshot, when the create wrote one (`snapshot.rs`: one small read for the entry, not one a
//! job); the others it reads (eventually consistent, read again strongly when a job item
//! disagrees with its listing) and hands out those whose listing is still valid and whose
//! delivery no settlement recorded.
//!
//! A queue's entries are claimed the same way, at the claimer's own instant (never ahead): a pull
//! that takes every message of an entry due then, within its limit, byte budget and type filter,
//! leases the entry whole (one write for a create batch's messages); one that takes some splits
//! the rest off, with their type, sizes and lapsed attempts. A lease that lapses unacknowledged
//! counts an attempt for every message of the entry (a lease always holds all that it lists).
//!
//! The store remembers the claims it handed out (`Inner::held`): a completion or release finds
//! the entry it came from there, and the last one of an entry deletes it.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use hourglass_core::{JobId, Occurrence, duration_ms, from_ms};
use jiff::Timestamp;

use super::Inner;
use super::entry::{Entry, Listed, claim_token, root_item, split_token, valid};
use super::item::{Attrs, Item, Lane, fire_bound_after, job_from_item, job_id, job_key, key, n, s};
use super::payload;
use super::snapshot::{fresh, read_snapshots, snapped_occurrence};
use super::table::{Change, Query};
use crate::{ClaimScope, Lease, Release, Result};

/// How far past the horizon a claim of fired occurrences takes the rest of an entry it leases:
/// an entry's window, so that a claim never splits an entry for its horizon.
pub(super) const CLAIM_REACH: std::time::Duration =
    std::time::Duration::from_millis(super::entry::WINDOW_MS as u64);

/// Conditional writes a batch sends at once.
pub(super) const CONCURRENCY: usize = 32;

fn lane<'a>(scope: ClaimScope<'a>) -> Lane<'a> {
    match scope {
        ClaimScope::Fired => Lane::Fired,
        ClaimScope::Queue {
            namespace, queue, ..
        } => Lane::Queue { namespace, queue },
    }
}

/// An entry this claim leased, with the jobs it took from it.
pub(super) struct Taken {
    pub(super) entry: Entry,
    pub(super) jobs: Vec<Listed>,
    /// The lease counter this claim holds.
    ltok: i64,
    /// Whether an earlier lease held it (its jobs may be settled already).
    leased_before: bool,
}

pub(super) async fn claim_due(
    inner: &Inner,
    scope: ClaimScope<'_>,
    horizon: Timestamp,
    limit: usize,
    lease: &Lease,
) -> Result<Vec<Occurrence>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let now = lease.now.as_millisecond();
    let until = now.saturating_add(duration_ms(lease.ttl));
    let horizon = horizon.as_millisecond();
    let types = match scope {
        ClaimScope::Fired => None,
        ClaimScope::Queue { types, .. } => types,
    };
    let is_queue = matches!(scope, ClaimScope::Queue { .. });
    // An entry with a job due by the horizon is taken with the rest of its window, up to
    // [`CLAIM_REACH`] later (the store's `claim_reach`): the caller waits for each occurrence's
    // own fire time anyway, and leaving the rest would split it off into a part, a transaction
    // of two items. A queue's messages are leased for now, never ahead.
    let reach = if is_queue {
        horizon
    } else {
        horizon.saturating_add(duration_ms(CLAIM_REACH))
    };
    let lane = lane(scope);
    // Each shard's entries due by the horizon, in order, until they offer twice the limit of
    // claimable jobs: entries leased by others (until their claims end) are read past, never
    // let to hide what is claimable behind them.
    // Of the fired lane, only the shards a recent probe saw work due in (`floors.rs`).
    let shards = match scope {
        ClaimScope::Fired => inner.floors.to_read(horizon),
        ClaimScope::Queue { .. } => (0..inner.shards).collect(),
    };
    let mut items = Vec::new();
    for shard in shards {
        let mut claimable = 0usize;
        let query = Query::new(lane.partition(shard)).below(fire_bound_after(horizon));
        let found = inner
            .query_while(&query, |item| {
                if let Ok(entry) = Entry::from_item(item)
                    && !entry.leased_at(now)
                {
                    claimable += entry.jobs.iter().filter(|j| j.fire <= horizon).count();
                }
                claimable < limit.saturating_mul(2)
            })
            .await?;
        items.extend(found);
    }
    items.sort_by(|a, b| {
        let key = |i: &Item| i.get("sk").and_then(|v| v.as_s().ok()).cloned();
        key(a).cmp(&key(b))
    });
    let max_bytes = scope.max_bytes();
    let (mut count, mut bytes) = (0usize, 0usize);
    let mut taken = Vec::new();
    let mut candidates = items.iter();
    loop {
        // The next candidates, as many as fill the limit and the byte budget if every lease
        // succeeds, leased concurrently (a queue's messages are in many entries: each create
        // batch's by type and time window).
        let mut chunk = Vec::new();
        let (mut planned, mut planned_bytes) = (count, bytes);
        while chunk.len() < CONCURRENCY
            && planned < limit
            && crate::under_byte_budget(max_bytes, planned_bytes)
        {
            let Some(item) = candidates.next() else { break };
            let entry = Entry::from_item(item)?;
            // A lease still running by the claimer's clock is not up for grabs, however soon
            // it ends within the horizon.
            if entry.leased_at(now) || !entry.jobs.iter().any(|j| j.fire <= horizon) {
                continue;
            }
            if let Some(types) = types
                && !entry
                    .job_type
                    .as_ref()
                    .is_some_and(|t| types.iter().any(|wanted| wanted == t))
            {
                continue;
            }
            // Another claim of this process is leasing it, or leased it since this one read it
            // (workers pulling one queue at once read the same messages): this attempt would
            // only pay for a failed conditional write.
            let Some(leasing) = Leasing::begin(inner, &entry) else {
                continue;
            };
            let mut due: Vec<Listed> = entry
                .jobs
                .iter()
                .filter(|j| j.fire <= reach)
                .copied()
                .collect();
            due.sort_by_key(|j| (j.fire, j.id));
            due.truncate(limit - planned);
            // A byte budget cuts within an entry too: a queue entry lists its messages' sizes.
            let mut kept = 0;
            let mut after = planned_bytes;
            for job in &due {
                if !crate::under_byte_budget(max_bytes, after) {
                    break;
                }
                after += entry.sizes.get(&job.id).copied().unwrap_or(0);
                kept += 1;
            }
            due.truncate(kept);
            planned += due.len();
            planned_bytes = after;
            chunk.push((entry, due, leasing));
        }
        if chunk.is_empty() {
            break;
        }
        let mut attempts = Vec::with_capacity(chunk.len());
        for (entry, due, leasing) in chunk {
            attempts.push(async move {
                let won = lease_entry(inner, &entry, &due, &lease.owner, until, is_queue).await?;
                Ok::<_, crate::StoreError>(won.map(|(ltok, part)| {
                    let mut entry = entry;
                    match part {
                        // The entry itself stays unleased, its rest claimable.
                        Some(sk) => {
                            leasing.taken(entry.listing.clone());
                            entry.sk = sk;
                        }
                        None => leasing.won(ltok),
                    }
                    (entry, due, ltok)
                }))
            });
        }
        let answers = futures_util::future::join_all(attempts).await;
        for answer in answers {
            if let Some((entry, jobs, ltok)) = answer? {
                count += jobs.len();
                bytes += entry.bytes_of(&jobs);
                taken.push(Taken {
                    leased_before: entry.ltok > 0,
                    entry,
                    jobs,
                    ltok,
                });
            }
        }
    }
    hand_out(inner, taken, is_queue, &lease.owner, now).await
}

/// An entry one of this process's claims is trying to lease, until the attempt ends. One it won
/// stays known at its lease counter for a while ([`LEASED_KEPT`]), and one it took some queue
/// messages of stays known with the listing it changed, so that a concurrent claim that read it
/// before passes it by.
struct Leasing<'a> {
    inner: &'a Inner,
    key: (String, String),
    won: bool,
}

/// What [`Inner::leasing`] knows of an entry.
#[derive(Debug, Clone)]
enum Attempt {
    /// A claim of this process is leasing it.
    InFlight,
    /// A claim of this process leased it, at this counter, then.
    Won(i64, std::time::Instant),
    /// A claim of this process took some of its queue messages into a part of their own then,
    /// changing its listing from this one (`parts::take_part`).
    Taken(aws_sdk_dynamodb::types::AttributeValue, std::time::Instant),
}

/// How long an entry this process leased is remembered: a claim reading it before is over by
/// then.
const LEASED_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// The entries this process's claims are leasing or lately leased ([`Inner::leasing`]). Past
/// 4096 of them, the ones leased over [`LEASED_KEPT`] ago are dropped, at most once a second: a
/// queue pulled thousands of times a second keeps more than that in the book, and a sweep on
/// every lease would cost each lease the whole book.
#[derive(Debug, Default)]
pub(super) struct LeaseBook {
    entries: std::collections::HashMap<(String, String), Attempt>,
    pruned: Option<std::time::Instant>,
}

impl LeaseBook {
    fn prune(&mut self) {
        let now = std::time::Instant::now();
        if self.entries.len() <= 4096
            || self
                .pruned
                .is_some_and(|at| now.duration_since(at) < std::time::Duration::from_secs(1))
        {
            return;
        }
        self.pruned = Some(now);
        self.entries.retain(|_, a| match a {
            Attempt::InFlight => true,
            Attempt::Won(_, at) | Attempt::Taken(_, at) => now.duration_since(*at) < LEASED_KEPT,
        });
    }
}

impl<'a> Leasing<'a> {
    fn begin(inner: &'a Inner, entry: &Entry) -> Option<Self> {
        let key = (entry.root.pk.clone(), entry.sk.clone());
        let mut book = inner.leasing.lock().unwrap_or_else(|p| p.into_inner());
        book.prune();
        match book.entries.get(&key) {
            Some(Attempt::InFlight) => return None,
            Some(Attempt::Won(ltok, at)) if *ltok > entry.ltok && at.elapsed() < LEASED_KEPT => {
                return None;
            }
            // Read before a take changed its listing: a write conditioned on it would fail.
            Some(Attempt::Taken(listing, at))
                if *listing == entry.listing && at.elapsed() < LEASED_KEPT =>
            {
                return None;
            }
            _ => {}
        }
        book.entries.insert(key.clone(), Attempt::InFlight);
        Some(Self {
            inner,
            key,
            won: false,
        })
    }

    fn won(self, ltok: i64) {
        self.end(Attempt::Won(ltok, std::time::Instant::now()));
    }

    /// Some of the entry's messages were taken out of `listing` (the entry's as read).
    fn taken(self, listing: aws_sdk_dynamodb::types::AttributeValue) {
        self.end(Attempt::Taken(listing, std::time::Instant::now()));
    }

    fn end(mut self, attempt: Attempt) {
        self.won = true;
        self.inner
            .leasing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .insert(self.key.clone(), attempt);
    }
}

impl Drop for Leasing<'_> {
    fn drop(&mut self) {
        if !self.won {
            self.inner
                .leasing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entries
                .remove(&self.key);
        }
    }
}

/// Conditions a write of `entry` on its being as read: at the lease counter read, unleased then
/// or lapsed (no other claimer leased it since); and at the listing and gone count read (an edit
/// or a cancel that took a job out of it since, in the transaction that changed the job, fails
/// the write, so that no read of the job after it, however stale, can hand out what was changed
/// before it).
pub(super) fn as_read(change: &mut Change, entry: &Entry) {
    entry.listing_as_read(change);
    match entry.gone_count {
        0 => change.when("attribute_not_exists(#gen)", &[super::entry::GEN], vec![]),
        seen => change.when("#gen = {}", &[super::entry::GEN], vec![n(seen)]),
    }
    match entry.owner {
        Some(_) => change.when(
            "#ltok = {} AND #luntil <= {}",
            &["ltok", "luntil"],
            vec![n(entry.ltok), n(entry.until.unwrap_or(i64::MIN))],
        ),
        None if entry.ltok == 0 => change.when(
            "attribute_not_exists(#lown) AND attribute_not_exists(#ltok)",
            &["lown", "ltok"],
            vec![],
        ),
        None => change.when(
            "attribute_not_exists(#lown) AND #ltok = {}",
            &["lown", "ltok"],
            vec![n(entry.ltok)],
        ),
    }
}

/// Leases `entry` for the jobs `take` of it (splitting the others off into a new part of its
/// root; of a queue entry, taking `take` into a new part instead, `parts.rs`): the lease counter
/// it now holds, and the sort key of the part it holds when that is not the entry's, or `None`
/// when another claimer got there first.
async fn lease_entry(
    inner: &Inner,
    entry: &Entry,
    take: &[Listed],
    owner: &str,
    until: i64,
    is_queue: bool,
) -> Result<Option<(i64, Option<String>)>> {
    let ltok = entry.ltok + 1;
    let rest: Vec<Listed> = entry
        .jobs
        .iter()
        .filter(|j| !take.iter().any(|t| t.id == j.id))
        .copied()
        .collect();
    if is_queue && !rest.is_empty() {
        return super::parts::take_part(inner, entry, take, &rest, owner, until)
            .await
            .map(|won| won.map(|(ltok, sk)| (ltok, Some(sk))));
    }
    let mut change = Change::new(entry.key());
    as_read(&mut change, entry);
    change.set("lown", s(owner));
    change.set("luntil", n(until));
    change.set("ltok", n(ltok));
    // A queue message whose lease ran out unacked: that lease was a failed attempt.
    if is_queue && entry.owner.is_some() {
        change.set("lapses", n(entry.lapses + 1));
    }
    if rest.is_empty() {
        return Ok(inner.update(change, false).await?.map(|_| (ltok, None)));
    }
    // Of the fired lane: the rest split off in one transaction with the lease.
    entry.set_listing(&mut change, take);
    let mut part = root_item(&entry.root, &rest, None);
    part.insert(
        "sk".into(),
        s(entry
            .root
            .part_sk(&format!("{:016x}", rand::random::<u64>()))),
    );
    // The part continues the entry's lease counter, so its next claim's tokens are higher.
    part.insert("ltok".into(), n(ltok));
    let actions = vec![
        change.into_action(&inner.table),
        super::table::put_new(&inner.table, part),
    ];
    Ok(inner
        .transact(actions)
        .await?
        .is_ok()
        .then_some((ltok, None)))
}

/// The occurrences of the entries this claim leased: the jobs whose listing is still valid and
/// that no settlement recorded. An entry left with none is deleted at once. `owner` is this
/// claim's: an entry whose lapsed lease another owner held names that one on its occurrences.
async fn hand_out(
    inner: &Inner,
    taken: Vec<Taken>,
    is_queue: bool,
    owner: &str,
    now: i64,
) -> Result<Vec<Occurrence>> {
    let carried = read_snapshots(inner, &taken, is_queue, now).await?;
    let wanted: Vec<&Listed> = taken
        .iter()
        .flat_map(|t| &t.jobs)
        .filter(|j| !carried.contains_key(&j.id))
        .collect();
    let homes = read_homes(inner, &wanted).await?;
    let mut claimed = Vec::new();
    for t in taken {
        let fresh = fresh(&t, is_queue);
        let settled = if t.leased_before {
            super::settled::settled_jobs(inner, &t.entry.root).await?
        } else {
            Default::default()
        };
        let mut entry = t.entry.clone();
        entry.jobs = t.jobs.clone();
        let lapses = if is_queue && t.entry.owner.is_some() {
            t.entry.lapses + 1
        } else {
            t.entry.lapses
        };
        let lapsed_owner: Option<Arc<str>> = t
            .entry
            .owner
            .as_deref()
            .filter(|previous| *previous != owner)
            .map(Arc::from);
        let mut handed = Vec::new();
        let homes: HashMap<JobId, &Item> = valid(&entry, &homes).map(|(l, h)| (l.id, h)).collect();
        for listed in &entry.jobs {
            let token = claim_token(listed.version, t.ltok);
            let found = match (
                carried.get(&listed.id).filter(|_| fresh),
                homes.get(&listed.id),
            ) {
                (Some(snapped), _) => {
                    snapped_occurrence(inner, snapped, listed, token, lapses).await?
                }
                (None, Some(home)) if !settled.contains(&(listed.id, listed.version)) => {
                    occurrence(inner, home, listed, token, lapses, lapsed_owner.clone()).await?
                }
                _ => None,
            };
            handed.extend(found);
        }
        let sk = entry.sk.clone();
        if handed.is_empty() {
            // Nothing in it is due any more: every listing stale or settled.
            delete_entry(inner, &entry.root.pk, &sk, t.ltok).await?;
            continue;
        }
        inner.hold(
            &entry.root.pk,
            &sk,
            t.ltok,
            handed.iter().map(|o| (o.job_id, o.token.as_i64())),
        );
        claimed.extend(handed);
    }
    claimed.sort_by_key(|o| (o.fire_at, o.job_id));
    Ok(claimed)
}

/// The job items of `jobs` by id: read eventually consistent (half the price), and again
/// strongly for any that disagrees with its listing (a write of the last second not seen yet).
async fn read_homes(inner: &Inner, jobs: &[&Listed]) -> Result<HashMap<JobId, Item>> {
    let mut homes = HashMap::with_capacity(jobs.len());
    let mut ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    ids.sort();
    ids.dedup();
    let keys: Vec<Item> = ids.iter().map(|id| job_key(*id)).collect();
    for item in inner.get_many_as(keys, false).await? {
        homes.insert(job_id(item.str("id")?)?, item);
    }
    let mut again: Vec<JobId> = jobs
        .iter()
        .filter(|j| {
            homes
                .get(&j.id)
                .is_none_or(|home| home.num("tok").ok() != Some(j.version))
        })
        .map(|j| j.id)
        .collect();
    again.sort();
    again.dedup();
    let again: Vec<Item> = again.into_iter().map(job_key).collect();
    if !again.is_empty() {
        for item in inner.get_many(again).await? {
            homes.insert(job_id(item.str("id")?)?, item);
        }
    }
    Ok(homes)
}

/// The occurrence a claim took: `home` is the job item, its payload read when it lives apart.
/// `None` when an edit since the read replaced the payload (and voided the claim).
async fn occurrence(
    inner: &Inner,
    home: &Item,
    listed: &Listed,
    token: i64,
    lapses: i64,
    lapsed_owner: Option<Arc<str>>,
) -> Result<Option<Occurrence>> {
    let mut job = job_from_item(home)?;
    if let Some(version) = payload::version_of(home)? {
        match inner
            .claimed_payload(job.id, version, listed.version)
            .await?
        {
            Some(payload) => job.payload = Some(payload),
            None => return Ok(None),
        }
    }
    Ok(Some(Occurrence {
        job_id: job.id,
        namespace: job.namespace.as_str().into(),
        due: job.next_due.unwrap_or(from_ms(listed.fire)),
        fire_at: from_ms(listed.fire),
        attempt: job.attempt + lapses as u32 + 1,
        token: hourglass_core::FencingToken::from_i64(token),
        runs_done: job.runs,
        spec: Arc::new(job.spec),
        payload: job.payload.map(Into::into),
        lapsed_owner,
    }))
}

/// Deletes an entry if the lease `ltok` still holds it.
pub(super) async fn delete_entry(inner: &Inner, pk: &str, sk: &str, ltok: i64) -> Result<()> {
    let mut change = Change::new(key(pk.to_owned(), sk));
    change.when("#ltok = {}", &["ltok"], vec![n(ltok)]);
    inner.delete_if(change).await.map(|_| ())
}

pub(super) async fn release(inner: &Inner, claims: Vec<Release>) -> Result<()> {
    // Claims handed back at their own fire time, together the whole rest of their entry's lease:
    // the entry is simply unleased (one write). Any other: the job moves to an entry of its own.
    let mut by_entry: HashMap<super::Held, Vec<Release>> = HashMap::new();
    let mut alone = Vec::new();
    for claim in claims {
        match inner.held(claim.job_id, claim.token.as_i64()) {
            Some(held) => by_entry.entry(held).or_default().push(claim),
            None => alone.push(claim),
        }
    }
    for (held, claims) in by_entry {
        if inner.held_count(&held) == claims.len() {
            let Some(item) = inner.get(key(held.pk.clone(), &held.sk)).await? else {
                continue;
            };
            let entry = Entry::from_item(&item)?;
            let own_times = claims.iter().all(|c| {
                entry
                    .jobs
                    .iter()
                    .any(|j| j.id == c.job_id && j.fire == c.fire_at.as_millisecond())
            });
            let (_, ltok) = split_token(claims[0].token.as_i64());
            if own_times && entry.ltok == ltok {
                let mut change = Change::new(entry.key());
                change.when("#ltok = {}", &["ltok"], vec![n(ltok)]);
                change.remove("lown");
                change.remove("luntil");
                inner.update(change, false).await?;
                for c in &claims {
                    inner.forget(c.job_id, c.token.as_i64());
                }
                continue;
            }
        }
        alone.extend(claims);
    }
    let answers = futures_util::stream::iter(alone)
        .map(|c| async move { move_alone(inner, c).await })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    answers.into_iter().collect()
}

/// Moves a released claim's job to an entry of its own, due at the release's fire time.
async fn move_alone(inner: &Inner, c: Release) -> Result<()> {
    let (version, _) = split_token(c.token.as_i64());
    let Some(home) = inner.get(job_key(c.job_id)).await? else {
        return inner.settle_held(c.job_id, c.token.as_i64()).await;
    };
    if home.num("tok")? != version {
        return inner.settle_held(c.job_id, c.token.as_i64()).await;
    }
    let namespace = home.str("ns")?.to_owned();
    let queue = home.opt_str("queue")?.map(str::to_owned);
    let lane = match &queue {
        Some(queue) => Lane::Queue {
            namespace: &namespace,
            queue,
        },
        None => Lane::Fired,
    };
    let fire = c.fire_at.as_millisecond();
    let root = inner.new_root(lane, fire);
    let listed = Listed {
        id: c.job_id,
        fire,
        version: version + 1,
    };
    let job_type = home.opt_str("jtype")?.map(str::to_owned);
    let size = [home.opt_str("payload")?.map_or(0, str::len)];
    let entry = root_item(
        &root,
        &[listed],
        queue.as_ref().map(|_| (&job_type, &size[..])),
    );
    inner.put(entry).await?;
    let mut change = Change::new(job_key(c.job_id));
    change.when(
        "#tok = {} AND #st = {}",
        &["tok", "st"],
        vec![
            n(version),
            n(super::item::state_code(hourglass_core::JobState::Active)),
        ],
    );
    change.set("fire", n(fire));
    change.set("epk", s(&root.pk));
    change.set("ekey", s(&root.key));
    change.add("tok", 1);
    // A one-off's item outlives its new fire time by the retention (and a day).
    let ttl = match home.opt_num(super::table::TTL)? {
        Some(_) => inner.one_off_ttl(false, fire),
        None => None,
    };
    if let Some(ttl) = ttl {
        change.set(super::table::TTL, n(ttl));
    }
    if inner.update(change, false).await?.is_some() {
        super::jobs::keep_listed(inner, &home, ttl).await?;
    } else {
        inner
            .delete_many(vec![key(root.pk.clone(), &root.part_sk("0"))])
            .await?;
    }
    inner.settle_held(c.job_id, c.token.as_i64()).await
}

pub(super) async fn next_due(inner: &Inner, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
    // Leased entries count at their lease expiry; a queue scope's type filter is ignored. An
    // entry's sort key is a lower bound of every later entry's fire times: each shard is read
    // until that bound passes the earliest time found.
    // Eventually consistent, at half the price: it only decides how long the planner sleeps,
    // and an entry this node wrote wakes it by itself (`StoreEvent::Due`).
    // Each shard's first entry bounds its fire times from below: what the fired lane's floors
    // are made of (`floors.rs`).
    let lane = lane(scope);
    let started = std::time::Instant::now();
    let mut firsts = Vec::with_capacity(inner.shards as usize);
    let mut earliest: Option<i64> = None;
    for shard in 0..inner.shards {
        let query = Query::new(lane.partition(shard)).eventually_consistent();
        let mut failed = None;
        let mut first = None;
        inner
            .query_while(&query, |item| {
                let entry = match Entry::from_item(item) {
                    Ok(entry) => entry,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                };
                let bound = super::item::fire_of_entry_sk(&entry.sk);
                first.get_or_insert(bound);
                if earliest.is_some_and(|e| bound > e) {
                    return false;
                }
                let at = match (&entry.owner, entry.until) {
                    (Some(_), Some(until)) => Some(until),
                    _ => entry.first_fire(),
                };
                if let Some(at) = at {
                    earliest = Some(earliest.map_or(at, |e| e.min(at)));
                }
                true
            })
            .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        firsts.push(first.unwrap_or(i64::MAX));
    }
    if lane == Lane::Fired {
        inner.floors.probed(started, firsts);
    }
    Ok(earliest.map(from_ms))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn fill(book: &mut LeaseBook, from: usize, at: Instant) {
        for n in from..from + 5000 {
            let key = (format!("pk{n}"), "sk".to_string());
            book.entries.insert(key, Attempt::Won(1, at));
        }
    }

    #[test]
    fn the_lease_book_drops_old_leases_at_most_once_a_second() {
        let Some(long_ago) = Instant::now().checked_sub(LEASED_KEPT * 2) else {
            return; // a machine up for less than two minutes cannot make an old instant
        };
        let mut book = LeaseBook::default();
        fill(&mut book, 0, long_ago);
        book.entries
            .insert(("busy".into(), "sk".into()), Attempt::InFlight);
        book.prune();
        // Leases past LEASED_KEPT are gone; one still in flight stays.
        assert_eq!(book.entries.len(), 1);
        // Refilled at once: not swept again within the second.
        fill(&mut book, 10_000, long_ago);
        book.prune();
        assert_eq!(book.entries.len(), 5001);
        // A fresh book under the size bound is never swept.
        let mut small = LeaseBook::default();
        small
            .entries
            .insert(("a".into(), "b".into()), Attempt::Won(1, long_ago));
        small.prune();
        assert_eq!(small.entries.len(), 1);
    }
}
