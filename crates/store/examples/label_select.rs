//! A label selector's cost on the embedded store: create `n` jobs in one namespace (plus as many
//! in another, so the index is shared), each labelled with one of 100 tenants, one of 4 kinds,
//! and one job in 1,000 with a `vip` label; then time listings by selector, each the first page
//! of 100 and a page from a cursor in the middle. Prints the median of 50 runs of each:
//!
//! ```sh
//! cargo run --release -p hourglass-store --features sqlite --example label_select -- 100000
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a measuring tool: its jobs are due by the wall clock"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_core::{JobSpec, QueueTarget, Schedule, Selector, Target};
use hourglass_store::{JobQuery, NewJob, SqliteStore, Store};
use jiff::Timestamp;

const RUNS: usize = 50;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args().nth(1).map_or(Ok(100_000), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path())?);
    let now = Timestamp::now();
    let started = Instant::now();
    for namespace in ["bench", "other"] {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            let jobs = chunk.iter().map(|&i| job(namespace, i, now)).collect();
            store.create_jobs(jobs, None).await?;
        }
    }
    println!(
        "created {} labelled jobs in {:.1} s",
        2 * n,
        started.elapsed().as_secs_f64()
    );
    let middle = store
        .list_jobs(JobQuery {
            namespace: Some("bench".into()),
            after: None,
            limit: n / 2,
            ..Default::default()
        })
        .await?
        .last()
        .map(|j| j.id);
    // "none" walks its equality's every entry (1 job in 100) and finds no job with both: a
    // page reads at most its driving selector's matches from the cursor on.
    let cases: [(&str, &[&str]); 6] = [
        ("equality, 1 job in 100", &["tenant=t7"]),
        ("existence, 1 job in 1,000", &["vip"]),
        ("two equalities ANDed, 1 in 400", &["tenant=t7", "kind=k3"]),
        ("equality and existence, 1 in 1,000", &["tenant=t0", "vip"]),
        ("equality and existence, none", &["tenant=t7", "vip"]),
        ("no match", &["tenant=nobody"]),
    ];
    for (name, texts) in cases {
        let labels: Vec<Selector> = texts.iter().map(|t| Selector::parse(t).unwrap()).collect();
        for (from, after) in [("first page", None), ("from the middle", middle)] {
            let mut times = Vec::with_capacity(RUNS);
            let mut found = 0;
            for _ in 0..RUNS {
                let query = JobQuery {
                    namespace: Some("bench".into()),
                    labels: labels.clone(),
                    after,
                    limit: 100,
                    ..Default::default()
                };
                let t = Instant::now();
                found = store.list_jobs(query).await?.len();
                times.push(t.elapsed());
            }
            times.sort();
            println!(
                "{name:<40} {from:<16} {found:>4} jobs  median {:>8.3} ms",
                median(&times).as_secs_f64() * 1000.0
            );
        }
    }
    Ok(())
}

fn median(times: &[Duration]) -> Duration {
    times[times.len() / 2]
}

fn job(namespace: &str, i: usize, now: Timestamp) -> NewJob {
    let due = now + Duration::from_secs(3600);
    let mut labels = hourglass_core::Labels::new();
    labels.insert("tenant".into(), format!("t{}", i % 100));
    labels.insert("kind".into(), format!("k{}", i % 4));
    if i.is_multiple_of(1000) {
        labels.insert("vip".into(), "yes".into());
    }
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: namespace.into(),
        key: None,
        spec: JobSpec {
            job_type: Some("bench".into()),
            schedule: Schedule::at(due),
            target: Target::Queue(QueueTarget {
                name: "bench".into(),
            }),
            retry: Default::default(),
            misfire: Default::default(),
            overlap: Default::default(),
            backfill: None,
            labels,
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: Some(format!(r#"{{"n":{i}}}"#)),
        fingerprint: 0,
        first_due: due,
        now,
    }
}
