//! Reminders on a moving anchor through a real node (issue 38): 1,000 one-offs relative to one
//! anchor, which is moved twice while they fire. Each third of them falls due in its own stretch
//! of the run: the first before the first move (and keeps its time), the second between the
//! moves (fired at the time the first move gave it), the last after both. The receiver checks
//! that every reminder fired exactly once, at its final due time, and none at a time a move
//! replaced. The stretches leave a margin of a second and a half around each move, so a move
//! never races a delivery that is already on the wire (such a delivery would be fenced
//! afterwards and fire again at its new time: at least once, as the README says).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{NodeOptions, Nodes, Receiver, now_ms, rfc3339_ms, sleep_until_ms};

const REMINDERS: i64 = 1_000;
/// A third of them each: before, between and after the moves.
const GROUPS: i64 = 3;
/// The seconds between one stretch and the next move, and around each stretch of due times.
const MARGIN_MS: i64 = 1_500;
/// Each stretch's due times spread over this much.
const SPREAD_MS: i64 = 1_000;
/// How far each move moves the anchor (later): one stretch and its margins, so the moved
/// stretches keep their gaps around the next move.
const MOVE_MS: i64 = SPREAD_MS + 2 * MARGIN_MS;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminders_fire_once_at_their_final_times_across_two_moves() {
    let nodes = Nodes::default();
    let server = nodes.start(&NodeOptions::embedded("node")).await;
    let hooks = Receiver::start().await;
    let api = &server.api;
    // The timeline, from t0: stretch g (of group g) starts at t0 + MARGIN + g * step on the
    // original anchor; a move happens in the middle of the gap after the stretch due before it
    // and shifts the later stretches by one step.
    let t0 = now_ms() + 2_000;
    let step = SPREAD_MS + 2 * MARGIN_MS;
    let anchor_at = t0 + GROUPS * step;
    let (status, created) = api
        .call(
            "PUT",
            "/v1/anchors/flight-LH400",
            Some(json!({"at": rfc3339_ms(anchor_at)})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    // Reminder i: group g = i % 3, its offset puts it in stretch g of the original timeline.
    let offset_of = |i: i64| {
        let g = i % GROUPS;
        let within = (i / GROUPS) * SPREAD_MS / (REMINDERS / GROUPS + 1);
        (MARGIN_MS + g * step + within) - GROUPS * step
    };
    let jobs: Vec<Value> = (0..REMINDERS)
        .map(|i| {
            json!({
                "key": format!("reminder-{i}"),
                "schedule": {"anchor": "flight-LH400", "offset": format!("{}ms", offset_of(i))},
                "target": {"webhook": {"url": hooks.url("/ok")}},
            })
        })
        .collect();
    let (status, answer) = api
        .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
        .await;
    assert_eq!(status, 201, "{answer}");
    let ids: BTreeMap<String, i64> = (answer["jobs"].as_array().unwrap().iter())
        .map(|j| {
            (
                j["id"].as_str().unwrap().to_owned(),
                j["key"].as_str().unwrap()[9..].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids.len() as i64, REMINDERS);
    assert!(
        now_ms() < t0 + MARGIN_MS,
        "created after the first stretch began"
    );

    // The anchor moves twice, each time in the gap after the stretch then due: group 0 keeps its
    // times, group 1 takes the first move's, group 2 both.
    let per_group = |g: i64| (0..REMINDERS).filter(|i| i % GROUPS == g).count() as i64;
    let mut anchor = anchor_at;
    let mut moved_counts = vec![];
    for done_group in 0..GROUPS - 1 {
        // The stretch of `done_group` (on the timeline as moved so far) ends MARGIN before the
        // move; the next one starts MARGIN after it.
        let shift = anchor - anchor_at;
        let move_at = t0 + MARGIN_MS + done_group * step + SPREAD_MS + MARGIN_MS + shift;
        hooks
            .wait_for(Duration::from_secs(30), "the stretch before a move", |d| {
                d.len() as i64 >= (0..=done_group).map(per_group).sum::<i64>()
            })
            .await;
        sleep_until_ms(move_at).await;
        anchor += MOVE_MS;
        let (status, moved) = api
            .call(
                "PUT",
                "/v1/anchors/flight-LH400",
                Some(json!({"at": rfc3339_ms(anchor)})),
            )
            .await;
        assert_eq!(status, 200, "{moved}");
        moved_counts.push(moved["jobs_moved"].as_i64().unwrap());
        assert!(
            now_ms() < move_at + MARGIN_MS,
            "the move took longer than the margin: the timeline no longer holds"
        );
    }
    // Every reminder not yet fired at a move moved with it.
    assert_eq!(
        moved_counts,
        vec![per_group(1) + per_group(2), per_group(2)]
    );
    let delivered = hooks
        .wait_for(Duration::from_secs(60), "every reminder", |d| {
            d.len() as i64 >= REMINDERS
        })
        .await;
    // A little longer, for any duplicate or old-time fire to show up.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = if hooks.count() > delivered.len() {
        hooks.deliveries()
    } else {
        delivered
    };
    let mut fires: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for d in &delivered {
        let i = *ids.get(d.job_id()).expect("a reminder's delivery");
        fires.entry(i).or_default().push(d.due_ms());
    }
    for i in 0..REMINDERS {
        let g = i % GROUPS;
        let final_anchor = anchor_at + g * MOVE_MS;
        let expected = final_anchor + offset_of(i);
        assert_eq!(
            fires.get(&i),
            Some(&vec![expected]),
            "reminder {i} (group {g}) fired at {:?}, expected once at {} (anchor moved by {} ms)",
            fires
                .get(&i)
                .map(|v| v.iter().map(|ms| rfc3339_ms(*ms)).collect::<Vec<_>>()),
            rfc3339_ms(expected),
            g * MOVE_MS
        );
    }
    assert_eq!(delivered.len() as i64, REMINDERS, "no reminder fired twice");
    let (_, listed) = api
        .call("GET", "/v1/jobs?anchor=flight-LH400&limit=1000", None)
        .await;
    let jobs = listed["jobs"].as_array().unwrap();
    assert_eq!(jobs.len() as i64, REMINDERS);
    assert!(
        jobs.iter()
            .all(|j| j["state"] == "completed" && j["runs"] == 1),
        "{listed}"
    );
}
