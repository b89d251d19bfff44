//! `hourglass-bench`: load-tests a node over its public HTTP API and accounts for every fire.
//!
//! The bench runs a webhook receiver of its own on loopback, measures what that receiver can take
//! (so it is known not to be the bottleneck), starts a node (by default `hourglass serve` as a
//! child process, from the `hourglass` binary beside this one, so the node's memory and CPU
//! figures are its own and the node is the binary users run), submits a workload through POST
//! /v1/jobs/batch, and holds what the receiver saw against what it submitted: executed, missing,
//! duplicate and early deliveries, and lateness per occurrence. With `--target queue` the jobs
//! target a pull queue instead, and long-polling workers take the receiver's place: what they
//! lease is accounted the same way (lateness is then due → leased).
//!
//! A binary of its own, not a subcommand of `hourglass`: its receiver, progress bars, SQLite
//! checkpoint and bus readers are no part of what users install.

/// The allocator the `hourglass` binary runs on, so that a node run inside this process
/// (`--in-process`) allocates as it does in production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod accounting;
mod args;
mod blackhole;
mod consumers;
mod receiver;
mod recorder;
mod report;
mod scenarios;
mod server;
mod submit;
mod workers;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use accounting::{DeliveryKey, Receipt, account};
use args::{BenchArgs, Scenario, Target};
use receiver::Receiver;
use recorder::Recorder;
use server::{ProcStats, Server, ServerOptions};
use submit::{Api, JobWriter, Submitted};
use workers::{WorkerOptions, Workers};

/// The queue `--target queue` jobs go to.
const QUEUE: &str = "bench";

/// Wall clock, unix ms: the same clock the node stamps due times with.
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Keep-alive connections of the ceiling measurement.
const CEILING_CONNECTIONS: usize = 64;
/// After everything expected has arrived, how long to keep listening for quick duplicates.
const DUPLICATE_GRACE: Duration = Duration::from_secs(1);

/// Progress bars on stderr, only when it is a terminal.
#[derive(Clone, Copy)]
struct Progress {
    enabled: bool,
}

impl Progress {
    fn bar(self, len: u64, phase: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let style = ProgressStyle::with_template(
            "{prefix:>9} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {msg}",
        )
        .expect("valid progress template");
        ProgressBar::new(len)
            .with_style(style)
            .with_prefix(phase.to_string())
    }
}

/// Everything a scenario works with.
pub(crate) struct Bench {
    args: BenchArgs,
    /// Every delivery seen, by the receiver or the workers, whichever the target.
    recorder: Recorder,
    /// The JSON target object of every job the bench creates.
    target: Arc<str>,
    /// The JSON payload of every job the bench creates ("": none), as --payload-bytes asks.
    payload: Arc<str>,
    /// With --target webhook.
    receiver: Option<Receiver>,
    /// With --target queue.
    workers: Option<Workers>,
    /// The first node: the one whose mode, data and log the report describes.
    server: Server,
    /// With --nodes N: the other N - 1 nodes on the same store.
    more_servers: Vec<Server>,
    api: Api,
    progress: Progress,
}

