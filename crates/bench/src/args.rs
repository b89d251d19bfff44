//! The bench's command line: the scenario, its knobs, and what the flags cannot ask for together.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Parser, ValueEnum};

use crate::blackhole;

/// Load-test a node over its HTTP API and account for every fire.
///
/// Scenarios: burst, sustained, far-future, cron, noisy-neighbour, anchor-move. Starts its own node (the
/// `hourglass` binary beside this one, `hourglass serve`) unless given --url or --in-process.
#[derive(Parser, Debug)]
#[command(
    name = "hourglass-bench",
    version,
    after_help = EXAMPLES,
)]
pub struct BenchArgs {
    /// The workload to run.
    #[arg(value_enum)]
    pub(crate) scenario: Scenario,
    /// Jobs to create [default: burst 100000, far-future 1000000, cron 10000, noisy-neighbour
    /// 5000 (the healthy namespace's), or 40 with --destinations; sustained creates rate × hold
    /// jobs per step].
    #[arg(long)]
    pub(crate) jobs: Option<usize>,
    /// Where the jobs' occurrences go: webhooks to the bench's receiver, or the pull queue
    /// `bench`, leased by the bench's workers (lateness is then due → leased).
    #[arg(long, value_enum, default_value_t = Target::Webhook)]
    pub(crate) target: Target,
    /// --target webhook: deliver in batches of up to this many occurrences a request (the
    /// target's `batch.max_items`, 1 to 1000); the receiver counts each item.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) webhook_batch: Option<u16>,
    /// --target queue: long-polling lease loops (and as many tasks acking their receipts);
    /// --target sqs: receive loops.
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: usize,
    /// --target nats|redis|sqs: the server the node publishes to and the bench reads from: a
    /// NATS URL [default nats://127.0.0.1:4222], a Redis URL [default redis://127.0.0.1:6379],
    /// or an SQS endpoint that takes any credentials, such as moto's server (required for sqs:
    /// the bench creates and deletes a queue there). The bench writes the node's
    /// `[connections.bench]` itself.
    #[arg(long)]
    pub(crate) bus_url: Option<String>,
    /// --target queue: most messages one lease asks for (the API takes 1 to 1000).
    #[arg(long, default_value_t = 1000)]
    pub(crate) lease_max: usize,
    /// noisy-neighbour: one-offs of the noisy namespace, shared round-robin by its misbehaving
    /// destinations [default: 2000, or 200 a destination with --destinations].
    #[arg(long)]
    pub(crate) slow_jobs: Option<usize>,
    /// noisy-neighbour: how the noisy namespace's receivers misbehave.
    #[arg(long, value_enum, default_value_t = blackhole::SlowMode::Hang)]
    pub(crate) slow: blackhole::SlowMode,
    /// noisy-neighbour: the noisy namespace's distinct destinations (loopback listeners on ports
    /// of their own, each with its own slots at the node). Given, the other flags default to 200
    /// noisy one-offs a destination and 40 healthy ones, all due at the same millisecond
    /// [default: one destination, due times spread over 20 s].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) destinations: Option<u16>,
    /// burst and noisy-neighbour: the due times are spread evenly over this window, which opens
    /// 5 s after the start [default: 20s; noisy-neighbour with --destinations: all due at once].
    #[arg(long, value_parser = duration_arg)]
    pub(crate) spread: Option<Duration>,
    /// sustained: how long each fire-rate step is held.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub(crate) hold: Duration,
    /// sustained: a step is held while lateness p99 stays at or under this.
    #[arg(long, default_value = "100ms", value_parser = duration_arg)]
    pub(crate) p99_limit: Duration,
    /// sustained: the fire rates (per second) to step through, lowest first.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,20000,40000,80000,160000"
    )]
    pub(crate) rates: Vec<u64>,
    /// far-future: the idle window over which the server's CPU use is measured.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub(crate) idle: Duration,
    /// cron: how long the every-second jobs are watched.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    pub(crate) duration: Duration,
    /// cron: instead of every-second jobs, jobs `0 * * * * *` with this `schedule.jitter`, all
    /// due at the same minute: the one occurrence each has there is watched, and how its
    /// deliveries spread over the jitter window is reported (lateness then counts from each
    /// occurrence's fire time, its `next_fire_at`).
    #[arg(long, value_parser = duration_arg)]
    pub(crate) jitter: Option<Duration>,
    /// cron: the every-second jobs' `overlap` policy (the node's default, `buffer_all`, when left
    /// out); `allow` hands each occurrence to a one-off job of its own, which is what it costs.
    #[arg(long, value_parser = ["skip", "buffer_one", "buffer_all", "allow"])]
    pub(crate) overlap: Option<String>,
    /// Also print the figures as one JSON object, on the last line of stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Bench an existing node at this base URL instead of starting one. It must allow webhook
    /// targets in 127.0.0.0/8 (the bench's receiver listens on loopback).
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// API key (Bearer) for the node at --url.
    #[arg(long, requires = "url")]
    pub(crate) api_key: Option<String>,
    /// The process id of the node at --url, to report its memory and CPU (null otherwise).
    #[arg(long, requires = "url")]
    pub(crate) server_pid: Option<u32>,
    /// Data directory of the node the bench starts [default: a fresh temporary directory,
    /// removed afterwards]. With --url: the node's directory, to measure the store's size.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Run the node inside the bench's own process instead of as a child process. Its memory
    /// and CPU figures then include the bench's receiver and submitters.
    #[arg(long, conflicts_with = "url")]
    pub(crate) in_process: bool,
    /// The `hourglass` binary the bench starts its node(s) with, as `hourglass serve` [default:
    /// the `hourglass` in this executable's directory, where `cargo build -p hourglass` puts it].
    #[arg(long, conflicts_with_all = ["url", "in_process"])]
    pub(crate) server_bin: Option<PathBuf>,
    /// Config file for the node the bench starts (`hourglass serve --config`).
    #[arg(long, conflicts_with_all = ["url", "in_process"])]
    pub(crate) server_config: Option<PathBuf>,
    /// Store of the node(s) the bench starts, handed on as `hourglass serve --store`, e.g.
    /// postgres://user@host/db [default: the embedded store in --data-dir].
    #[arg(long, conflicts_with_all = ["url", "in_process"])]
    pub(crate) store: Option<String>,
    /// Nodes to start on --store (more than one needs a shared store such as PostgreSQL); the
    /// submitters are spread over them round-robin. Memory and CPU are summed over the nodes.
    #[arg(long, default_value_t = 1)]
    pub(crate) nodes: usize,
    /// Batch requests in flight at once.
    #[arg(long, default_value_t = 4)]
    pub(crate) submitters: usize,
    /// Jobs per batch request (the API takes 1 to 1000).
    #[arg(long, default_value_t = 1000)]
    pub(crate) batch: usize,
    /// Give every job a payload of about this many bytes (a JSON object with one string; 0: no
    /// payload, 16 to 262144 otherwise). Batch requests then carry fewer jobs when 1,000 would
    /// not fit in 8 MiB.
    #[arg(long, default_value_t = 0, value_parser = payload_bytes_arg)]
    pub(crate) payload_bytes: usize,
    /// Ask for every job whole in batch answers. By default the submitters send `Prefer:
    /// return=minimal` and get each job's id, state and due time only.
    #[arg(long)]
    pub(crate) full_batch_responses: bool,
    /// After the last due time, how long to keep waiting for occurrences still missing.
    #[arg(long, default_value = "60s", value_parser = duration_arg)]
    pub(crate) drain_timeout: Duration,
    /// How long the receiver's ceiling is measured before the run.
    #[arg(long, default_value = "2s", value_parser = duration_arg)]
    pub(crate) ceiling_time: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// N one-off jobs due over a short window.
    Burst,
    /// Steps the fire rate up until lateness p99 exceeds --p99-limit or fires go missing.
    Sustained,
    /// N jobs due 1 to 30 days ahead: idle CPU and bytes per job.
    FarFuture,
    /// N every-second cron jobs: every occurrence once.
    Cron,
    /// A healthy namespace's one-offs alone, then again beside a noisy namespace's one-offs to
    /// receivers that hang (or fail, or throttle): the healthy namespace's lateness both times.
    /// --destinations N spreads the noisy one-offs over N receivers on ports of their own.
    NoisyNeighbour,
    /// N one-offs (at most 10,000, an anchor's bound) anchored before one anchor, which is then
    /// moved: the move's answer time and jobs_moved, and every occurrence delivered once at its
    /// new time (none at the old).
    AnchorMove,
}

