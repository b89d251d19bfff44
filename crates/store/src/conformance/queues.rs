//! Queue targets: leases with a visibility timeout, type filters, lapses, extensions, retries,
//! statistics and gauges, and jobs moved between queues and webhooks.

use std::sync::Arc;

use hourglass_core::{Action, JobState, QueueTarget, Schedule, Target};

use super::{T0, claim, create, delivered, done, lease, ms, one_off, queue, queue_job, spec, t};
use crate::{
    Applied, ClaimScope, JobQuery, JobRecord, JobUpdate, NewJob, QueueStats, Release, Store,
    Transition,
};

pub async fn queue_jobs_are_leased_not_fired(store: Arc<dyn Store>) {
    let base = t(T0);
    let hook = one_off("a", base + ms(100));
    let q = queue_job("a", "emails", "send", base);
    let (hook_id, q_id) = (hook.id, q.id);
    create(
        &*store,
        vec![
            hook,
            q,
            queue_job("a", "other", "send", base),
            queue_job("b", "emails", "send", base),
        ],
    )
    .await;

    let fired = store
        .claim_due(ClaimScope::Fired, base + ms(1000), 10, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(
        fired.iter().map(|o| o.job_id).collect::<Vec<_>>(),
        vec![hook_id],
        "the engine never claims queue messages"
    );
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(30_000)),
        "only the webhook job's lease expiry"
    );
    assert_eq!(
        store.next_due(queue("a", "emails")).await.unwrap(),
        Some(base)
    );
    assert!(
        store
            .claim_due(queue("a", "emails"), base - ms(1), 10, &lease("w", base))
            .await
            .unwrap()
            .is_empty(),
        "not available before its due time"
    );
    let leased = claim(&*store, queue("a", "emails"), base, 10, "w").await;
    assert_eq!(leased.len(), 1, "one queue of one namespace");
    assert_eq!(leased[0].job_id, q_id);
    assert_eq!(leased[0].attempt, 1);
    assert_eq!(leased[0].spec.target.queue(), Some("emails"));
    assert_eq!(
        store.next_due(queue("a", "emails")).await.unwrap(),
        Some(base + ms(30_000))
    );
    assert_eq!(store.next_due(queue("a", "none")).await.unwrap(), None);
}

pub async fn queue_lease_filters_by_type(store: Arc<dyn Store>) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "y", base),
            queue_job("a", "q", "z", base),
        ],
    )
    .await;
    let types = vec!["x".to_string(), "z".to_string()];
    let scope = ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: Some(&types),
        max_bytes: None,
    };
    let mut got: Vec<_> = claim(&*store, scope, base, 10, "w")
        .await
        .into_iter()
        .map(|o| o.spec.job_type.clone().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec!["x", "z"]);
    let rest = claim(&*store, queue("a", "q"), base, 10, "w").await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].spec.job_type.as_deref(), Some("y"));
}

/// A queue claim with a byte budget stops once the payloads it took reach the budget (always
/// taking the first), in due order; what it left is claimed by the next claim, and a claim
/// without a budget takes every message its limit allows.
pub async fn a_queue_claim_stops_at_its_byte_budget(store: Arc<dyn Store>) {
    let base = t(T0);
    // Ten messages of 1,000-byte payloads (a JSON string of 998 letters), one a millisecond.
    let jobs: Vec<NewJob> = (0..10)
        .map(|i| {
            let mut job = queue_job("a", "q", "x", base + ms(i));
            job.payload = Some(format!("\"{}\"", "p".repeat(998)));
            job
        })
        .collect();
    create(&*store, jobs).await;
    let budget = |max_bytes| ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: None,
        max_bytes: Some(max_bytes),
    };
    let at = base + ms(10);
    let first = claim(&*store, budget(2_500), at, 10, "w").await;
    assert_eq!(
        first.len(),
        3,
        "2,000 bytes is under the budget, 3,000 reaches it"
    );
    let fires: Vec<_> = first.iter().map(|o| o.fire_at).collect();
    assert_eq!(
        fires,
        vec![base, base + ms(1), base + ms(2)],
        "in due order"
    );
    let one = claim(&*store, budget(1), at, 10, "w").await;
    assert_eq!(one.len(), 1, "a claim always takes one");
    assert_eq!(one[0].fire_at, base + ms(3));
    let rest = claim(&*store, queue("a", "q"), at, 10, "w").await;
    assert_eq!(rest.len(), 6, "without a budget, the limit only");
}

