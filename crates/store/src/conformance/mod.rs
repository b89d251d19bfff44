//! The behaviour every [`Store`] backend must show, written once. A backend's test file expands
//! [`conformance_tests!`](crate::conformance_tests) with a factory that makes a fresh, empty store.

mod anchors;
mod audit;
mod audited;
mod calendars;
mod callbacks;
mod claims;
mod completions;
pub mod fixtures;
mod history;
mod jitter;
mod jobs;
mod labels;
mod lifecycle;
mod nodes;
mod overlap;
mod queues;

pub use self::anchors::*;
pub use self::audit::*;
pub use self::audited::*;
pub use self::calendars::*;
pub use self::callbacks::*;
pub use self::claims::*;
pub use self::completions::*;
pub use self::history::*;
pub use self::jitter::*;
pub use self::jobs::*;
pub use self::labels::*;
pub use self::lifecycle::*;
pub use self::nodes::*;
pub use self::overlap::*;
pub use self::queues::*;

use std::time::Duration;

use hourglass_core::{
    Action, AttemptRecord, Completion, JobSpec, Occurrence, QueueTarget, Schedule, ScheduleKind,
    Target, WebhookTarget,
};
use jiff::{SignedDuration, Timestamp};

use crate::{ClaimScope, Created, Lease, NewJob, Store};

/// Expands one `#[tokio::test]` per conformance case. `$factory` is an async closure returning
/// `(Arc<dyn Store>, guard)`; the guard (e.g. a temporary directory) lives as long as the test.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@cases $factory;
            create_then_get, idempotent_create_by_key, batch_is_all_or_nothing,
            a_job_is_found_by_its_key_in_its_namespace,
            claim_respects_horizon_order_and_limit, claims_are_exclusive_until_lease_expiry,
            a_live_lease_is_not_claimed_within_the_horizon, events_announce_due_work,
            stale_token_cannot_complete, a_completion_ends_its_claim, a_runs_response_is_kept,
            delivered_one_off_completes_with_run_history,
            recurring_advances_in_the_same_transaction,
            an_update_under_a_stale_reading_changes_nothing, retry_moves_fire_time_and_counts_attempts,
            dead_letters_are_recorded_listed_and_deleted, release_restores_fire_time,
            next_due_tracks_earliest_active, namespaces_are_isolated, pause_resume_cancel_trigger,
            update_replaces_spec_and_fences_claims, list_filters_and_paginates,
            signing_secret_round_trips, signing_secrets_are_replaced_only_over_what_was_read,
            queue_jobs_are_leased_not_fired,
            queue_lease_filters_by_type, lapsed_queue_lease_counts_an_attempt,
            a_queue_claim_stops_at_its_byte_budget,
            extend_moves_the_lease_under_its_token, queue_retry_counts_once,
            queue_stats_count_by_visibility, update_can_move_a_job_between_target_kinds,
            gauges_count_states_backlog_and_queues, purge_removes_only_old_finished_work,
            a_lapsed_claim_taken_again_keeps_its_fire_time,
            a_large_completion_batch_records_every_run,
            a_shortened_lease_lapses_at_its_new_expiry_and_waits_for_its_type,
            runs_page_newest_first_and_resume_after_a_cursor,
            old_dead_letters_are_purged_oldest_first,
            a_leased_message_moved_to_a_webhook_stays_off_its_old_queue,
            edits_and_transitions_answer_the_token_that_fences_older_claims,
            a_repeated_keyed_trigger_changes_nothing,
            a_dead_lettered_job_counts_its_last_attempt,
            a_queue_lists_its_messages_with_their_leases,
            a_job_keeps_the_error_of_its_latest_failed_attempt,
            a_large_lease_mixes_lapsed_and_fresh_messages,
            payloads_of_every_size_come_back_whole,
            a_jittered_job_keeps_its_jitter_and_fires_late,
            calendars_are_kept_per_namespace,
            moving_an_anchor_retimes_its_live_jobs_and_fences_their_claims,
            a_move_leaves_finished_jobs_and_a_past_time_fires_at_once,
            deleting_an_anchor_cancels_its_jobs_or_is_refused_while_used,
            a_create_rebases_on_the_anchor_as_stored,
            a_rolled_occurrence_fires_at_its_moved_time_named_by_its_due_time,
            overlap_skips_are_counted_and_recorded_as_a_skipped_run,
            a_backfill_is_kept_with_the_spec_and_claimable_at_once,
            nodes_are_listed_while_their_heartbeat_is_live,
            audit_entries_of_every_kind_page_newest_first,
            audit_entries_in_one_millisecond_page_without_loss,
            audit_logs_are_per_namespace_and_filter_by_job,
            old_audit_entries_are_purged_oldest_first,
            an_entry_commits_with_its_change_and_never_with_a_refusal,
            anchors_and_audit_entries_stay_apart,
            labels_round_trip_and_selectors_and_together,
            an_update_replaces_labels_and_the_index_follows,
            a_completion_creates_its_callback_job_with_it,
            a_refused_completion_creates_no_callback,
            a_callback_that_cannot_be_created_fails_its_completion,
            a_handed_off_occurrence_is_delivered_and_recorded_as_its_jobs,
            a_delivery_or_a_retry_creates_its_callback_for_a_queue);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (store, _guard) = ($factory)().await;
                $crate::conformance::$case(store).await;
            }
        )*
    };
}

