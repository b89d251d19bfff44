//! Dead-letter replays against the namespace's quotas: a replay stores a new job, so it is
//! admitted like a create (issue 39, item 11: replays used to grow a `max_jobs = 3` namespace
//! without bound and ignored `creates_per_second`). A refused replay changes nothing: the dead
//! letter stays and no job is added.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{Api, PATIENCE, Receiver, start_node_with, test_config};
use hourglass_server::quotas::{NamespaceQuota, Quotas};
use serde_json::{Value, json};

/// A one-off due in 100 ms to a receiver path that answers 410, which dead-letters it at once.
fn gone_job(receiver: SocketAddr) -> Value {
    json!({
        "schedule": {"after": "100ms"},
        "target": {"webhook": {"url": format!("http://{receiver}/status/410")}},
        "payload": {"n": 1},
    })
}

/// The namespace's dead letters once there are at least `n`; panics after [`PATIENCE`].
async fn dead_letters(api: &Api, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, page) = api.call("GET", "/v1/dead-letters?limit=100", None).await;
        assert_eq!(status, 200, "{page}");
        let letters = page["dead_letters"].as_array().unwrap().clone();
        if letters.len() >= n {
            return letters;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} dead letters after {PATIENCE:?}",
            letters.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replays one letter; the status, the `Retry-After` header if any, and the body.
async fn replay(node: SocketAddr, letter: &Value) -> (u16, Option<u64>, Value) {
    let id = letter["id"].as_str().unwrap();
    let response = reqwest::Client::new()
        .post(format!("http://{node}/v1/dead-letters/{id}/replay"))
        // Every write names its JSON body, empty or not (see `browser_guard.rs`).
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, retry_after, response.json().await.unwrap())
}

async fn stored_jobs(api: &Api) -> usize {
    let (status, list) = api.call("GET", "/v1/jobs?limit=100", None).await;
    assert_eq!(status, 200, "{list}");
    list["jobs"].as_array().unwrap().len()
}

fn quota(quota: NamespaceQuota) -> Quotas {
    Quotas {
        default: quota,
        namespaces: Default::default(),
    }
}

/// With `max_jobs = 4` and three stored jobs, one replay fits and the next is refused with
/// `429 quota_exceeded` and `Retry-After`, as a create would be; the refused letters stay and the
/// namespace holds 4 jobs however often replay is tried.
#[tokio::test]
async fn a_replay_counts_against_max_jobs_and_a_refused_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.quotas = quota(NamespaceQuota {
        max_jobs: Some(4),
        ..NamespaceQuota::default()
    });
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    for _ in 0..3 {
        api.create(gone_job(recv_addr)).await;
    }
    let letters = dead_letters(&api, 3).await;

    let (status, _, body) = replay(node.addr(), &letters[0]).await;
    assert_eq!(status, 201, "the fourth job fits: {body}");
    for letter in &letters[1..] {
        for _ in 0..3 {
            let (status, retry_after, body) = replay(node.addr(), letter).await;
            assert_eq!(status, 429, "past max_jobs: {body}");
            assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
            assert!(retry_after.is_some_and(|s| s >= 1), "{retry_after:?}");
        }
    }
    assert_eq!(stored_jobs(&api).await, 4, "refused replays stored nothing");
    let (_, page) = api.call("GET", "/v1/dead-letters?limit=100", None).await;
    let left: Vec<&Value> = page["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| &l["id"])
        .collect();
    for letter in &letters[1..] {
        assert!(
            left.contains(&&letter["id"]),
            "refused letter {} was removed: {page}",
            letter["id"]
        );
    }
    let (status, _) = api
        .call(
            "GET",
            &format!("/v1/dead-letters/{}", letters[0]["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(status, 404, "the admitted replay removed its letter");
    node.shutdown().await;
}

/// A namespace past its `creates_per_second` gets `429 rate_limited` with `Retry-After` for a
/// replay too, and the letter stays. The quota is 1 a second and a batch of 10 puts the namespace
/// about 10 s in debt, so the refusal does not depend on this machine's speed.
#[tokio::test]
async fn a_replay_counts_against_creates_per_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.quotas = quota(NamespaceQuota {
        creates_per_second: Some(1),
        ..NamespaceQuota::default()
    });
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    api.create(gone_job(recv_addr)).await;
    let letters = dead_letters(&api, 1).await;
    let queued = json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}});
    let (status, body) = api
        .call(
            "POST",
            "/v1/jobs/batch",
            Some(json!({"jobs": vec![queued; 10]})),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let (status, retry_after, body) = replay(node.addr(), &letters[0]).await;
    assert_eq!(status, 429, "past creates_per_second: {body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(
        retry_after.is_some_and(|s| (1..=10).contains(&s)),
        "{retry_after:?}"
    );
    assert_eq!(
        stored_jobs(&api).await,
        11,
        "the refused replay stored nothing"
    );
    let (status, letter) = api
        .call(
            "GET",
            &format!("/v1/dead-letters/{}", letters[0]["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(status, 200, "the refused letter stays: {letter}");
    node.shutdown().await;
}
