//! Claims of fired occurrences: horizon, order and limit, exclusivity under a lease, release,
//! the next due time, and lapsed claims.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::{T0, claim, create, lease, ms, one_off, t};
use crate::{ClaimScope, Lease, NewJob, Release, Store, Transition};

pub async fn claim_respects_horizon_order_and_limit(store: Arc<dyn Store>) {
    let base = t(T0);
    let jobs: Vec<NewJob> = [300, 100, 200, 5000]
        .into_iter()
        .map(|d| one_off("a", base + ms(d)))
        .collect();
    create(&*store, jobs).await;
    let claimed = store
        .claim_due(ClaimScope::Fired, base + ms(250), 10, &lease("n1", base))
        .await
        .unwrap();
    let dues: Vec<_> = claimed.iter().map(|o| o.due).collect();
    // What is due by the horizon, and what a store leasing several occurrences at once hands out
    // with them up to its reach past the horizon (300 here, on such a store): never more.
    let reach = base + ms(250) + store.claim_reach();
    let expected: Vec<_> = [100, 200, 300, 5000]
        .into_iter()
        .map(|d| base + ms(d))
        .filter(|due| *due <= reach)
        .collect();
    assert_eq!(dues, expected);
    assert!(claimed.iter().all(|o| o.attempt == 1 && o.runs_done == 0));
    let limited = store
        .claim_due(ClaimScope::Fired, base + ms(10_000), 1, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
    let next = [300, 5000]
        .into_iter()
        .map(|d| base + ms(d))
        .find(|due| !expected.contains(due));
    assert_eq!(Some(limited[0].due), next);
}

pub async fn claims_are_exclusive_until_lease_expiry(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(first.len(), 1);
    let during = base + ms(29_000);
    assert!(
        claim(&*store, ClaimScope::Fired, during, 10, "n2")
            .await
            .is_empty(),
        "a live claim must not be claimed again"
    );
    let after = base + ms(30_001);
    let second = claim(&*store, ClaimScope::Fired, after, 10, "n2").await;
    assert_eq!(second.len(), 1);
    assert_eq!(
        second[0].due, first[0].due,
        "same occurrence, same identity"
    );
    assert!(second[0].token > first[0].token);
    // Who held it before: nobody for the first claim; n1, whose lease lapsed, for the second.
    // A claim of the same owner after its own lease lapsed names nobody.
    assert_eq!(first[0].lapsed_owner, None, "nobody held it");
    assert_eq!(
        second[0].lapsed_owner.as_deref(),
        Some("n1"),
        "taken over from n1"
    );
    let third = claim(&*store, ClaimScope::Fired, after + ms(30_001), 10, "n2").await;
    assert_eq!(third.len(), 1);
    assert_eq!(
        third[0].lapsed_owner, None,
        "its own lapsed lease, not another's"
    );
}

/// A claimer looks ahead (its horizon) for work due soon, but a lease still running by its own
/// clock is not up for grabs, however soon it expires: short leases renewed by a live node must
/// not be taken over just because they fall inside another node's lookahead.
pub async fn a_live_lease_is_not_claimed_within_the_horizon(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(first.len(), 1);
    let expiry = base + ms(30_000);
    let before = expiry - ms(1);
    assert!(
        store
            .claim_due(
                ClaimScope::Fired,
                expiry + ms(2_000),
                10,
                &lease("n2", before)
            )
            .await
            .unwrap()
            .is_empty(),
        "the lease expires within the horizon but is still live"
    );
    let taken = store
        .claim_due(
            ClaimScope::Fired,
            expiry + ms(2_000),
            10,
            &lease("n2", expiry),
        )
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "at its expiry the lease is over");
    assert!(taken[0].token > first[0].token);
}

pub async fn release_restores_fire_time(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base + ms(500))]).await;
    let occ = store
        .claim_due(ClaimScope::Fired, base + ms(1000), 10, &lease("n1", base))
        .await
        .unwrap()
        .remove(0);
    store
        .release(vec![Release {
            job_id: occ.job_id,
            token: occ.token,
            fire_at: occ.fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(500))
    );
    let again = store
        .claim_due(ClaimScope::Fired, base + ms(500), 10, &lease("n2", base))
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
}

pub async fn next_due_tracks_earliest_active(store: Arc<dyn Store>) {
    let base = t(T0);
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
    let later = one_off("a", base + ms(9000));
    let sooner = one_off("a", base + ms(3000));
    let sooner_id = sooner.id;
    create(&*store, vec![later, sooner]).await;
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(3000))
    );
    store
        .transition(Some("a"), sooner_id, Transition::Pause { now: base }, None)
        .await
        .unwrap();
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(9000))
    );
}

/// A claim that lapses before its occurrence's fire time (a lease shorter than the claimer's
/// lookahead, or a renewal that came late) is claimed again with the occurrence's own fire time,
/// not the lapsed lease's expiry: otherwise the new holder would fire it early.
pub async fn a_lapsed_claim_taken_again_keeps_its_fire_time(store: Arc<dyn Store>) {
    let base = t(T0);
    let due = base + ms(2_000);
    create(&*store, vec![one_off("a", due)]).await;
    let short = |owner: &str, now: Timestamp| Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(1),
        now,
    };
    let first = store
        .claim_due(ClaimScope::Fired, base + ms(2_000), 10, &short("n1", base))
        .await
        .unwrap();
    assert_eq!(first[0].fire_at, due);
    let later = base + ms(1_100);
    let second = store
        .claim_due(
            ClaimScope::Fired,
            later + ms(2_000),
            10,
            &short("n2", later),
        )
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "the first lease lapsed at base + 1 s");
    assert_eq!(
        second[0].fire_at, due,
        "fires at its own time, not the lapsed lease's expiry"
    );
    // And handed back unfired, it is due at that time again.
    store
        .release(vec![Release {
            job_id: second[0].job_id,
            token: second[0].token,
            fire_at: second[0].fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), Some(due));
}
