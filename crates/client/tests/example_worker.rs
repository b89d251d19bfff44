//! The example worker (`examples/worker.rs`) as a separate process against a real node: every
//! queue job created through the client is handled once and acked, a recurring job moves on to
//! its next occurrence after each ack, and the worker exits by itself after the expected count.
//!
//! Cargo builds examples before running a package's tests (`cargo test -p hourglass-client`);
//! with a narrower selection such as `--test example_worker`, build it first with
//! `cargo build -p hourglass-client --example worker`.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use hourglass_client::{JobState, NewJob, Schedule, Target};
use serde_json::json;

fn example_binary() -> PathBuf {
    // This test runs from <target>/debug/deps/; examples land in <target>/debug/examples/.
    let deps = std::env::current_exe().unwrap();
    let path = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("the test binary sits in <target>/<profile>/deps")
        .join("examples")
        .join("worker");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p hourglass-client` (which builds examples) or \
         `cargo build -p hourglass-client --example worker` first",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_worker_handles_and_acks_every_job_once() {
    let t = common::start_node().await;
    let client = &t.client;
    let queue = "example-emails";
    let now = jiff::Timestamp::now();

    let mut one_offs = Vec::new();
    for i in 0..12 {
        let job = NewJob::new(Schedule::at(now), Target::queue(queue))
            .job_type("email.send")
            .payload(json!({"to": format!("user{i}@example.com"), "subject": "hello"}));
        one_offs.push(client.create_job(&job).await.unwrap().id);
    }
    for i in 0..8 {
        let job = NewJob::new(Schedule::at(now), Target::queue(queue))
            .job_type("report.build")
            .payload(json!({ "report_id": i }));
        one_offs.push(client.create_job(&job).await.unwrap().id);
    }
    // Two occurrences, a second apart: the second exists only once the first was acked.
    let recurring = client
        .create_job(
            &NewJob::new(
                Schedule::every(Duration::from_secs(1)).max_runs(2),
                Target::queue(queue),
            )
            .job_type("email.send")
            .payload(json!({"to": "digest@example.com", "subject": "digest"})),
        )
        .await
        .unwrap()
        .id;
    let expected = one_offs.len() + 2;

    let child = tokio::process::Command::new(example_binary())
        .env("HOURGLASS_URL", client.base_url().as_str())
        .env("HOURGLASS_QUEUE", queue)
        .env("WORKER_MAX_JOBS", expected.to_string())
        .env("WORKER_CONCURRENCY", "4")
        .env_remove("HOURGLASS_API_KEY")
        .env_remove("HOURGLASS_NAMESPACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the example stops by itself after the expected count")
        .unwrap();
    assert!(
        output.status.success(),
        "the example exited with {}",
        output.status
    );

    // `processed <type> <job id> <delivery id> attempt=<n>`
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut deliveries_by_job: HashMap<uuid::Uuid, Vec<String>> = HashMap::new();
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields.first(),
            Some(&"processed"),
            "unexpected line {line:?}"
        );
        let job: uuid::Uuid = fields[2].parse().unwrap();
        deliveries_by_job
            .entry(job)
            .or_default()
            .push(fields[3].to_owned());
    }
    for id in &one_offs {
        assert_eq!(
            deliveries_by_job.get(id).map(Vec::len),
            Some(1),
            "job {id} handled once"
        );
    }
    let occurrences = &deliveries_by_job[&recurring];
    assert_eq!(occurrences.len(), 2, "two occurrences of the recurring job");
    assert_ne!(occurrences[0], occurrences[1], "distinct occurrences");
    assert_eq!(
        deliveries_by_job.len(),
        one_offs.len() + 1,
        "nothing else was handled"
    );

    // Acked, not just handled: every job is completed and the queue is empty.
    for id in one_offs.iter().chain([&recurring]) {
        let job = client.get_job(*id).await.unwrap();
        assert_eq!(job.state, JobState::Completed, "job {id}");
    }
    let stats = client.queue_stats(queue).await.unwrap();
    assert_eq!(
        (stats.available, stats.in_flight, stats.scheduled),
        (0, 0, 0)
    );
    t.stop().await;
}
