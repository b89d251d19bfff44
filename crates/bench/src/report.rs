//! The bench's output: a human report, then (with --json) one JSON object on the last line.

use serde_json::{Value, json};

use super::Scenario;
use super::accounting::{Accounting, Lateness};
use super::server::{Mode, ProcStats};
use super::workers::WorkerStats;

/// One rate step of the sustained scenario.
pub struct Step {
    pub rate: u64,
    pub jobs: u64,
    pub submit_seconds: f64,
    /// How far ahead of the step's first due time its submission started.
    pub lead_ms: i64,
    /// Set when submission ended later than 2 s (the planner's lookahead) before the first due
    /// time: then the step's lateness includes the submission's own delay.
    pub submit_overran_ms: Option<i64>,
    /// What had arrived one second after the step's last due time.
    pub at_end: Accounting,
    /// After draining.
    pub total: Accounting,
    pub held: bool,
    /// The server's CPU time from the end of the step's submission to the end of its drain:
    /// firing alone, so CPU per fire can be compared across runs on a busy machine.
    pub server_cpu_seconds: Option<f64>,
}

impl Step {
    fn cpu_us_per_fire(&self) -> Option<f64> {
        let cpu = self.server_cpu_seconds?;
        (self.total.executed > 0).then(|| cpu * 1e6 / self.total.executed as f64)
    }
}

/// One phase of the noisy-neighbour scenario: the healthy namespace's deliveries.
pub struct Phase {
    pub name: &'static str,
    pub submit_seconds: f64,
    pub acc: Accounting,
    /// Occurrences that arrived more than 1 s after their due time, or never.
    pub late_over_1s: u64,
    /// Occurrences that arrived more than 30 s after their due time, or never.
    pub not_within_30s: u64,
    pub complete: bool,
}

/// What the noisy-neighbour scenario adds to a report.
pub struct Noisy {
    /// How the noisy namespace's receivers misbehaved.
    pub mode: &'static str,
    pub slow_jobs: u64,
    /// The noisy namespace's distinct destinations (ports).
    pub destinations: usize,
    /// Delivery attempts that reached the noisy receivers.
    pub slow_requests: u64,
    /// The most of those requests the receivers held at once: with `hang`, the noisy
    /// namespace's deliveries in flight at their peak.
    pub slow_peak_open: u64,
    /// The healthy namespace alone, then beside the noisy one.
    pub phases: Vec<Phase>,
}

pub struct Report {
    pub scenario: &'static str,
    /// `webhook` or `queue`.
    pub target: &'static str,
    pub jobs: u64,
    pub submit_seconds: f64,
    pub submit_retries: u64,
    pub acc: Accounting,
    /// Usually `acc.lateness`; for sustained, that of the highest rate held.
    pub lateness: Option<Lateness>,
    pub lateness_scope: &'static str,
    pub fire_rate_per_s: Option<f64>,
    pub peak_receive_per_s: Option<u64>,
    pub start_stats: Option<ProcStats>,
    pub end_stats: Option<ProcStats>,
    pub idle_cpu_percent: Option<f64>,
    pub store_bytes: Option<u64>,
    /// With --target webhook.
    pub receiver_ceiling_per_s: Option<f64>,
    /// With --target queue: what the workers did.
    pub queue: Option<WorkerStats>,
    pub mode: Mode,
    pub stats_include_bench: bool,
    /// `sqlite` or `postgres`, and how many nodes shared it.
    pub store: &'static str,
    pub nodes: usize,
    /// --payload-bytes: each job's payload size (0: none).
    pub payload_bytes: usize,
    pub foreign_requests: u64,
    /// TCP connections the node opened to the receiver during the run.
    pub receiver_connections: u64,
    /// With --batch: batch requests the receiver got, and the items in them.
    pub receiver_batches: Option<(u64, u64)>,
    /// Smallest CPU difference /proc can show over the idle window, in percent of one core.
    pub idle_cpu_resolution: Option<f64>,
    pub server_log_lines: Option<u64>,
    pub server_log_head: Vec<String>,
    pub steps: Vec<Step>,
    /// noisy-neighbour only.
    pub noisy: Option<Noisy>,
    pub max_rate_held: Option<u64>,
    /// Sustained: a step is held while lateness p99 stays at or under this.
    pub p99_limit_ms: i64,
    /// Whether every expected occurrence arrived before the drain timeout.
    pub complete: bool,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(scenario: Scenario) -> Self {
        Self {
            scenario: scenario.name(),
            target: "webhook",
            jobs: 0,
            submit_seconds: 0.0,
            submit_retries: 0,
            acc: Accounting::default(),
            lateness: None,
            lateness_scope: "per occurrence, first receipt",
            fire_rate_per_s: None,
            peak_receive_per_s: None,
            start_stats: None,
            end_stats: None,
            idle_cpu_percent: None,
            store_bytes: None,
            receiver_ceiling_per_s: None,
            queue: None,
            mode: Mode::Child,
            stats_include_bench: false,
            store: "sqlite",
            nodes: 1,
            payload_bytes: 0,
            foreign_requests: 0,
            receiver_connections: 0,
            receiver_batches: None,
            idle_cpu_resolution: None,
            server_log_lines: None,
            server_log_head: Vec::new(),
            steps: Vec::new(),
            noisy: None,
            max_rate_held: None,
            p99_limit_ms: 100,
            complete: true,
            notes: Vec::new(),
        }
    }