pub async fn lapsed_queue_lease_counts_an_attempt(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let first = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    assert_eq!(first[0].attempt, 1);
    let during = base + ms(29_999);
    assert!(
        claim(&*store, queue("a", "q"), during, 10, "w2")
            .await
            .is_empty(),
        "invisible while leased"
    );
    let after = base + ms(30_000);
    let second = claim(&*store, queue("a", "q"), after, 10, "w2").await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].attempt, 2, "the lapsed lease was an attempt");
    assert_eq!(second[0].due, first[0].due, "same occurrence");
    assert!(second[0].token > first[0].token);
    // The first worker's receipt is stale now: it can neither extend nor complete.
    assert_eq!(
        store
            .extend_claims(vec![first[0].claim()], after + ms(60_000), after)
            .await
            .unwrap(),
        vec![Applied::StaleLease]
    );
    let ack = delivered(&first[0]);
    assert_eq!(
        store.complete(vec![ack], after).await.unwrap(),
        vec![Applied::StaleLease]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Active);
    assert_eq!(job.attempt, 1, "one failed attempt recorded");
    // The current holder acks.
    let ack = delivered(&second[0]);
    assert_eq!(
        store.complete(vec![ack], after).await.unwrap(),
        vec![Applied::Yes]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
    let much_later = after + ms(3_600_000);
    assert!(
        claim(&*store, queue("a", "q"), much_later, 10, "w3")
            .await
            .is_empty(),
        "an acked message never comes back"
    );
}

pub async fn extend_moves_the_lease_under_its_token(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    let at = base + ms(20_000);
    assert_eq!(
        store
            .extend_claims(vec![held[0].claim()], at + ms(60_000), at)
            .await
            .unwrap(),
        vec![Applied::Yes]
    );
    let past_first = base + ms(40_000);
    assert!(
        claim(&*store, queue("a", "q"), past_first, 10, "w2")
            .await
            .is_empty(),
        "the extension keeps it invisible past the first expiry"
    );
    let past_second = at + ms(60_000);
    let again = claim(&*store, queue("a", "q"), past_second, 10, "w2").await;
    assert_eq!(again.len(), 1);
    // A released (unclaimed) message cannot be extended even with its latest token.
    store
        .release(vec![Release {
            job_id: again[0].job_id,
            token: again[0].token,
            fire_at: again[0].fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(
        store
            .extend_claims(vec![again[0].claim()], past_second + ms(1), past_second)
            .await
            .unwrap(),
        vec![Applied::StaleLease]
    );
}

pub async fn queue_retry_counts_once(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    // A nack: retry in 5 s.
    let nack = done(
        &held[0],
        Action::Retry {
            at: base + ms(5_000),
        },
    );
    assert_eq!(
        store.complete(vec![nack], base).await.unwrap(),
        vec![Applied::Yes]
    );
    assert!(
        store
            .claim_due(queue("a", "q"), base + ms(4_999), 10, &lease("w1", base))
            .await
            .unwrap()
            .is_empty(),
        "the retry delay holds"
    );
    let at = base + ms(5_000);
    let again = claim(&*store, queue("a", "q"), at, 10, "w1").await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2, "a nack is one failed attempt, not two");
}

pub async fn queue_stats_count_by_visibility(store: Arc<dyn Store>) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "x", base + ms(10)),
            queue_job("a", "q", "x", base + ms(60_000)),
            queue_job("a", "r", "x", base),
            queue_job("b", "q", "x", base),
        ],
    )
    .await;
    claim(&*store, queue("a", "q"), base, 1, "w").await;
    let now = base + ms(1_000);
    let stats = store.queue_stats("a", None, now).await.unwrap();
    assert_eq!(
        stats,
        vec![
            QueueStats {
                name: "q".into(),
                available: 1,
                in_flight: 1,
                scheduled: 1,
                oldest_available: Some(base + ms(10)),
            },
            QueueStats {
                name: "r".into(),
                available: 1,
                in_flight: 0,
                scheduled: 0,
                oldest_available: Some(base),
            },
        ]
    );
    // When the lease lapses, the message is available again, since its lease expiry.
    let later = base + ms(45_000);
    let q = store.queue_stats("a", Some("q"), later).await.unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].available, q[0].in_flight, q[0].scheduled), (2, 0, 1));
    assert_eq!(q[0].oldest_available, Some(base + ms(10)));
    let empty = store.queue_stats("a", Some("none"), later).await.unwrap();
    assert_eq!(
        empty,
        vec![QueueStats {
            name: "none".into(),
            available: 0,
            in_flight: 0,
            scheduled: 0,
            oldest_available: None,
        }]
    );
    assert_eq!(store.queue_stats("c", None, later).await.unwrap(), vec![]);
}