const EXAMPLES: &str = "\
Examples:
  hourglass-bench burst                 100,000 one-offs due over 20 s (under a minute)
  hourglass-bench sustained             the highest steady fire rate with p99 < 100 ms
  hourglass-bench burst --target queue  the same, leased from a pull queue by 4 workers
  hourglass-bench burst --url http://127.0.0.1:7070 --server-pid 1234   a node started by hand

The node it starts is `hourglass serve` from the hourglass binary beside this one: build both,
`cargo build --release -p hourglass -p hourglass-bench`, or name it with --server-bin.";

/// Where the bench's jobs send their occurrences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// POST to the bench's webhook receiver on loopback.
    Webhook,
    /// The pull queue `bench`, leased and acked by the bench's workers.
    Queue,
    /// A JetStream stream on --bus-url, read by a core NATS subscriber.
    Nats,
    /// A Redis stream on --bus-url, read with XREAD.
    Redis,
    /// An SQS queue at --bus-url (an emulator such as moto), read by --workers receive loops.
    Sqs,
}

impl Target {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Target::Webhook => "webhook",
            Target::Queue => "queue",
            Target::Nats => "nats",
            Target::Redis => "redis",
            Target::Sqs => "sqs",
        }
    }

    pub(crate) fn is_bus(self) -> bool {
        matches!(self, Target::Nats | Target::Redis | Target::Sqs)
    }
}

