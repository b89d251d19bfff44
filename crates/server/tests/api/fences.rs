//! A change to a job reaches its occurrence wherever it waits on the node: here, behind a webhook
//! target's `rate_limit`, with a receiver that deduplicates by `webhook-id` as README tells
//! receivers to.

use std::collections::HashMap;
use std::time::Duration;

use crate::support::{Api, Delivery, Receiver, start_node};
use serde_json::json;

/// Regression (issue 39): occurrences waiting for their turn under a `rate_limit` were sent when
/// the wait ended: a cancelled job was delivered, and an edited one twice under the same
/// `webhook-id`, the old payload first, so a deduplicating receiver kept the old version. Six
/// one-offs due together go out one a second; of those still waiting after the first arrived, one
/// is edited and one cancelled. The receiver, keeping the first delivery of each `webhook-id`,
/// must end with the edited job's new payload, and never see the cancelled one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_and_a_cancel_reach_occurrences_waiting_behind_a_rate_limit() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let mut ids = Vec::new();
    for i in 0..6 {
        let job = api
            .create(json!({
                "schedule": {"after": "1s"},
                "target": {"webhook": {"url": format!("http://{recv_addr}/hook/{i}"), "rate_limit": 1}},
                "payload": {"v": 1},
            }))
            .await;
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    let path_of = |i: usize| format!("/hook/{i}");
    receiver
        .wait_for(Duration::from_secs(30), "the first delivery", |d| {
            !d.is_empty()
        })
        .await;
    let waiting: Vec<usize> = (0..6)
        .filter(|&i| receiver.on_path(&path_of(i)).is_empty())
        .collect();
    assert!(
        waiting.len() >= 3,
        "{} already delivered",
        6 - waiting.len()
    );
    let (edited, cancelled) = (waiting[waiting.len() - 1], waiting[waiting.len() - 2]);
    let (status, body) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{}", ids[edited]),
            Some(json!({"payload": {"v": 2}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api
        .call("DELETE", &format!("/v1/jobs/{}", ids[cancelled]), None)
        .await;
    assert!(status == 200 || status == 204, "{status} {body}");
    assert!(
        receiver.on_path(&path_of(edited)).is_empty()
            && receiver.on_path(&path_of(cancelled)).is_empty(),
        "delivered before the changes landed: the machine is too slow for this test's one-second spacing"
    );
    // The other four, and the edited job once more (its edit moved its claim, so it waits for a
    // later turn), all arrive.
    receiver
        .wait_for(Duration::from_secs(30), "five jobs delivered", |d| {
            d.iter()
                .map(|d| d.path.as_str())
                .collect::<std::collections::HashSet<_>>()
                .len()
                == 5
        })
        .await;
    // Time for anything wrongly held back to arrive: at one a second, the last turn is 5 s after
    // the first.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let deliveries = receiver.deliveries();
    assert!(
        receiver.on_path(&path_of(cancelled)).is_empty(),
        "the cancelled job was delivered"
    );
    let mut first_by_id: HashMap<String, &Delivery> = HashMap::new();
    for d in &deliveries {
        first_by_id
            .entry(d.header("webhook-id").to_string())
            .or_insert(d);
    }
    let edited_deliveries = receiver.on_path(&path_of(edited));
    assert_eq!(edited_deliveries.len(), 1, "the edited job was sent twice");
    let kept = first_by_id[edited_deliveries[0].header("webhook-id")];
    assert_eq!(
        kept.json(),
        json!({"v": 2}),
        "the receiver kept the old version"
    );
}
