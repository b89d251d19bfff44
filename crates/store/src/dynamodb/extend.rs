//! Extending claims: moving the expiry of the lease that holds a claim's entry.
//!
//! A lease holds an entry, and an entry may list several claims' jobs (a create batch's messages
//! leased whole). An extension that covers every claim of the entry still open here, or that
//! lengthens the lease, moves the entry's expiry (one conditional write; an entry's other open
//! claims then stay invisible as long, never shorter). An extension that would shorten the lease
//! of an entry whose other claims it does not cover splits its jobs off first, into a part of the
//! same root holding the same lease with the new expiry (one transaction of the two items), so
//! that no other claim's message is handed out again before its own lease runs out.

use std::collections::HashMap;

use futures_util::StreamExt;
use hourglass_core::JobId;
use jiff::Timestamp;

use super::claim::CONCURRENCY;
use super::entry::{Entry, Listed, Root, encode_listing, encode_sizes, root_item, split_token};
use super::item::{Attrs, Item, job_id, job_key, key, n, s};
use super::table::Change;
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
        "#ltok = {} AND attribute_exists(#lown) AND #jobs = {}",
        &["ltok", "lown", "jobs"],
        vec![n(held.ltok), entry.listing.clone()],
    );
    change.set("jobs", encode_listing(&others));
    change.set("cnt", n(others.len() as i64));
    if let Some((_, sizes)) = entry.queued(&others) {
        change.set(super::entry::SIZES, encode_sizes(&sizes));
    }
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
        super::table::put_new(&inner.table, part),
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