fn t(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

const T0: &str = "2030-01-01T00:00:00Z";

fn ms(n: i64) -> SignedDuration {
    SignedDuration::from_millis(n)
}

fn webhook() -> Target {
    Target::Webhook(WebhookTarget {
        url: "https://example.com/hook".parse().expect("url"),
        headers: Default::default(),
        rate_limit: None,
        batch: None,
    })
}

fn spec(schedule: Schedule) -> JobSpec {
    JobSpec {
        job_type: Some("test".into()),
        schedule,
        target: webhook(),
        retry: Default::default(),
        misfire: Default::default(),
        overlap: Default::default(),
        backfill: None,
        labels: Default::default(),
        on_failure: None,
        on_success: None,
        callback_of: None,
        callback_key: None,
        occurrence_of: None,
    }
}

fn one_off(namespace: &str, due: Timestamp) -> NewJob {
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: namespace.into(),
        key: None,
        spec: spec(Schedule::at(due)),
        payload: Some(r#"{"n":1}"#.into()),
        fingerprint: 1,
        first_due: due,
        now: t(T0),
    }
}

fn every_second(namespace: &str, anchor: Timestamp) -> NewJob {
    let mut job = one_off(namespace, anchor);
    job.spec = spec(Schedule::unbounded(ScheduleKind::Every {
        interval: Duration::from_secs(1),
        anchor,
    }));
    job
}

fn lease(owner: &str, now: Timestamp) -> Lease {
    Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(30),
        now,
    }
}

/// Claims up to `limit` occurrences of `scope` due by `at`, as `owner` with the clock at `at`.
async fn claim(
    store: &dyn Store,
    scope: ClaimScope<'_>,
    at: Timestamp,
    limit: usize,
    owner: &str,
) -> Vec<Occurrence> {
    store
        .claim_due(scope, at, limit, &lease(owner, at))
        .await
        .expect("claim")
}

fn attempt(n: u32, at: Timestamp) -> Option<AttemptRecord> {
    Some(AttemptRecord {
        attempt: n,
        started_at: at,
        latency_ms: 3,
        status: Some(200),
        error: None,
        response: None,
    })
}

/// The completion of a one-off's first delivery.
fn delivered(occ: &Occurrence) -> Completion {
    done(
        occ,
        Action::Delivered {
            next: None,
            skipped: 0,
        },
    )
}

fn done(occ: &Occurrence, action: Action) -> Completion {
    Completion::of(occ, attempt(occ.attempt, occ.fire_at), action, None)
}

async fn create(store: &dyn Store, jobs: Vec<NewJob>) -> Vec<Created> {
    store.create_jobs(jobs, None).await.expect("create")
}

fn queue_job(namespace: &str, queue: &str, job_type: &str, due: Timestamp) -> NewJob {
    let mut job = one_off(namespace, due);
    job.spec.target = Target::Queue(QueueTarget { name: queue.into() });
    job.spec.job_type = Some(job_type.into());
    job
}

fn queue<'a>(namespace: &'a str, name: &'a str) -> ClaimScope<'a> {
    ClaimScope::Queue {
        namespace,
        queue: name,
        types: None,
        max_bytes: None,
    }
}