    fn submit_rate(&self) -> Option<f64> {
        (self.submit_seconds > 0.0).then(|| self.jobs as f64 / self.submit_seconds)
    }

    fn cpu_seconds(&self) -> Option<f64> {
        Some(self.end_stats?.cpu_seconds - self.start_stats?.cpu_seconds)
    }

    fn peak_rss_mb(&self) -> Option<f64> {
        Some(self.end_stats?.peak_rss_kb as f64 / 1024.0)
    }

    /// What a lateness figure measures, from due time to where.
    fn lateness_definition(&self) -> &'static str {
        match self.target {
            _ if self.queue.is_some() => "due → leased (lease answer received by a worker)",
            "nats" => "due → seen by a core NATS subscriber on the subject",
            "redis" => "due → returned by XREAD BLOCK",
            "sqs" => "due → the message's SentTimestamp (accepted by the queue)",
            _ => "due → received by the webhook receiver",
        }
    }
}

fn queue_json(q: &WorkerStats) -> Value {
    json!({
        "workers": q.workers,
        "lease_max": q.lease_max,
        "leases": q.leases,
        "empty_leases": q.empty_leases,
        "leased": q.leased,
        "mean_messages_per_lease": q.mean_batch().map(|x| round(x, 1)),
        "lease_errors": q.lease_errors,
        "ack_requests": q.ack_requests,
        "acked": q.acked,
        "acks_failed": q.acks_failed,
        "first_error": q.first_error,
    })
}

fn lateness_json(l: Option<Lateness>) -> Value {
    match l {
        Some(l) => json!({"p50": l.p50, "p90": l.p90, "p99": l.p99, "p999": l.p999, "max": l.max}),
        None => json!({"p50": null, "p90": null, "p99": null, "p999": null, "max": null}),
    }
}

fn lateness_text(l: Option<Lateness>) -> String {
    match l {
        Some(l) => format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            l.p50, l.p90, l.p99, l.p999, l.max
        ),
        None => "n/a (nothing received)".into(),
    }
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

