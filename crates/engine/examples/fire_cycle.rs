//! The fired path end to end in one process, for instruction counts: one-off webhook jobs already
//! due on the embedded store, then an engine that claims, times, dispatches, delivers (over HTTP
//! to a receiver in a child process) and completes every one of them.
//!
//! ```sh
//! cargo build --release -p hourglass-engine --example fire_cycle
//! valgrind --tool=callgrind target/release/examples/fire_cycle 20000 none
//! valgrind --tool=callgrind target/release/examples/fire_cycle 20000 fire
//! ```
//!
//! A third argument gives each job a payload of that many bytes (default: a dozen).
//!
//! `none` stops after the creates, so the difference of the two totals divided by the job count
//! is what firing one occurrence costs this process in user space: the store's claim and
//! completion, the pipeline, signing, and hyper's side of the request. The kernel's share (system
//! calls, loopback TCP) is not counted by callgrind, and the receiver runs natively in its own
//! process (`--trace-children=no`, callgrind's default), so neither blurs the figure. Timings
//! printed by a run outside valgrind are only a rough guide: the machine is shared.

#![allow(
    clippy::disallowed_methods,
    reason = "a measuring tool: its jobs are due by the wall clock"
)]

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_core::{
    JobSpec, MisfirePolicy, RetryPolicy, Schedule, SystemClock, Target, WebhookTarget,
};
use hourglass_engine::metrics::OutcomeLabels;
use hourglass_engine::{Engine, EngineConfig, Metrics, Secrets, TargetPolicy, WebhookDeliverer};
use hourglass_store::{NewJob, SqliteStore, Store};
use jiff::Timestamp;

const NAMESPACE: &str = "default";

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    let runtime = tokio::runtime::Runtime::new()?;
    if first.as_deref() == Some("receive") {
        return runtime.block_on(receive());
    }
    let n: usize = first.map_or(Ok(20_000), |a| a.parse())?;
    let fire = match args.next().as_deref() {
        None | Some("fire") => true,
        Some("none") => false,
        Some(other) => anyhow::bail!("phase {other:?}: fire or none"),
    };
    let payload_bytes: usize = args.next().map_or(Ok(0), |a| a.parse())?;
    let payload = if payload_bytes == 0 {
        r#"{"n":1}"#.to_owned()
    } else {
        let frame = r#"{"pad":""}"#.len();
        format!(
            r#"{{"pad":"{}"}}"#,
            "x".repeat(payload_bytes.saturating_sub(frame))
        )
    };
    runtime.block_on(run(n, fire, &payload))
}

async fn run(n: usize, fire: bool, payload: &str) -> anyhow::Result<()> {
    let mut receiver = Command::new(std::env::current_exe()?)
        .arg("receive")
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(receiver.stdout.take().expect("piped"))
        .read_line(&mut line)
        .map_err(|e| anyhow::anyhow!("receiver did not start: {e}"))?;
    let url: url::Url = format!("http://{}/hook", line.trim()).parse()?;

    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path())?);
    let now = Timestamp::now();
    let started = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk.iter().map(|_| job(&url, now, payload)).collect();
        store.create_jobs(jobs, None).await?;
    }
    println!(
        "create  {:>6.2} µs a job",
        started.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    if fire {
        let clock = Arc::new(SystemClock);
        let config = EngineConfig {
            retention: None,
            ..EngineConfig::default()
        };
        let metrics = Metrics::new(&mut prometheus_client::registry::Registry::default());
        let deliverer = WebhookDeliverer::new(
            Secrets::new(store.clone(), clock.clone()),
            clock.clone(),
            TargetPolicy::new(Vec::new()).allowing_loopback(),
            Duration::from_secs(30),
            config.delivery_concurrency,
            &metrics,
        )?;
        let delivered = metrics.fired.get_or_create(&OutcomeLabels {
            target: "webhook",
            outcome: "delivered",
        });
        let started = Instant::now();
        let engine = Engine::start(
            config,
            store.clone(),
            Arc::new(deliverer),
            clock,
            metrics.clone(),
        );
        while delivered.get() < n as u64 || metrics.in_flight.get() > 0 {
            if engine.scheduler().has_failed() {
                anyhow::bail!("the engine failed");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!(
            "fire    {:>6.2} µs a job",
            started.elapsed().as_secs_f64() * 1e6 / n as f64
        );
        engine.shutdown().await;
    }
    receiver.kill()?;
    receiver.wait()?;
    Ok(())
}

fn job(url: &url::Url, now: Timestamp, payload: &str) -> NewJob {
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: NAMESPACE.into(),
        key: None,
        spec: JobSpec {
            job_type: Some("cycle".into()),
            schedule: Schedule::at(now),
            target: Target::Webhook(WebhookTarget {
                url: url.clone(),
                headers: Default::default(),
                rate_limit: None,
                batch: None,
            }),
            retry: RetryPolicy::default(),
            misfire: MisfirePolicy::default(),
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: Some(payload.to_owned()),
        fingerprint: 0,
        first_due: now,
        now,
    }
}

/// The child: HTTP/1.1 keep-alive on a loopback port (printed on the first line of stdout),
/// answering every request 204.
async fn receive() -> anyhow::Result<()> {
    use hyper::server::conn::http1;
    use hyper_util::rt::TokioIo;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(|_req| async {
                Ok::<_, Infallible>(
                    hyper::Response::builder()
                        .status(204)
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                        .expect("a valid response"),
                )
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
