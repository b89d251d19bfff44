//! An example worker: handles `email.send` and `report.build` jobs from one queue and prints a
//! line per job it processed. It stops on Ctrl-C or SIGTERM, or after `WORKER_MAX_JOBS` jobs.
//!
//! ```sh
//! HOURGLASS_URL=http://127.0.0.1:7070 HOURGLASS_QUEUE=emails cargo run -p hourglass-client --example worker
//! ```
//!
//! Environment: `HOURGLASS_URL` (default `http://127.0.0.1:7070`), `HOURGLASS_QUEUE` (default
//! `emails`), `HOURGLASS_API_KEY`, `HOURGLASS_NAMESPACE`, `WORKER_CONCURRENCY` (default 8),
//! `WORKER_MAX_JOBS` (stop after this many jobs succeeded), `HOURGLASS_LOG` (e.g. `debug`).
//!
//! Each processed job prints `processed <type> <job id> <delivery id> attempt=<n>` on stdout;
//! logs go to stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hourglass_client::{Client, HandlerError, Job, Worker};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Deserialize)]
struct SendEmail {
    to: String,
    subject: String,
}

#[derive(Debug, Deserialize)]
struct BuildReport {
    report_id: u64,
}

/// Counts successful jobs and cancels `stop` once `max` of them are done.
#[derive(Clone)]
struct Progress {
    done: Arc<AtomicU64>,
    max: Option<u64>,
    stop: CancellationToken,
}

impl Progress {
    fn record<T>(&self, job: &Job<T>) {
        println!(
            "processed {} {} {} attempt={}",
            job.job_type.as_deref().unwrap_or("-"),
            job.id,
            job.delivery_id,
            job.attempt
        );
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if self.max.is_some_and(|max| done >= max) {
            self.stop.cancel();
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HOURGLASS_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let url = env("HOURGLASS_URL").unwrap_or_else(|| "http://127.0.0.1:7070".into());
    let queue = env("HOURGLASS_QUEUE").unwrap_or_else(|| "emails".into());
    let concurrency: usize = env("WORKER_CONCURRENCY").map_or(Ok(8), |v| v.parse())?;
    let max = env("WORKER_MAX_JOBS").map(|v| v.parse()).transpose()?;

    let mut client = Client::new(&url)?;
    if let Some(key) = env("HOURGLASS_API_KEY") {
        client = client.api_key(key);
    }
    if let Some(namespace) = env("HOURGLASS_NAMESPACE") {
        client = client.namespace(namespace);
    }

    let stop = CancellationToken::new();
    let progress = Progress {
        done: Arc::new(AtomicU64::new(0)),
        max,
        stop: stop.clone(),
    };
    let emails = progress.clone();
    let reports = progress.clone();
    let worker = Worker::builder(client, &queue)
        .concurrency(concurrency)
        .shutdown_grace(Duration::from_secs(10))
        .handle("email.send", move |job: Job<SendEmail>| {
            let progress = emails.clone();
            async move {
                // A real worker would talk to its mail service here.
                if job.payload.to.is_empty() {
                    return Err(HandlerError::new("no recipient"));
                }
                tracing::info!(to = %job.payload.to, subject = %job.payload.subject, "email sent");
                progress.record(&job);
                Ok(())
            }
        })
        .handle("report.build", move |job: Job<BuildReport>| {
            let progress = reports.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                tracing::info!(report_id = job.payload.report_id, "report built");
                progress.record(&job);
                Ok(())
            }
        })
        .build()?;

    tokio::spawn(cancel_on_signal(stop.clone()));
    eprintln!("worker on {url}, queue {queue:?}, concurrency {concurrency}");
    worker.run(stop.cancelled_owned()).await?;
    eprintln!(
        "worker stopped after {} jobs",
        progress.done.load(Ordering::SeqCst)
    );
    Ok(())
}

async fn cancel_on_signal(stop: CancellationToken) {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("can install a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    stop.cancel();
}
