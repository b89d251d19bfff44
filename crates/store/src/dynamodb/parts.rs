//! Parts split off an entry outside a claim's transaction, where one lease must not hold all
//! that an entry lists: a queue pull that takes some of an entry's messages, and an extension that
//! shortens the lease of some of an entry's claims.
//!
//! **A pull that takes some messages** of a queue entry (its limit, byte budget, or messages not
//! due yet) puts the taken ones in a new part of the entry's root, leased by the pull from the
//! start, then takes them out of the entry's listing under the conditions a lease has (at the
//! lease counter, listing and gone count read; unleased or lapsed). Two single-item writes, where
//! a transaction of the two would bill each twice: a worker leasing one message at a time pays
//! what a message with an entry of its own paid (a put and a write of the entry). A pull that loses
//! the entry to another claimer deletes its part, which no one could lease meanwhile; a crash
//! between the two writes leaves the taken messages listed in both until the part's lease lapses
//! (at least once: they may then be handed out twice, never lost).
//!
//! **An extension** that covers every claim of the entry still open here, or that lengthens the
//! lease, moves the entry's expiry (one conditional write; an entry's other open claims then stay
//! invisible as long, never shorter). An extension that would shorten the lease of an entry whose
//! other claims it does not cover splits its jobs off first, into a part of the same root holding
//! the same lease with the new expiry (one transaction of the two items), so that no other claim's
//! message is handed out again before its own lease runs out.

use std::collections::HashMap;

use futures_util::StreamExt;
use hourglass_core::JobId;
use jiff::Timestamp;

use super::claim::CONCURRENCY;
use super::entry::{Entry, Listed, Root, root_item, split_token};
use super::item::{Attrs, Item, job_id, job_key, key, n, s};
use super::table::{Change, put_new};
use super::{Held, Inner};
use crate::{Applied, Result};