pub async fn update_can_move_a_job_between_target_kinds(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let mut spec = spec(Schedule::at(base));
    spec.target = Target::Queue(QueueTarget { name: "q".into() });
    store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                read_token: None,
                spec,
                payload: None,
                next_due: Some(base),
                now: base,
            },
            None,
        )
        .await
        .unwrap();
    assert!(
        claim(&*store, ClaimScope::Fired, base, 10, "n")
            .await
            .is_empty()
    );
    let leased = claim(&*store, queue("a", "q"), base, 10, "w").await;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].job_id, id);
}

pub async fn gauges_count_states_backlog_and_queues(store: Arc<dyn Store>) {
    let base = t(T0);
    let empty = store.gauges(base).await.unwrap();
    assert_eq!(
        empty.jobs_by_state,
        JobState::ALL.iter().map(|s| (*s, 0)).collect::<Vec<_>>(),
        "every state, at zero"
    );
    let late = one_off("a", base - ms(5_000));
    let claimed = one_off("b", base - ms(9_000));
    let future = one_off("a", base + ms(60_000));
    let cancelled = one_off("a", base + ms(60_000));
    let cancelled_id = cancelled.id;
    create(
        &*store,
        vec![
            late,
            claimed,
            future,
            cancelled,
            queue_job("a", "q", "x", base - ms(2_000)),
            queue_job("b", "r", "x", base - ms(1_000)),
            queue_job("a", "q", "x", base + ms(1_000)),
        ],
    )
    .await;
    store
        .transition(
            Some("a"),
            cancelled_id,
            Transition::Cancel { now: base },
            None,
        )
        .await
        .unwrap();
    // Claim the oldest fired occurrence and one queue message.
    let held = store
        .claim_due(ClaimScope::Fired, base - ms(9_000), 1, &lease("n", base))
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    claim(&*store, queue("b", "r"), base, 1, "w").await;

    let g = store.gauges(base).await.unwrap();
    let count = |state| g.jobs_by_state.iter().find(|(s, _)| *s == state).unwrap().1;
    assert_eq!(count(JobState::Active), 6);
    assert_eq!(count(JobState::Cancelled), 1);
    assert_eq!(count(JobState::Completed), 0);
    assert_eq!(
        (g.due_backlog, g.oldest_backlog),
        (1, Some(base - ms(5_000))),
        "only the unclaimed late occurrence"
    );
    assert_eq!(
        (g.queue_available, g.queue_in_flight, g.queue_scheduled),
        (1, 1, 1)
    );
    assert_eq!(g.oldest_queue_available, Some(base - ms(2_000)));
}