fn main() -> std::process::ExitCode {
    let args = BenchArgs::parse();
    // A combination of flags it cannot run is a usage error: exit 2, as for clap's own.
    if let Err(e) = args::check_flags(&args) {
        eprintln!("error: {e:#}");
        return std::process::ExitCode::from(2);
    }
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| runtime.block_on(run(args)));
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One line: the cause chain joined.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.in_process {
        init_in_process_logging();
    }
    let progress = Progress {
        enabled: std::io::stderr().is_terminal(),
    };

    let recorder = Recorder::new(1 << 16);
    let (receiver, ceiling) = match args.target {
        Target::Webhook => {
            let receiver = Receiver::start(recorder.clone()).await?;
            let ceiling = receiver
                .measure_ceiling(CEILING_CONNECTIONS, args.ceiling_time)
                .await?;
            receiver.reset();
            eprintln!(
                "receiver ceiling: {ceiling:.0} requests/s ({CEILING_CONNECTIONS} keep-alive connections)"
            );
            (Some(receiver), Some(ceiling))
        }
        _ => (None, None),
    };
    // A bus target: the consumer first (it makes the stream or queue), then the node's config
    // file naming the connection `bench`.
    let consumer = match args.target {
        Target::Nats => Some(
            consumers::Consumer::nats(
                args.bus_url.as_deref().unwrap_or("nats://127.0.0.1:4222"),
                recorder.clone(),
            )
            .await?,
        ),
        Target::Redis => Some(
            consumers::Consumer::redis(
                args.bus_url.as_deref().unwrap_or("redis://127.0.0.1:6379"),
                recorder.clone(),
            )
            .await?,
        ),
        Target::Sqs => Some(
            consumers::Consumer::sqs(
                args.bus_url.as_deref().unwrap_or_default(),
                recorder.clone(),
                args.workers,
            )
            .await?,
        ),
        _ => None,
    };
    let config_dir = tempfile::tempdir()?;
    let mut server_config = args.server_config.clone();
    if let Some(consumer) = &consumer {
        let toml = format!("[connections.bench]\n{}", consumer.connection_toml);
        if args.url.is_some() {
            eprintln!("the node at --url needs this connection in its config file:\n{toml}");
        } else {
            let path = config_dir.path().join("bench.toml");
            std::fs::write(&path, toml)?;
            server_config = Some(path);
        }
    }

    let options = ServerOptions {
        url: args.url.clone(),
        server_pid: args.server_pid,
        data_dir: args.data_dir.clone(),
        in_process: args.in_process,
        server_bin: args.server_bin.clone(),
        server_config,
        store: args.store.clone(),
    };
    let mut server = Server::start(&options).await?;
    let mut more_servers = Vec::new();
    for _ in 1..args.nodes {
        more_servers.push(Server::start(&options).await?);
    }
    let mut api = Api::new(&server.base_url, args.api_key.clone())?;
    api.full_responses = args.full_batch_responses;
    server.wait_ready(&api.client).await?;
    for other in &mut more_servers {
        other.wait_ready(&api.client).await?;
    }
    if !more_servers.is_empty() {
        api.spread_over(
            std::iter::once(&server)
                .chain(&more_servers)
                .map(|s| s.base_url.clone())
                .collect(),
        );
    }
    if let Some(binary) = &server.binary {
        eprintln!("node binary: {binary}");
    }
    let more = if more_servers.is_empty() {
        String::new()
    } else {
        format!(" and {} more on the same store", more_servers.len())
    };
    let (target, workers) = match (&receiver, &consumer) {
        (_, Some(consumer)) => {
            eprintln!(
                "node: {} ({}){more}; publishing to {} through [connections.bench]",
                server.base_url,
                server.mode.name(),
                args.target.name()
            );
            (consumer.target_json.clone(), None)
        }
        (Some(receiver), None) => {
            eprintln!(
                "node: {} ({}){more}; receiver: {}",
                server.base_url,
                server.mode.name(),
                receiver.url()
            );
            (
                submit::webhook_target(&receiver.url(), args.webhook_batch),
                None,
            )
        }
        (None, None) => {
            // With several nodes the workers take turns: worker i leases from (and acks on)
            // node i mod n.
            eprintln!(
                "node: {} ({}){more}; {} workers leasing up to {} messages from queue {QUEUE:?}",
                server.base_url,
                server.mode.name(),
                args.workers,
                args.lease_max
            );
            let options = WorkerOptions {
                queue: QUEUE.to_string(),
                workers: args.workers,
                lease_max: args.lease_max,
            };
            (
                submit::queue_target(QUEUE),
                Some(Workers::start(&api, &options, recorder.clone())),
            )
        }
    };

    let mut bench = Bench {
        payload: payload_json(args.payload_bytes).into(),
        args,
        recorder,
        target: target.into(),
        receiver,
        workers,
        server,
        more_servers,
        api,
        progress,
    };
    let outcome = match bench.args.scenario {
        Scenario::Burst => scenarios::burst(&mut bench).await,
        Scenario::Sustained => scenarios::sustained(&mut bench).await,
        Scenario::FarFuture => scenarios::far_future(&mut bench).await,
        Scenario::Cron => scenarios::cron(&mut bench).await,
        Scenario::NoisyNeighbour => scenarios::noisy_neighbour(&mut bench).await,
        Scenario::AnchorMove => scenarios::anchor_move(&mut bench).await,
    };
    let Bench {
        args,
        server,
        more_servers,
        receiver,
        workers,
        ..
    } = bench;
    // Stop leasing before the node stops answering.
    let worker_stats = match workers {
        Some(workers) => Some(workers.stop().await),
        None => None,
    };
    let mode = server.mode;
    let stats_include_bench = server.stats_include_bench();
    let log = server.shutdown().await;
    let mut more_log_lines = 0;
    for other in more_servers {
        if let Ok(Some(other_log)) = other.shutdown().await {
            more_log_lines += other_log.lines as u64;
        }
    }
    let mut report = outcome?;
    report.target = args.target.name();
    report.store = store_kind(args.store.as_deref(), args.url.is_some());
    report.nodes = args.nodes;
    report.payload_bytes = args.payload_bytes;
    report.receiver_ceiling_per_s = ceiling;
    report.mode = mode;
    report.stats_include_bench = stats_include_bench;
    if let Some(receiver) = &receiver {
        report.foreign_requests = receiver.foreign();
        report.receiver_connections = receiver.connections();
        report.receiver_batches = args.webhook_batch.map(|_| receiver.batches());
    }
    if let Some(stats) = worker_stats {
        report.foreign_requests = stats.foreign;
        report.queue = Some(stats);
    }
    if let Some(consumer) = consumer {
        report.foreign_requests = consumer.foreign();
        consumer.stop().await;
    }
    drop(config_dir);
    if let Some(log) = log? {
        report.server_log_lines = Some(log.lines as u64 + more_log_lines);
        report.server_log_head = log.head;
    }
    report::print(&report, args.json);
    Ok(())
}