pub(super) async fn extend_claims(
    inner: &Inner,
    claims: Vec<(JobId, i64)>,
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let _ = now;
    let until = until.as_millisecond();
    // A claim is extended only while its job is at the claimed version (an edit voids it) and
    // its entry's lease is still the claim's.
    let mut homes = HashMap::new();
    for item in inner
        .get_many(claims.iter().map(|(id, _)| job_key(*id)).collect())
        .await?
    {
        homes.insert(job_id(item.str("id")?)?, item);
    }
    let mut answers = vec![Applied::StaleLease; claims.len()];
    // The claims by the entry (and lease) that holds them.
    let mut by_entry: HashMap<Held, Vec<usize>> = HashMap::new();
    for (i, (id, token)) in claims.iter().enumerate() {
        let (version, ltok) = split_token(*token);
        let Some(home) = homes.get(id).filter(|h| h.num("tok").ok() == Some(version)) else {
            continue;
        };
        let Some((pk, sk)) = entry_of(inner, *id, *token, home).await? else {
            continue;
        };
        by_entry.entry(Held { pk, sk, ltok }).or_default().push(i);
    }
    let claims = &claims;
    let extended = futures_util::stream::iter(by_entry)
        .map(|(held, indexes)| async move {
            let applied = extend_entry(inner, &held, &indexes, claims, until).await?;
            Ok::<_, crate::StoreError>((indexes, applied))
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    for answer in extended {
        let (indexes, applied) = answer?;
        for i in indexes {
            answers[i] = applied;
        }
    }
    Ok(answers)
}

/// Extends the claims at `indexes`, all held by the lease `held`, to `until`.
async fn extend_entry(
    inner: &Inner,
    held: &Held,
    indexes: &[usize],
    claims: &[(JobId, i64)],
    until: i64,
) -> Result<Applied> {
    let ours: Vec<(JobId, i64)> = indexes.iter().map(|&i| claims[i]).collect();
    // Every claim of the lease still open here is extended: the entry's expiry moves whole.
    let whole = inner.held_count(held) == ours.len();
    if !whole {
        let Some(item) = inner.get(key(held.pk.clone(), &held.sk)).await? else {
            return Ok(Applied::StaleLease);
        };
        let entry = Entry::from_item(&item)?;
        if entry.ltok != held.ltok || entry.owner.is_none() {
            return Ok(Applied::StaleLease);
        }
        let others: Vec<Listed> = entry
            .jobs
            .iter()
            .filter(|j| !ours.iter().any(|(id, _)| *id == j.id))
            .copied()
            .collect();
        if !others.is_empty() && entry.until.is_some_and(|current| until < current) {
            return split_off(inner, held, &entry, &ours, others, until).await;
        }
    }
    let mut change = Change::new(key(held.pk.clone(), &held.sk));
    change.when(
        "#ltok = {} AND attribute_exists(#lown)",
        &["ltok", "lown"],
        vec![n(held.ltok)],
    );
    change.set("luntil", n(until));
    Ok(match inner.update(change, false).await? {
        Some(_) => Applied::Yes,
        None => Applied::StaleLease,
    })
}

/// Moves the jobs of the claims `ours` out of `entry` into a new part of its root, held by the
/// same lease until `until`, leaving the `others` in the entry with their expiry.
async fn split_off(
    inner: &Inner,
    held: &Held,
    entry: &Entry,
    ours: &[(JobId, i64)],
    others: Vec<Listed>,
    until: i64,
) -> Result<Applied> {
    let moving: Vec<Listed> = entry
        .jobs
        .iter()
        .filter(|j| ours.iter().any(|(id, _)| *id == j.id))
        .copied()
        .collect();
    if moving.is_empty() {
        return Ok(Applied::StaleLease);
    }
    let mut change = Change::new(entry.key());
    change.when(
        "#ltok = {} AND attribute_exists(#lown)",
        &["ltok", "lown"],
        vec![n(held.ltok)],
    );
    entry.listing_as_read(&mut change);
    entry.set_listing(&mut change, &others);
    let queued = entry.queued(&moving);
    let mut part = root_item(
        &entry.root,
        &moving,
        queued.as_ref().map(|(t, s)| (*t, &s[..])),
    );
    let sk = entry
        .root
        .part_sk(&format!("{:016x}", rand::random::<u64>()));
    part.insert("sk".into(), s(&sk));
    part.insert("ltok".into(), n(held.ltok));
    part.insert("luntil".into(), n(until));
    if let Some(owner) = &entry.owner {
        part.insert("lown".into(), s(owner));
    }
    if entry.lapses > 0 {
        part.insert("lapses".into(), n(entry.lapses));
    }
    let actions = vec![
        change.into_action(&inner.table),
        put_new(&inner.table, part),
    ];
    if inner.transact(actions).await?.is_err() {
        return Ok(Applied::StaleLease);
    }
    let to = Held {
        pk: held.pk.clone(),
        sk,
        ltok: held.ltok,
    };
    inner.rehold(held, &to, ours);
    Ok(Applied::Yes)
}

/// The entry a claim was taken from: as this store remembers it, or (for a claim another process
/// made, such as a queue lease taken through another API function) the part of the root its job
/// names that lists it.
async fn entry_of(
    inner: &Inner,
    id: JobId,
    token: i64,
    home: &Item,
) -> Result<Option<(String, String)>> {
    if let Some(held) = inner.held(id, token) {
        return Ok(Some((held.pk, held.sk)));
    }
    let Some(root) = Root::of_job(home)? else {
        return Ok(None);
    };
    let (version, _) = split_token(token);
    let part = super::complete::listing_part(inner, &root, id, version).await?;
    Ok(part.map(|entry| (entry.root.pk.clone(), entry.sk)))
}

/// Takes the jobs `take` of the queue entry `entry` (not all it lists) into a new part of its
/// root, leased by `owner` until `until` at the entry's next lease counter: that counter and the
/// part's sort key, or `None` when another claimer changed the entry since it was read.
pub(super) async fn take_part(
    inner: &Inner,
    entry: &Entry,
    take: &[Listed],
    rest: &[Listed],
    owner: &str,
    until: i64,
) -> Result<Option<(i64, String)>> {
    let ltok = entry.ltok + 1;
    let queued = entry.queued(take);
    let mut part = root_item(
        &entry.root,
        take,
        queued.as_ref().map(|(t, s)| (*t, &s[..])),
    );
    let sk = entry
        .root
        .part_sk(&format!("{:016x}", rand::random::<u64>()));
    part.insert("sk".into(), s(&sk));
    part.insert("lown".into(), s(owner));
    part.insert("luntil".into(), n(until));
    part.insert("ltok".into(), n(ltok));
    // A lapsed lease of the entry held these too: that lease was an attempt of each.
    let lapses = entry.lapses + i64::from(entry.owner.is_some());
    if lapses > 0 {
        part.insert("lapses".into(), n(lapses));
    }
    if !inner.put_new(part).await? {
        return Ok(None);
    }
    // Out of the entry, under the lease's own conditions: no one leased or changed it since.
    let mut change = Change::new(entry.key());
    super::claim::as_read(&mut change, entry);
    entry.set_listing(&mut change, rest);
    if inner.update(change, false).await?.is_none() {
        super::claim::delete_entry(inner, &entry.root.pk, &sk, ltok).await?;
        return Ok(None);
    }
    Ok(Some((ltok, sk)))
}