impl Scenario {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Burst => "burst",
            Scenario::Sustained => "sustained",
            Scenario::FarFuture => "far-future",
            Scenario::Cron => "cron",
            Scenario::NoisyNeighbour => "noisy-neighbour",
            Scenario::AnchorMove => "anchor-move",
        }
    }
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    hourglass_core::duration::parse_duration(text, "duration").map_err(|e| e.message)
}

/// What the flags cannot ask for together, or at all.
pub(crate) fn check_flags(args: &BenchArgs) -> anyhow::Result<()> {
    if !(1..=1000).contains(&args.batch) {
        bail!("--batch must be between 1 and 1000");
    }
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    if args.scenario == Scenario::AnchorMove && args.jobs.is_some_and(|n| n > 10_000) {
        bail!("anchor-move: --jobs is at most 10000 (the jobs one anchor may hold)");
    }
    if args.scenario == Scenario::Sustained && args.rates.contains(&0) {
        bail!("--rates must be positive");
    }
    if !(1..=1000).contains(&args.lease_max) {
        bail!("--lease-max must be between 1 and 1000");
    }
    if args.workers == 0 {
        bail!("--workers must be at least 1");
    }
    if args.scenario == Scenario::NoisyNeighbour && args.target != Target::Webhook {
        bail!("noisy-neighbour runs with webhook targets only");
    }
    if args.overlap.is_some() && (args.scenario != Scenario::Cron || args.jitter.is_some()) {
        bail!("--overlap is for the cron scenario's every-second jobs (without --jitter)");
    }
    if args.jitter.is_some() && args.scenario != Scenario::Cron {
        bail!("--jitter applies to cron only");
    }
    if args.destinations.is_some() && args.scenario != Scenario::NoisyNeighbour {
        bail!("--destinations applies to noisy-neighbour only");
    }
    if args.webhook_batch.is_some() && args.target != Target::Webhook {
        bail!("--webhook-batch applies to webhook targets only");
    }
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    if args.target.is_bus() && args.server_config.is_some() {
        bail!(
            "with --target {} the bench writes the node's config file itself (its [connections.bench]); leave out --server-config",
            args.target.name()
        );
    }
    if args.target == Target::Sqs && args.bus_url.is_none() {
        bail!(
            "--target sqs needs --bus-url: an SQS endpoint such as moto's server (http://127.0.0.1:PORT)"
        );
    }
    if args.nodes > 1 && args.store.is_none() {
        bail!("--nodes above 1 needs a shared --store (the embedded store is one node's)");
    }
    Ok(())
}

fn payload_bytes_arg(text: &str) -> Result<usize, String> {
    let bytes: usize = text.parse().map_err(|e| format!("{e}"))?;
    match bytes {
        0 | 16..=262_144 => Ok(bytes),
        _ => Err("0 (no payload) or 16 to 262144 bytes".into()),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[test]
    fn payload_bytes_are_none_or_16_to_262144() {
        assert_eq!(payload_bytes_arg("0"), Ok(0));
        assert_eq!(payload_bytes_arg("16"), Ok(16));
        assert!(payload_bytes_arg("15").is_err());
        assert!(payload_bytes_arg("262145").is_err());
        assert!(payload_bytes_arg("many").is_err());
    }

    /// Every argument says what it is for in `--help`, and the scenarios are listed.
    #[test]
    fn every_argument_has_help() {
        let mut command = BenchArgs::command();
        command.build();
        let missing: Vec<_> = command
            .get_arguments()
            .filter(|arg| {
                let help = arg.get_help().or(arg.get_long_help());
                !arg.is_hide_set() && help.is_none_or(|h| h.to_string().trim().is_empty())
            })
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert!(missing.is_empty(), "without help: {missing:#?}");
        let help = command.render_long_help().to_string();
        for scenario in [
            "burst",
            "sustained",
            "far-future",
            "cron",
            "noisy-neighbour",
        ] {
            assert!(help.contains(scenario), "{scenario} not in:\n{help}");
        }
    }

    /// The arguments `hourglass bench` took parse the same way as `hourglass-bench`'s.
    #[test]
    fn takes_the_scenario_and_its_flags() {
        let args = BenchArgs::try_parse_from([
            "hourglass-bench",
            "sustained",
            "--target",
            "queue",
            "--rates",
            "10000,20000",
            "--hold",
            "5s",
        ])
        .unwrap();
        assert_eq!(args.scenario, Scenario::Sustained);
        assert_eq!(args.target, Target::Queue);
        assert_eq!(args.rates, [10_000, 20_000]);
        assert_eq!(args.hold, Duration::from_secs(5));
        check_flags(&args).unwrap();

        let bad = BenchArgs::try_parse_from(["hourglass-bench", "burst", "--nodes", "2"]).unwrap();
        let e = check_flags(&bad).unwrap_err();
        assert!(e.to_string().contains("--store"), "{e}");
        // The node binary is for a node the bench starts as a child, not with --url.
        assert!(
            BenchArgs::try_parse_from([
                "hourglass-bench",
                "burst",
                "--url",
                "http://127.0.0.1:7070",
                "--server-bin",
                "/usr/bin/hourglass",
            ])
            .is_err()
        );
        assert!(BenchArgs::try_parse_from(["hourglass-bench", "warp"]).is_err());
    }
}