/// The ways a lease ends besides lapsing where it was set: an ack (never back), an extension to an
/// earlier expiry (back from then on, and the queue's next due time says so), and a lapsed message
/// that a type-filtered claimer may not take (it stays for one that may).
pub async fn a_shortened_lease_lapses_at_its_new_expiry_and_waits_for_its_type(
    store: Arc<dyn Store>,
) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "y", base),
        ],
    )
    .await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    assert_eq!(held.len(), 2);
    let of_type = |t: &str| {
        held.iter()
            .find(|o| o.spec.job_type.as_deref() == Some(t))
            .unwrap()
            .clone()
    };
    let (x, y) = (of_type("x"), of_type("y"));
    let ack = delivered(&y);
    assert_eq!(
        store.complete(vec![ack], base).await.unwrap(),
        vec![Applied::Yes]
    );
    let now = base + ms(1_000);
    let short = base + ms(5_000);
    assert_eq!(
        store
            .extend_claims(vec![x.claim()], short, now)
            .await
            .unwrap(),
        vec![Applied::Yes]
    );
    assert_eq!(
        store.next_due(queue("a", "q")).await.unwrap(),
        Some(short),
        "the shortened lease is the queue's next due time"
    );
    let before = short - ms(1);
    assert!(
        claim(&*store, queue("a", "q"), before, 10, "w2")
            .await
            .is_empty(),
        "still leased until its new expiry"
    );
    let only_y = vec!["y".to_string()];
    let y_scope = ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: Some(&only_y),
        max_bytes: None,
    };
    assert!(
        claim(&*store, y_scope, short, 10, "w2").await.is_empty(),
        "the lapsed x is not a y, and the acked y never comes back"
    );
    let stats = store.queue_stats("a", Some("q"), short).await.unwrap();
    assert_eq!(
        (stats[0].available, stats[0].in_flight, stats[0].scheduled),
        (1, 0, 0)
    );
    assert_eq!(stats[0].oldest_available, Some(short));
    let again = claim(&*store, queue("a", "q"), short, 10, "w3").await;
    assert_eq!(
        again.len(),
        1,
        "x is back at its new expiry, for a claimer of its type"
    );
    assert_eq!(again[0].job_id, x.job_id);
    assert_eq!(again[0].attempt, 2, "the lapsed lease was an attempt");
    let stats = store.queue_stats("a", Some("q"), short).await.unwrap();
    assert_eq!(
        (stats[0].available, stats[0].in_flight, stats[0].scheduled),
        (0, 1, 0)
    );
    // The lease taken again runs its full time, and lapses in turn.
    let soon = short + ms(1);
    assert!(
        claim(&*store, queue("a", "q"), soon, 10, "w4")
            .await
            .is_empty()
    );
    let expiry = short + ms(30_000);
    assert_eq!(store.next_due(queue("a", "q")).await.unwrap(), Some(expiry));
    let third = claim(&*store, queue("a", "q"), expiry, 10, "w4").await;
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].attempt, 3);
}

/// A leased queue message edited into a webhook job belongs to the engine from then on: once the
/// engine's claim on it lapses too, the old queue neither hands it out nor counts it.
pub async fn a_leased_message_moved_to_a_webhook_stays_off_its_old_queue(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = queue_job("a", "q", "send", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    assert_eq!(
        claim(&*store, queue("a", "q"), base, 10, "w").await.len(),
        1
    );
    store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                read_token: None,
                spec: spec(Schedule::at(base)),
                payload: None,
                next_due: Some(base),
                now: base,
            },
            None,
        )
        .await
        .unwrap();
    let fired = claim(&*store, ClaimScope::Fired, base, 10, "n").await;
    assert_eq!(fired.iter().map(|o| o.job_id).collect::<Vec<_>>(), [id]);

    // Both leases (30 s) have run out.
    let later = base + ms(31_000);
    assert!(
        claim(&*store, queue("a", "q"), later, 10, "w")
            .await
            .is_empty(),
        "the old queue handed out a webhook job"
    );
    let stats = store.queue_stats("a", Some("q"), later).await.unwrap();
    assert!(
        stats.iter().all(|q| q.available == 0 && q.in_flight == 0),
        "the old queue still counts it: {stats:?}"
    );
    let again = claim(&*store, ClaimScope::Fired, later, 10, "n").await;
    assert_eq!(again.iter().map(|o| o.job_id).collect::<Vec<_>>(), [id]);
}