pub fn to_json(r: &Report) -> Value {
    let steps: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            json!({
                "rate_per_s": s.rate,
                "jobs": s.jobs,
                "held": s.held,
                "submit_seconds": round(s.submit_seconds, 3),
                "submit_lead_ms": s.lead_ms,
                "submit_overran_ms": s.submit_overran_ms,
                "missing_at_end": s.at_end.missing,
                "lateness_ms_at_end": lateness_json(s.at_end.lateness),
                "executed": s.total.executed,
                "missing": s.total.missing,
                "duplicates": s.total.duplicates,
                "early": s.total.early,
                "lateness_ms": lateness_json(s.total.lateness),
                "measured_fire_rate_per_s": s.total.fire_rate_per_s().map(|x| round(x, 1)),
                "server_cpu_seconds": s.server_cpu_seconds.map(|x| round(x, 2)),
                "server_cpu_us_per_fire": s.cpu_us_per_fire().map(|x| round(x, 1)),
            })
        })
        .collect();
    let mut out = json!({
        "scenario": r.scenario,
        "jobs": r.jobs,
        "submit_seconds": round(r.submit_seconds, 3),
        "submit_rate_per_s": r.submit_rate().map(|x| round(x, 1)),
        "lateness_ms": lateness_json(r.lateness),
        "executed": r.acc.executed,
        "missing": r.acc.missing,
        "duplicates": r.acc.duplicates,
        "early": r.acc.early,
        "fire_rate_per_s": r.fire_rate_per_s.map(|x| round(x, 1)),
        "server_peak_rss_mb": r.peak_rss_mb().map(|x| round(x, 1)),
        "server_cpu_seconds": r.cpu_seconds().map(|x| round(x, 2)),
        "idle_cpu_percent": r.idle_cpu_percent.map(|x| round(x, 3)),
        "store_bytes": r.store_bytes,
        "receiver_ceiling_per_s": r.receiver_ceiling_per_s.map(|x| round(x, 0)),
        "store": r.store,
        "nodes": r.nodes,
        "version": env!("CARGO_PKG_VERSION"),
        // Beyond the fixed keys:
        "target": r.target,
        "lateness_definition": r.lateness_definition(),
        "expected": r.acc.expected,
        "unexpected": r.acc.unexpected,
        "due_header_mismatch": r.acc.due_mismatch,
        "peak_receive_per_s": r.peak_receive_per_s,
        "complete": r.complete,
        "server_mode": r.mode.name(),
        "server_stats_include_bench": r.stats_include_bench,
        "server_log_lines": r.server_log_lines,
        "receiver_connections": r.receiver_connections,
        "payload_bytes": r.payload_bytes,
    });
    if let Some((requests, items)) = r.receiver_batches {
        out["receiver_batch_requests"] = json!(requests);
        out["receiver_batch_items"] = json!(items);
    }
    if let Some(q) = &r.queue {
        out["acks_failed"] = json!(q.acks_failed);
        out["queue"] = queue_json(q);
    }
    if let Some(noisy) = &r.noisy {
        out["noisy"] = json!({
            "slow_mode": noisy.mode,
            "slow_jobs": noisy.slow_jobs,
            "destinations": noisy.destinations,
            "slow_requests": noisy.slow_requests,
            "slow_peak_in_flight": noisy.slow_peak_open,
            "phases": noisy.phases.iter().map(|p| json!({
                "name": p.name,
                "expected": p.acc.expected,
                "executed": p.acc.executed,
                "missing": p.acc.missing,
                "duplicates": p.acc.duplicates,
                "early": p.acc.early,
                "complete": p.complete,
                "late_over_1s": p.late_over_1s,
                "not_within_30s": p.not_within_30s,
                "lateness_ms": lateness_json(p.acc.lateness),
            })).collect::<Vec<_>>(),
        });
    }
    if r.scenario == Scenario::Sustained.name() {
        out["max_rate_held_per_s"] = json!(r.max_rate_held);
        out["p99_limit_ms"] = json!(r.p99_limit_ms);
        out["steps"] = Value::Array(steps);
    }
    out
}