fn init_in_process_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOURGLASS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The store's name for the report, from what --store was given; a node started elsewhere
/// (--url) may be on any store.
fn store_kind(store: Option<&str>, external: bool) -> &'static str {
    match store {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            "postgres"
        }
        Some(url) if url.starts_with("dynamodb://") => "dynamodb",
        Some(_) => "other",
        None if external => "unknown",
        None => "sqlite",
    }
}

impl Bench {
    /// The nodes' memory and CPU: with several nodes, the sums (peak RSS is then the sum of each
    /// node's own peak, an upper bound of what they held at once).
    fn stats(&self) -> Option<ProcStats> {
        let mut total = self.server.stats()?;
        for other in &self.more_servers {
            let stats = other.stats()?;
            total.peak_rss_kb += stats.peak_rss_kb;
            total.cpu_seconds += stats.cpu_seconds;
        }
        Some(total)
    }

    /// Fails if any node the bench started has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        self.server.check_alive()?;
        for other in &mut self.more_servers {
            other.check_alive()?;
        }
        Ok(())
    }

    /// Creates `n` jobs through the batch endpoint behind a "submit" progress bar.
    async fn submit(
        &self,
        n: usize,
        keep: bool,
        write_job: JobWriter,
    ) -> anyhow::Result<Submitted> {
        let bar = self.progress.bar(n as u64, "submit");
        let submitted = self
            .api
            .submit(
                n,
                batch_size(self.args.batch, self.payload.len()),
                self.args.submitters,
                keep,
                write_job,
                &bar,
            )
            .await;
        bar.finish_and_clear();
        let submitted = submitted?;
        if submitted.created != n as u64 {
            bail!("asked for {n} jobs, the node created {}", submitted.created);
        }
        Ok(submitted)
    }

    /// Waits until the wall clock reads `until_ms`, showing receipts against `expected`.
    async fn wait_until(
        &mut self,
        until_ms: i64,
        expected: u64,
        phase: &str,
    ) -> anyhow::Result<()> {
        let bar = self.progress.bar(expected, phase);
        let base = self.recorder.recorded();
        loop {
            self.check_alive()?;
            let now = now_ms();
            if now >= until_ms {
                break;
            }
            bar.set_position((self.recorder.recorded() - base).min(expected as usize) as u64);
            bar.set_message(format!("{:.0}s left", (until_ms - now) as f64 / 1000.0));
            let tick = Duration::from_millis((until_ms - now).clamp(1, 200) as u64);
            tokio::time::sleep(tick).await;
        }
        bar.finish_and_clear();
        Ok(())
    }

    /// Waits until every expected occurrence has arrived (counting only receipts that `keep`
    /// accepts) or the wall clock reads `deadline_ms`, then listens a little longer for quick
    /// duplicates. Returns whether everything arrived.
    async fn drain(
        &mut self,
        expected: &HashMap<DeliveryKey, i64>,
        deadline_ms: i64,
        keep: impl Fn(&Receipt) -> bool,
    ) -> anyhow::Result<bool> {
        let bar = self.progress.bar(expected.len() as u64, "drain");
        let mut last_checked = usize::MAX;
        let complete = loop {
            self.check_alive()?;
            let recorded = self.recorder.recorded();
            if recorded >= expected.len() && recorded != last_checked {
                last_checked = recorded;
                let receipts: Vec<Receipt> = self
                    .recorder
                    .snapshot()
                    .into_iter()
                    .filter(|r| keep(r))
                    .collect();
                let acc = account(expected, &receipts);
                bar.set_position(acc.executed);
                bar.set_message(format!("{} missing", acc.missing));
                if acc.missing == 0 {
                    break true;
                }
            } else if recorded < expected.len() {
                bar.set_position(recorded as u64);
            }
            if now_ms() >= deadline_ms {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        bar.finish_and_clear();
        tokio::time::sleep(DUPLICATE_GRACE).await;
        Ok(complete)
    }

    /// A job writer for one schedule (a JSON object, computed per job) and this bench's target.
    fn job_writer(&self, schedule: impl Fn(usize) -> String + Send + Sync + 'static) -> JobWriter {
        let (target, payload) = (self.target.clone(), self.payload.clone());
        Arc::new(move |i, body: &mut String| {
            submit::write_job(body, format_args!("{}", schedule(i)), &target, &payload)
        })
    }
}

/// The payload --payload-bytes asks for: `{"pad":"…"}`, `bytes` long ("" for 0). The padding is
/// letters and digits from a fixed pseudo-random sequence, not one repeated character: a store
/// that compresses (PostgreSQL's TOAST does) would otherwise keep a few bytes of it.
fn payload_json(bytes: usize) -> String {
    if bytes == 0 {
        return String::new();
    }
    const FRAME: usize = r#"{"pad":""}"#.len();
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let pad: String = (0..bytes.saturating_sub(FRAME))
        .map(|_| {
            // xorshift64: the same padding every run, spread over the alphabet.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state % 36) as usize])
        })
        .collect();
    format!(r#"{{"pad":"{pad}"}}"#)
}

/// Jobs a batch request carries: `asked`, or fewer when that many jobs with a payload of
/// `payload` bytes would make a body over 8 MiB (the node takes 16 MiB by default).
fn batch_size(asked: usize, payload: usize) -> usize {
    const BODY: usize = 8 << 20;
    const JOB_WITHOUT_PAYLOAD: usize = 256;
    asked.min(BODY / (payload + JOB_WITHOUT_PAYLOAD)).max(1)
}

/// The most receipts that arrived within one wall-clock second.
fn peak_per_second(receipts: &[Receipt]) -> Option<u64> {
    let mut per_second: HashMap<i64, u64> = HashMap::new();
    for r in receipts {
        *per_second
            .entry(r.received_ms.div_euclid(1000))
            .or_default() += 1;
    }
    per_second.into_values().max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_the_size_asked_and_batches_fit() {
        assert_eq!(payload_json(0), "");
        for bytes in [16, 100, 4096, 262_144] {
            let payload = payload_json(bytes);
            assert_eq!(payload.len(), bytes);
            let value: serde_json::Value = serde_json::from_str(&payload).unwrap();
            assert!(value["pad"].is_string());
        }
        assert_eq!(payload_json(4096), payload_json(4096), "the same every run");
        let distinct: std::collections::HashSet<char> = payload_json(4096).chars().collect();
        assert!(distinct.len() > 30, "not one repeated character");
        assert_eq!(batch_size(1000, 0), 1000);
        assert_eq!(batch_size(1000, 16_384), 504);
        assert_eq!(batch_size(1000, 262_144), 31);
        assert_eq!(batch_size(10, 262_144), 10);
    }
}