/// A queue's messages are listed by filtering jobs on their queue: the active jobs targeting it,
/// in id order, a page at a time; a leased one says when its lease lapses.
pub async fn a_queue_lists_its_messages_with_their_leases(store: Arc<dyn Store>) {
    let base = t(T0);
    let (now_1, now_2) = (
        queue_job("a", "emails", "send", base),
        queue_job("a", "emails", "send", base),
    );
    let later = queue_job("a", "emails", "send", base + ms(3_600_000));
    let paused = queue_job("a", "emails", "send", base);
    let other = queue_job("a", "other", "send", base);
    let elsewhere = queue_job("b", "emails", "send", base);
    let hook = one_off("a", base);
    let later_id = later.id;
    let mut messages = vec![now_1.id, now_2.id, later_id];
    messages.sort();
    let (paused_id, other_id, elsewhere_id, hook_id) = (paused.id, other.id, elsewhere.id, hook.id);
    create(
        &*store,
        vec![now_1, now_2, later, paused, other, elsewhere, hook],
    )
    .await;
    store
        .transition(Some("a"), paused_id, Transition::Pause { now: base }, None)
        .await
        .unwrap();
    let list = |namespace: Option<&str>, name: &str, state, after, limit| {
        let store = store.clone();
        let query = JobQuery {
            namespace: namespace.map(Into::into),
            state,
            queue: Some(name.into()),
            after,
            limit,
            ..Default::default()
        };
        async move { store.list_jobs(query).await.unwrap() }
    };
    let ids = |jobs: &[JobRecord]| jobs.iter().map(|j| j.id).collect::<Vec<_>>();

    let active = Some(JobState::Active);
    let listed = list(Some("a"), "emails", active, None, 100).await;
    assert_eq!(ids(&listed), messages, "the queue's active jobs, by id");
    assert!(
        listed.iter().all(|j| j.leased_until.is_none()),
        "none leased"
    );
    let mut any_state = ids(&list(Some("a"), "emails", None, None, 100).await);
    any_state.sort();
    let mut with_paused = [messages.clone(), vec![paused_id]].concat();
    with_paused.sort();
    assert_eq!(
        any_state, with_paused,
        "without a state filter, the paused one too"
    );
    assert_eq!(
        ids(&list(Some("a"), "other", None, None, 100).await),
        [other_id]
    );
    assert!(list(Some("a"), "none", None, None, 100).await.is_empty());
    let mut everywhere = ids(&list(None, "emails", active, None, 100).await);
    everywhere.sort();
    let mut expected = [messages.clone(), vec![elsewhere_id]].concat();
    expected.sort();
    assert_eq!(
        everywhere, expected,
        "across namespaces: each one's queue of that name"
    );
    assert!(
        !ids(&list(Some("a"), "emails", None, None, 100).await).contains(&hook_id),
        "a webhook job is on no queue"
    );

    // Pages: the second starts after the first one's last id.
    let first = list(Some("a"), "emails", active, None, 2).await;
    let rest = list(Some("a"), "emails", active, first.last().map(|j| j.id), 2).await;
    assert_eq!([ids(&first), ids(&rest)].concat(), messages);

    // A lease shows its expiry, and moves it when extended; an unleased message its fire time.
    let held = claim(&*store, queue("a", "emails"), base, 1, "w")
        .await
        .remove(0);
    let find = |jobs: Vec<JobRecord>, id| jobs.into_iter().find(|j| j.id == id).expect("listed");
    let leased = find(
        list(Some("a"), "emails", active, None, 100).await,
        held.job_id,
    );
    assert_eq!(
        (leased.leased_until, leased.next_attempt),
        (Some(base + ms(30_000)), None)
    );
    let got = store
        .get_job(Some("a"), held.job_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got.leased_until,
        Some(base + ms(30_000)),
        "get answers it too"
    );
    let waiting = find(list(Some("a"), "emails", active, None, 100).await, later_id);
    assert_eq!(
        (waiting.leased_until, waiting.next_attempt),
        (None, Some(base + ms(3_600_000)))
    );
    store
        .extend_claims(vec![held.claim()], base + ms(90_000), base)
        .await
        .unwrap();
    let extended = store.get_job(None, held.job_id).await.unwrap().unwrap();
    assert_eq!(extended.leased_until, Some(base + ms(90_000)));

    // Acked, the message is done: no longer among the active ones, no lease.
    store
        .complete(vec![delivered(&held)], base + ms(1_000))
        .await
        .unwrap();
    let after_ack = list(Some("a"), "emails", active, None, 100).await;
    assert!(!ids(&after_ack).contains(&held.job_id));
    let acked = store.get_job(None, held.job_id).await.unwrap().unwrap();
    assert_eq!(
        (acked.state, acked.leased_until),
        (JobState::Completed, None)
    );

    // A job moved to the queue by an edit is listed there, and gone from its old queue.
    let moved = store.get_job(None, other_id).await.unwrap().unwrap();
    let mut spec = moved.spec.clone();
    spec.target = Target::Queue(QueueTarget {
        name: "emails".into(),
    });
    store
        .update_job(
            Some("a"),
            other_id,
            JobUpdate {
                read_token: None,
                spec,
                payload: moved.payload.clone(),
                next_due: Some(base),
                now: base,
            },
            None,
        )
        .await
        .unwrap();
    assert!(ids(&list(Some("a"), "emails", active, None, 100).await).contains(&other_id));
    assert!(list(Some("a"), "other", None, None, 100).await.is_empty());
}