pub fn print(r: &Report, json: bool) {
    let mut lines = Vec::new();
    lines.push(format!(
        "hourglass-bench {} (hourglass {}, store {}, {}, target {})",
        r.scenario,
        env!("CARGO_PKG_VERSION"),
        r.store,
        if r.nodes > 1 {
            format!("{} nodes, {}", r.nodes, r.mode.name())
        } else {
            format!("node {}", r.mode.name())
        },
        r.target
    ));
    if r.payload_bytes > 0 {
        lines.push(format!(
            "  payloads           {} bytes a job",
            r.payload_bytes
        ));
    }
    if let Some(ceiling) = r.receiver_ceiling_per_s {
        lines.push(format!(
            "  receiver ceiling   {ceiling:.0} requests/s (64 keep-alive connections, generator in the same process)"
        ));
    }
    if let Some(q) = &r.queue {
        lines.push(format!(
            "  workers            {} lease loops, up to {} messages a lease, acks in batches of up to {}",
            q.workers,
            q.lease_max,
            super::workers::MAX_ACK
        ));
    }
    lines.push(format!(
        "  submitted          {} jobs in {:.2} s ({}/s{})",
        r.jobs,
        r.submit_seconds,
        r.submit_rate().map_or("n/a".into(), |x| format!("{x:.0}")),
        if r.submit_retries > 0 {
            format!(", {} batch retries", r.submit_retries)
        } else {
            String::new()
        }
    ));
    if r.acc.expected > 0 || r.acc.unexpected > 0 {
        lines.push(format!(
            "  deliveries         expected {}  executed {}  missing {}  duplicates {}  early {}  unexpected {}{}",
            r.acc.expected,
            r.acc.executed,
            r.acc.missing,
            r.acc.duplicates,
            r.acc.early,
            r.acc.unexpected,
            if r.acc.due_mismatch > 0 {
                format!("  due-header mismatches {}", r.acc.due_mismatch)
            } else {
                String::new()
            }
        ));
        lines.push(format!(
            "  lateness (ms)      {}   [{}; {}]",
            lateness_text(r.lateness),
            r.lateness_definition(),
            r.lateness_scope
        ));
        lines.push(format!(
            "  fire rate          {}   (busiest second: {} received)",
            r.fire_rate_per_s
                .map_or("n/a".into(), |x| format!("{x:.0}/s")),
            r.peak_receive_per_s.map_or("n/a".into(), |x| x.to_string())
        ));
    }
    if let Some(noisy) = &r.noisy {
        lines.push(format!(
            "  noisy namespace    {} one-offs to {} that {}; {} attempts reached {}, at most {} held at once",
            noisy.slow_jobs,
            match noisy.destinations {
                1 => "a receiver".to_string(),
                n => format!("{n} receivers (ports)"),
            },
            match (noisy.mode, noisy.destinations) {
                ("hang", 1) => "never answers (hangs)",
                ("hang", _) => "never answer (hang)",
                ("error", 1) => "answers 500",
                ("error", _) => "answer 500",
                (_, 1) => "answers 429, Retry-After: 5",
                _ => "answer 429, Retry-After: 5",
            },
            noisy.slow_requests,
            if noisy.destinations == 1 { "it" } else { "them" },
            noisy.slow_peak_open
        ));
        for p in &noisy.phases {
            lines.push(format!(
                "  healthy, {:<27} executed {} of {}  missing {}  duplicates {}  early {}  over 1 s {}  not within 30 s {}  lateness (ms) {}",
                format!("{}:", p.name),
                p.acc.executed,
                p.acc.expected,
                p.acc.missing,
                p.acc.duplicates,
                p.acc.early,
                p.late_over_1s,
                p.not_within_30s,
                lateness_text(p.acc.lateness)
            ));
        }
    }
    if !r.steps.is_empty() {
        lines.push("  steps (rate/s: at end of step → after drain):".into());
        for s in &r.steps {
            lines.push(format!(
                "    {:>7}/s  {:>8} jobs  {}  at end: missing {}, {}  │ drained: missing {}, duplicates {}, early {}; fired at {}/s, server CPU {} µs a fire{}",
                s.rate,
                s.jobs,
                if s.held { "HELD  " } else { "FAILED" },
                s.at_end.missing,
                lateness_text(s.at_end.lateness),
                s.total.missing,
                s.total.duplicates,
                s.total.early,
                s.total
                    .fire_rate_per_s()
                    .map_or("n/a".into(), |x| format!("{x:.0}")),
                s.cpu_us_per_fire()
                    .map_or("n/a".into(), |x| format!("{x:.1}")),
                s.submit_overran_ms
                    .map_or(String::new(), |ms| format!("  (submission overran by {ms} ms)"))
            ));
        }
        lines.push(format!(
            "  highest rate held  {}",
            r.max_rate_held.map_or("none".into(), |x| format!(
                "{x}/s (lateness p99 ≤ {} ms, nothing missing at the end of the step)",
                r.p99_limit_ms
            ))
        ));
    }
    if let Some(cpu) = r.idle_cpu_percent {
        lines.push(format!(
            "  idle cpu           {cpu:.3}% of one core{}",
            r.idle_cpu_resolution.map_or(String::new(), |res| format!(
                " (/proc resolution over the window: {res:.3}%)"
            ))
        ));
    }
    if let Some(bytes) = r.store_bytes {
        lines.push(format!(
            "  store size         {:.1} MB after a WAL checkpoint ({:.0} bytes per job)",
            bytes as f64 / 1e6,
            if r.jobs > 0 {
                bytes as f64 / r.jobs as f64
            } else {
                0.0
            }
        ));
    }
    let scope = match (r.mode, r.stats_include_bench) {
        (_, true) => "whole bench process: includes the bench's receiver and submitters",
        (Mode::Child, _) if r.nodes > 1 => "the server processes alone, summed",
        (Mode::Child, _) => "the server process alone",
        _ => "the process given by --server-pid",
    };
    match (r.peak_rss_mb(), r.cpu_seconds()) {
        (Some(rss), Some(cpu)) => lines.push(format!(
            "  server             peak RSS {rss:.1} MB, CPU {cpu:.2} s during the run [{scope}]"
        )),
        _ => lines.push(
            "  server             RSS/CPU unknown (external node without --server-pid)".into(),
        ),
    }
    if let Some(q) = &r.queue {
        lines.push(format!(
            "  queue              {} leases ({} empty, {} failed), {} messages, {} a lease on average; {} acked in {} requests, acks failed {}",
            q.leases,
            q.empty_leases,
            q.lease_errors,
            q.leased,
            q.mean_batch().map_or("n/a".into(), |x| format!("{x:.1}")),
            q.acked,
            q.ack_requests,
            q.acks_failed
        ));
        if let Some(e) = &q.first_error {
            lines.push(format!("  first worker error {e}"));
        }
    }
    if r.receiver_connections > 0 {
        lines.push(format!(
            "  receiver           {} TCP connections opened by the node",
            r.receiver_connections
        ));
    }
    if let Some((requests, items)) = r.receiver_batches {
        let mean = if requests > 0 {
            format!("{:.1}", items as f64 / requests as f64)
        } else {
            "n/a".into()
        };
        lines.push(format!(
            "  batches            {items} deliveries in {requests} requests, {mean} a request"
        ));
    }
    if r.foreign_requests > 0 {
        lines.push(format!(
            "  {} also got  {} {} without an Hourglass delivery id",
            if r.queue.is_some() {
                "workers "
            } else {
                "receiver"
            },
            r.foreign_requests,
            if r.queue.is_some() {
                "messages"
            } else {
                "requests"
            }
        ));
    }
    if let Some(n) = r.server_log_lines.filter(|n| *n > 0) {
        lines.push(format!(
            "  server log         {n} warning/error lines; first ones:"
        ));
        for line in &r.server_log_head {
            lines.push(format!("    {line}"));
        }
    }
    if !r.complete {
        lines.push("  NOTE: the drain timed out with occurrences still missing".into());
    }
    for note in &r.notes {
        lines.push(format!("  note: {note}"));
    }
    for line in lines {
        println!("{line}");
    }
    if json {
        println!("{}", to_json(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_fixed_keys() {
        let mut report = Report::new(Scenario::Burst);
        report.jobs = 10;
        report.submit_seconds = 0.5;
        let value = to_json(&report);
        for key in [
            "scenario",
            "jobs",
            "submit_seconds",
            "submit_rate_per_s",
            "lateness_ms",
            "executed",
            "missing",
            "duplicates",
            "early",
            "fire_rate_per_s",
            "server_peak_rss_mb",
            "server_cpu_seconds",
            "idle_cpu_percent",
            "store_bytes",
            "receiver_ceiling_per_s",
            "store",
            "version",
        ] {
            assert!(value.get(key).is_some(), "missing {key}");
        }
        for key in ["p50", "p90", "p99", "p999", "max"] {
            assert!(
                value["lateness_ms"].get(key).is_some(),
                "missing lateness {key}"
            );
        }
        assert_eq!(value["submit_rate_per_s"], 20.0);
        assert_eq!(value["idle_cpu_percent"], Value::Null);
        assert_eq!(value["target"], "webhook");
        assert!(value.get("queue").is_none());
        // One line: it is the last line of stdout.
        assert!(!value.to_string().contains('\n'));
    }

    #[test]
    fn queue_runs_report_their_workers_and_what_lateness_means() {
        let mut report = Report::new(Scenario::Burst);
        report.target = "queue";
        report.queue = Some(WorkerStats {
            workers: 4,
            lease_max: 1000,
            leases: 12,
            empty_leases: 2,
            leased: 1000,
            acked: 998,
            acks_failed: 2,
            ack_requests: 3,
            ..WorkerStats::default()
        });
        let value = to_json(&report);
        assert_eq!(value["target"], "queue");
        assert_eq!(value["receiver_ceiling_per_s"], Value::Null);
        assert_eq!(value["acks_failed"], 2);
        assert_eq!(value["queue"]["mean_messages_per_lease"], 100.0);
        assert!(
            value["lateness_definition"]
                .as_str()
                .unwrap()
                .starts_with("due → leased")
        );
    }
}
