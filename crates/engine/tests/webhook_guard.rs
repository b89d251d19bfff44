//! The webhook deliverer refuses forbidden addresses at connect time: IP literals before sending,
//! hostnames in the resolver. Either way nothing reaches the address and the failure is permanent.

#![allow(
    clippy::disallowed_methods,
    reason = "occurrences for a real webhook round trip, due now by the wall clock"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hourglass_core::{JobSpec, Occurrence, Schedule, Target, WebhookTarget};
use hourglass_engine::{
    ClaimCheck, Deliverer, Metrics, Secrets, TargetPolicy, Verdict, WebhookDeliverer,
};
use hourglass_store::SqliteStore;

fn occurrence(url: &str) -> Occurrence {
    let due = jiff::Timestamp::now();
    Occurrence {
        job_id: uuid::Uuid::now_v7(),
        namespace: "t".into(),
        due,
        fire_at: due,
        attempt: 1,
        token: hourglass_core::FencingToken::from_i64(1),
        runs_done: 0,
        spec: Arc::new(JobSpec {
            job_type: None,
            schedule: Schedule::at(due),
            target: Target::Webhook(WebhookTarget {
                url: url.parse().unwrap(),
                headers: Default::default(),
                rate_limit: None,
                batch: None,
            }),
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
        payload: None,
        lapsed_owner: None,
    }
}

/// A listener that counts accepted connections.
async fn counting_listener() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn forbidden_addresses_are_never_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let clock: Arc<dyn hourglass_core::Clock> = Arc::new(hourglass_core::SystemClock);
    let deliverer = WebhookDeliverer::new(
        Secrets::new(store, clock.clone()),
        clock,
        TargetPolicy::default(),
        Duration::from_secs(2),
        16,
        &Metrics::new(&mut Default::default()),
    )
    .unwrap();
    let (addr, accepted) = counting_listener().await;

    let literal = deliverer
        .deliver(
            &occurrence(&format!("http://127.0.0.1:{}/x", addr.port())),
            &ClaimCheck::unchecked(),
        )
        .await;
    assert!(
        matches!(&literal.verdict, Verdict::GiveUp { reason } if reason.contains("forbidden")),
        "{:?}",
        literal.verdict
    );

    // `localhost` goes through the resolver, which drops loopback addresses.
    let named = deliverer
        .deliver(
            &occurrence(&format!("http://localhost:{}/x", addr.port())),
            &ClaimCheck::unchecked(),
        )
        .await;
    assert!(
        matches!(&named.verdict, Verdict::GiveUp { reason } if reason.contains("forbidden")),
        "{:?}",
        named.verdict
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection was made");
}

#[tokio::test]
async fn allowlisted_ranges_are_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let clock: Arc<dyn hourglass_core::Clock> = Arc::new(hourglass_core::SystemClock);
    let deliverer = WebhookDeliverer::new(
        Secrets::new(store, clock.clone()),
        clock,
        TargetPolicy::new(vec!["127.0.0.0/8".parse().unwrap()]),
        Duration::from_secs(1),
        16,
        &Metrics::new(&mut Default::default()),
    )
    .unwrap();
    let (addr, accepted) = counting_listener().await;
    // The listener drops each connection at once, so the attempt fails: a transient failure.
    let result = deliverer
        .deliver(
            &occurrence(&format!("http://localhost:{}/x", addr.port())),
            &ClaimCheck::unchecked(),
        )
        .await;
    assert!(
        matches!(result.verdict, Verdict::Retry { .. }),
        "{:?}",
        result.verdict
    );
    assert!(accepted.load(Ordering::SeqCst) >= 1);
}