/// Leasing many messages (on SQLite, in one lease), some whose earlier lease lapsed and some never
/// leased: each is leased once, a lapsed one counts the lapse as an attempt and a fresh one does
/// not (also after both lapse again), and only the newest lease's receipts complete them.
pub async fn a_large_lease_mixes_lapsed_and_fresh_messages(store: Arc<dyn Store>) {
    let base = t(T0);
    let n = 150;
    create(
        &*store,
        (0..n).map(|_| queue_job("a", "q", "x", base)).collect(),
    )
    .await;
    let first = claim(&*store, queue("a", "q"), base, 41, "w1").await;
    assert_eq!(first.len(), 41);
    let lapsed: std::collections::HashSet<_> = first.iter().map(|o| o.job_id).collect();

    // A store may hand out fewer than asked in one lease (DynamoDB's can); what must hold is
    // that leasing until nothing is left gives every message once.
    let lease_all = |at, owner| {
        let store = store.clone();
        async move {
            let mut all = Vec::new();
            for _ in 0..20 {
                let got = claim(&*store, queue("a", "q"), at, 500, owner).await;
                if got.is_empty() {
                    break;
                }
                all.extend(got);
            }
            all
        }
    };
    let at = base + ms(30_000);
    let second = lease_all(at, "w2").await;
    assert_eq!(
        second.len(),
        n,
        "every message once: {} leased",
        second.len()
    );
    let ids: std::collections::HashSet<_> = second.iter().map(|o| o.job_id).collect();
    assert_eq!(ids.len(), n, "no message twice");
    for o in &second {
        let want = if lapsed.contains(&o.job_id) { 2 } else { 1 };
        assert_eq!(o.attempt, want, "{}: attempt", o.job_id);
    }

    // Both kinds lapse again: the attempts the second lease recorded are kept.
    let third = lease_all(at + ms(30_000), "w3").await;
    assert_eq!(third.len(), n);
    for o in &third {
        let want = if lapsed.contains(&o.job_id) { 3 } else { 2 };
        assert_eq!(
            o.attempt, want,
            "{}: attempt after a second lapse",
            o.job_id
        );
    }

    let stale: Vec<_> = second.iter().take(70).map(delivered).collect();
    assert!(
        store
            .complete(stale, at + ms(30_001))
            .await
            .unwrap()
            .iter()
            .all(|a| *a == Applied::StaleLease),
        "the lapsed second lease completes nothing"
    );
    let acks: Vec<_> = third.iter().map(delivered).collect();
    assert!(
        store
            .complete(acks, at + ms(30_001))
            .await
            .unwrap()
            .iter()
            .all(|a| *a == Applied::Yes)
    );
    assert!(
        claim(&*store, queue("a", "q"), at + ms(600_000), 500, "w4")
            .await
            .is_empty(),
        "acked messages never come back"
    );
}
