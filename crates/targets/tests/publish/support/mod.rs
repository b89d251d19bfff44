//! What the publish tests share: the servers (started by `scripts/with-buses`, named by
//! `HOURGLASS_TEST_*` variables), occurrences to publish, and a router over one connection.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{JobSpec, Occurrence, Schedule, ScheduleKind, Target};
use hourglass_engine::{ClaimCheck, Deliverer, DeliveryResult, Verdict};
use hourglass_targets::{ConnectionConfig, Connections, Router};

/// The address of a test server, which `scripts/with-buses` starts (as `scripts/test` does).
pub fn server(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests with scripts/test (or scripts/with-buses cargo test)"
        )
    })
}

/// A name no other test (or earlier run against the same server) uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::now_v7().simple())
}

pub fn occurrence(target: Target, payload: &str, attempt: u32) -> Occurrence {
    let due = jiff::Timestamp::from_millisecond(1_795_507_880_656).unwrap();
    Occurrence {
        job_id: uuid::Uuid::now_v7(),
        namespace: Arc::from("acme"),
        due,
        fire_at: due,
        attempt,
        token: hourglass_core::FencingToken::from_i64(1),
        runs_done: 0,
        spec: Arc::new(JobSpec {
            job_type: Some("reminder.flight".into()),
            schedule: Schedule {
                kind: ScheduleKind::At(due),
                start: None,
                end: None,
                max_runs: None,
                jitter: None,
                calendar: None,
                anchor: None,
            },
            target,
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
        }),
        payload: Some(Arc::from(payload)),
        lapsed_owner: None,
    }
}

/// The same occurrence, attempted again.
pub fn again(occ: &Occurrence) -> Occurrence {
    let mut next = occ.clone();
    next.attempt += 1;
    next
}

/// Webhooks are not what these tests send.
struct NoWebhooks;

#[async_trait]
impl Deliverer for NoWebhooks {
    async fn deliver(&self, _: &Occurrence, _: &ClaimCheck) -> DeliveryResult {
        unreachable!("the publish tests send no webhooks")
    }
}

pub async fn router(connections: Vec<(&str, serde_json::Value)>) -> Router {
    let by_name: BTreeMap<String, ConnectionConfig> = connections
        .into_iter()
        .map(|(name, json)| (name.to_string(), serde_json::from_value(json).unwrap()))
        .collect();
    let mut registry = prometheus_client::registry::Registry::default();
    Router::open(
        Connections::new(by_name).unwrap(),
        Arc::new(NoWebhooks),
        Duration::from_secs(5),
        &mut registry,
    )
    .await
    .unwrap()
}

pub async fn publish(router: &Router, occ: &Occurrence) -> Verdict {
    router.deliver(occ, &ClaimCheck::unchecked()).await.verdict
}

pub fn assert_retry(verdict: &Verdict, contains: &str) {
    match verdict {
        Verdict::Retry { reason, .. } => {
            assert!(
                reason.contains(contains),
                "retry reason {reason:?} lacks {contains:?}"
            )
        }
        other => panic!("expected a retry ({contains}), got {other:?}"),
    }
}

pub fn assert_give_up(verdict: &Verdict, contains: &str) {
    match verdict {
        Verdict::GiveUp { reason } => {
            assert!(
                reason.contains(contains),
                "give-up reason {reason:?} lacks {contains:?}"
            )
        }
        other => panic!("expected a permanent failure ({contains}), got {other:?}"),
    }
}

/// A loopback port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
