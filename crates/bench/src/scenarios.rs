//! The six workloads. Each submits through the API, waits for the fires, and accounts for them
//! from what the receiver recorded.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;

use super::accounting::{Accounting, DeliveryKey, account, not_within};
use super::blackhole::Blackhole;
use super::report::{Noisy, Phase, Report, Step};
use super::server::Mode;
use super::submit::rfc3339_ms;
use super::{Bench, Scenario, now_ms, peak_per_second};

/// How long after the start the first burst job is due.
const BURST_DELAY_MS: i64 = 5_000;
/// Sustained: how long after a step's last due time its fires are counted.
const STEP_GRACE_MS: i64 = 1_000;
/// Sustained: the planner's default lookahead; a step's jobs should all exist by then.
const LOOKAHEAD_MS: i64 = 2_000;
/// Sustained: most jobs one step may create (memory: the bench keeps one entry per fire).
const MAX_STEP_JOBS: u128 = 5_000_000;
const DAY_MS: i64 = 86_400_000;
/// Burst and noisy-neighbour: the window the due times are spread over unless --spread says.
const DEFAULT_SPREAD: Duration = Duration::from_secs(20);
/// Noisy-neighbour with --destinations: the noisy one-offs per destination and the healthy
/// one-offs, unless --slow-jobs and --jobs say otherwise.
const SLOW_JOBS_PER_DESTINATION: usize = 200;
const HEALTHY_JOBS_BESIDE_DESTINATIONS: usize = 40;
/// Noisy-neighbour: the healthy namespace's occurrences counted as late beyond these.
const LATE_MS: i64 = 1_000;
const UNDELIVERED_MS: i64 = 30_000;

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// `start + i/n × span`, exact in integers.
fn spread(start: i64, span_ms: i64, i: usize, n: usize) -> i64 {
    start + (i as i128 * span_ms as i128 / n as i128) as i64
}

/// The one occurrence each submitted one-off job must produce: job i is due at `due(i)`.
fn expected_one_offs(
    submitted: &super::submit::Submitted,
    due: impl Fn(usize) -> i64,
) -> HashMap<DeliveryKey, i64> {
    submitted
        .jobs
        .iter()
        .enumerate()
        .map(|(i, job)| (DeliveryKey::new(job.job, due(i)), due(i)))
        .collect()
}

pub async fn burst(b: &mut Bench) -> anyhow::Result<Report> {
    let n = b.args.jobs.unwrap_or(100_000);
    let span = ms(b.args.spread.unwrap_or(DEFAULT_SPREAD));
    let mut report = Report::new(Scenario::Burst);
    b.recorder.reserve(n + n / 8);
    report.start_stats = b.stats();
    let t0 = now_ms();
    let due = move |i: usize| spread(t0 + BURST_DELAY_MS, span, i, n);
    let writer = b.job_writer(move |i| format!("{{\"at\":\"{}\"}}", rfc3339_ms(due(i))));
    let submitted = b.submit(n, true, writer).await?;
    report.jobs = n as u64;
    report.submit_seconds = submitted.seconds;
    report.submit_retries = submitted.retries;
    if now_ms() > due(0) {
        report.notes.push(format!(
            "submission took longer than the {BURST_DELAY_MS} ms before the first due time: the first jobs were late from the start"
        ));
    }
    let expected = expected_one_offs(&submitted, due);
    let last_due = due(n - 1);
    b.wait_until(last_due, n as u64, "wait").await?;
    report.complete = b
        .drain(&expected, last_due + ms(b.args.drain_timeout), |_| true)
        .await?;
    report.end_stats = b.stats();
    let receipts = b.recorder.take();
    finish(&mut report, account(&expected, &receipts), &receipts);
    Ok(report)
}

/// The healthy namespace's jobs alone, then beside the noisy namespace's: the second phase's
/// figures are the report's headline. The noisy namespace's one-offs go round-robin to its
/// destinations, all misbehaving the same way; with --destinations everything is due at once, as
/// when one tenant's backlog to hanging hosts comes due together with another tenant's work.
pub async fn noisy_neighbour(b: &mut Bench) -> anyhow::Result<Report> {
    let destinations = b.args.destinations.map(usize::from);
    let n = b.args.jobs.unwrap_or(match destinations {
        Some(_) => HEALTHY_JOBS_BESIDE_DESTINATIONS,
        None => 5_000,
    });
    let slow_n = b.args.slow_jobs.unwrap_or(match destinations {
        Some(d) => SLOW_JOBS_PER_DESTINATION * d,
        None => 2_000,
    });
    let span = match (b.args.spread, destinations) {
        (Some(spread), _) => ms(spread),
        (None, Some(_)) => 0,
        (None, None) => ms(DEFAULT_SPREAD),
    };
    let mut report = Report::new(Scenario::NoisyNeighbour);
    b.recorder.reserve(n + n / 8);
    report.start_stats = b.stats();
    let api = b.api.clone();
    b.api = api.in_namespace("fast");
    let alone = healthy_phase(b, "alone", n, span, now_ms() + BURST_DELAY_MS).await;
    let alone = match alone {
        Ok(alone) => alone,
        Err(e) => {
            b.api = api;
            return Err(e);
        }
    };
    let hole = Blackhole::start(b.args.slow, destinations.unwrap_or(1)).await?;
    let first_due = now_ms() + BURST_DELAY_MS;
    let slow_due = move |i: usize| spread(first_due, span, i, slow_n.max(1));
    let targets: Vec<String> = hole
        .urls()
        .iter()
        .map(|url| super::submit::webhook_target(url, None))
        .collect();
    let writer: super::JobWriter = std::sync::Arc::new(move |i, body: &mut String| {
        super::submit::write_job(
            body,
            format_args!("{{\"at\":\"{}\"}}", rfc3339_ms(slow_due(i))),
            &targets[i % targets.len()],
            "",
        )
    });
    b.api = api.in_namespace("slow");
    let slow_submitted = if slow_n > 0 {
        b.submit(slow_n, false, writer).await.map(|_| ())
    } else {
        Ok(())
    };
    b.api = api.in_namespace("fast");
    let beside = match slow_submitted {
        Ok(()) => healthy_phase(b, "beside the noisy namespace", n, span, first_due).await,
        Err(e) => Err(e),
    };
    b.api = api;
    let beside = beside?;
    report.end_stats = b.stats();
    report.jobs = n as u64;
    report.submit_seconds = beside.submit_seconds;
    report.complete = alone.complete && beside.complete;
    report.lateness = beside.acc.lateness;
    report.lateness_scope = "the healthy namespace, beside the noisy one";
    report.fire_rate_per_s = beside.acc.fire_rate_per_s();
    report.acc = beside.acc.clone();
    if ms(b.args.drain_timeout) < UNDELIVERED_MS {
        report.notes.push(format!(
            "--drain-timeout is under 30 s: \"not within 30 s\" counts occurrences still missing after {} ms",
            ms(b.args.drain_timeout)
        ));
    }
    report.noisy = Some(Noisy {
        mode: b.args.slow.name(),
        slow_jobs: slow_n as u64,
        destinations: hole.urls().len(),
        slow_requests: hole.requests(),
        slow_peak_open: hole.peak_open(),
        phases: vec![alone, beside],
    });
    Ok(report)
}

/// Creates `n` one-offs in the current namespace, due evenly over `span_ms` from `first_due`,
/// and accounts for their deliveries.
async fn healthy_phase(
    b: &mut Bench,
    name: &'static str,
    n: usize,
    span_ms: i64,
    first_due: i64,
) -> anyhow::Result<Phase> {
    let due = move |i: usize| spread(first_due, span_ms, i, n);
    let writer = b.job_writer(move |i| format!("{{\"at\":\"{}\"}}", rfc3339_ms(due(i))));
    let submitted = b.submit(n, true, writer).await?;
    let expected = expected_one_offs(&submitted, due);
    let last_due = due(n - 1);
    b.wait_until(last_due, n as u64, name).await?;
    let complete = b
        .drain(&expected, last_due + ms(b.args.drain_timeout), |_| true)
        .await?;
    let receipts = b.recorder.take();
    Ok(Phase {
        name,
        submit_seconds: submitted.seconds,
        acc: account(&expected, &receipts),
        late_over_1s: not_within(&expected, &receipts, LATE_MS),
        not_within_30s: not_within(&expected, &receipts, UNDELIVERED_MS),
        complete,
    })
}

pub async fn cron(b: &mut Bench) -> anyhow::Result<Report> {
    if let Some(jitter) = b.args.jitter {
        return cron_jittered(b, jitter).await;
    }
    let n = b.args.jobs.unwrap_or(10_000);
    let window = ms(b.args.duration);
    let mut report = Report::new(Scenario::Cron);
    let per_job = (window / 1000) as usize + 2;
    // Fires go on while the bench drains; leave room for ten more seconds of them.
    b.recorder.reserve(n * (per_job + 10));
    report.start_stats = b.stats();
    // The overlap policy rides after the schedule object, as a field of the job beside it.
    let overlap = match &b.args.overlap {
        Some(policy) => format!(",\"overlap\":\"{policy}\""),
        None => String::new(),
    };
    let writer = b.job_writer(move |_| format!("{{\"cron\":\"* * * * * *\"}}{overlap}"));
    let submitted = b.submit(n, true, writer).await?;
    report.jobs = n as u64;
    report.submit_seconds = submitted.seconds;
    report.submit_retries = submitted.retries;
    // Every occurrence from each job's first due time to the end of the window.
    let window_end = now_ms() + window;
    let mut expected: HashMap<DeliveryKey, i64> = HashMap::with_capacity(n * per_job);
    for job in &submitted.jobs {
        let first = job
            .next_due_ms
            .context("a created cron job has no next_due_at")?;
        let mut due = first;
        while due <= window_end {
            expected.insert(DeliveryKey::new(job.job, due), due);
            due += 1000;
        }
    }
    let in_window = move |r: &super::accounting::Receipt| r.id.due_ms <= window_end;
    b.wait_until(window_end, expected.len() as u64, "run")
        .await?;
    report.complete = b
        .drain(&expected, window_end + ms(b.args.drain_timeout), in_window)
        .await?;
    report.end_stats = b.stats();
    let receipts: Vec<_> = b
        .recorder
        .take()
        .into_iter()
        .filter(|r| in_window(r))
        .collect();
    finish(&mut report, account(&expected, &receipts), &receipts);
    // Cron fires come in one wave per second: the rate is the occurrences per second of the
    // window, not the spread between the first and the last arrival.
    if let Some(first_due) = expected.values().min() {
        let seconds = (window_end - first_due) as f64 / 1000.0 + 1.0;
        report.fire_rate_per_s = Some(report.acc.executed as f64 / seconds);
    }
    report.notes.push(format!(
        "window: each job's first occurrence through {} ({} s after submission ended); occurrences due later are not counted",
        rfc3339_ms(window_end),
        window / 1000
    ));
    if b.server.mode == Mode::External {
        let ids: Vec<u128> = submitted.jobs.iter().map(|j| j.job).collect();
        let failed = b.api.cancel(&ids, 16).await;
        report.notes.push(format!(
            "cancelled the {n} cron jobs on the external node ({failed} cancels failed)"
        ));
    }
    Ok(report)
}

/// `cron --jitter`: N jobs `0 * * * * *` with that jitter, all first due at the same minute (at
/// least 10 s ahead, their `start`); each one's occurrence there is expected once, at or after
/// its fire time (lateness counts from it), and the deliveries' spread over the window is noted.
async fn cron_jittered(b: &mut Bench, jitter: Duration) -> anyhow::Result<Report> {
    let n = b.args.jobs.unwrap_or(1_000);
    let mut report = Report::new(Scenario::Cron);
    b.recorder.reserve(n * 2);
    report.start_stats = b.stats();
    let minute = (now_ms() + 10_000).div_euclid(60_000) * 60_000 + 60_000;
    let schedule = format!(
        "{{\"cron\":\"0 * * * * *\",\"start\":\"{}\",\"jitter\":\"{}ms\"}}",
        rfc3339_ms(minute),
        ms(jitter)
    );
    let writer = b.job_writer(move |_| schedule.clone());
    // Whole answers: the brief one has no next_fire_at.
    let brief = std::mem::replace(&mut b.api.full_responses, true);
    let submitted = b.submit(n, true, writer).await;
    b.api.full_responses = brief;
    let submitted = submitted?;
    report.jobs = n as u64;
    report.submit_seconds = submitted.seconds;
    report.submit_retries = submitted.retries;
    let mut expected: HashMap<DeliveryKey, i64> = HashMap::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    for job in &submitted.jobs {
        let due = job
            .next_due_ms
            .context("a created job has no next_due_at")?;
        let fire = job
            .next_fire_ms
            .context("a created jittered job has no next_fire_at")?;
        anyhow::ensure!(due == minute, "a job is first due at {due}, not {minute}");
        expected.insert(DeliveryKey::new(job.job, due), fire);
        offsets.push(fire - due);
    }
    let window_end = minute + ms(jitter);
    let in_window = move |r: &super::accounting::Receipt| r.id.due_ms == minute;
    b.wait_until(window_end, expected.len() as u64, "run")
        .await?;
    report.complete = b
        .drain(&expected, window_end + ms(b.args.drain_timeout), in_window)
        .await?;
    report.end_stats = b.stats();
    let receipts: Vec<_> = b
        .recorder
        .take()
        .into_iter()
        .filter(|r| in_window(r))
        .collect();
    // Arrivals by tenth of the window after the due minute (first receipt of each occurrence).
    let tenth = (ms(jitter) / 10).max(1);
    let mut arrived = [0u64; 11];
    let mut first: HashMap<DeliveryKey, i64> = HashMap::with_capacity(n);
    for r in &receipts {
        let at = first.entry(r.id).or_insert(r.received_ms);
        *at = (*at).min(r.received_ms);
    }
    for at in first.values() {
        arrived[((at - minute).max(0) / tenth).min(10) as usize] += 1;
    }
    offsets.sort_unstable();
    report.notes.push(format!(
        "jitter {} ms: {} jobs due at {}; fire offsets min {} ms, median {} ms, max {} ms",
        ms(jitter),
        n,
        rfc3339_ms(minute),
        offsets.first().copied().unwrap_or_default(),
        offsets.get(offsets.len() / 2).copied().unwrap_or_default(),
        offsets.last().copied().unwrap_or_default(),
    ));
    report.notes.push(format!(
        "deliveries by tenth of the window after the due time (the last: later): {arrived:?}"
    ));
    finish(&mut report, account(&expected, &receipts), &receipts);
    report.lateness_scope = "per occurrence, first receipt, from its jittered fire time";
    // `expected` holds fire times; the header carries the due time, as the delivery id does.
    report.acc.due_mismatch = receipts
        .iter()
        .filter(|r| r.due_header_ms != r.id.due_ms)
        .count() as u64;
    if b.server.mode == Mode::External {
        let ids: Vec<u128> = submitted.jobs.iter().map(|j| j.job).collect();
        let failed = b.api.cancel(&ids, 16).await;
        report.notes.push(format!(
            "cancelled the {n} cron jobs on the external node ({failed} cancels failed)"
        ));
    }
    Ok(report)
}

pub async fn far_future(b: &mut Bench) -> anyhow::Result<Report> {
    let n = b.args.jobs.unwrap_or(1_000_000);
    let mut report = Report::new(Scenario::FarFuture);
    report.start_stats = b.stats();
    let t0 = now_ms();
    // Due 1 to 30 days ahead, evenly.
    let due = move |i: usize| spread(t0 + DAY_MS, 29 * DAY_MS, i, n);
    let writer = b.job_writer(move |i| format!("{{\"at\":\"{}\"}}", rfc3339_ms(due(i))));
    let submitted = b.submit(n, false, writer).await?;
    report.jobs = n as u64;
    report.submit_seconds = submitted.seconds;
    report.submit_retries = submitted.retries;
    // Let the node settle (its planner looks once at the next due time), then watch it idle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_start = b.stats();
    let started = std::time::Instant::now();
    b.wait_until(now_ms() + ms(b.args.idle), 0, "idle").await?;
    let idle_end = b.stats();
    let idle_seconds = started.elapsed().as_secs_f64();
    report.idle_cpu_percent = match (idle_start, idle_end) {
        (Some(s), Some(e)) => Some((e.cpu_seconds - s.cpu_seconds) / idle_seconds * 100.0),
        _ => None,
    };
    report.idle_cpu_resolution = Some(100.0 / super::server::clock_ticks() / idle_seconds);
    report.end_stats = idle_end;
    report.store_bytes = match b.server.store_bytes().await {
        Some(Ok(bytes)) => Some(bytes),
        Some(Err(e)) => {
            report.notes.push(format!("store size unknown: {e:#}"));
            None
        }
        None => {
            report
                .notes
                .push("store size unknown: give --data-dir with --url".into());
            None
        }
    };
    if b.server.mode == Mode::External {
        report.notes.push(format!(
            "the {n} far-future jobs stay on the external node (due in 1 to 30 days)"
        ));
    }
    // Nothing is due for a day: anything received is a fire that should not have happened.
    let receipts = b.recorder.take();
    finish(&mut report, account(&HashMap::new(), &receipts), &receipts);
    Ok(report)
}

pub async fn sustained(b: &mut Bench) -> anyhow::Result<Report> {
    let hold = ms(b.args.hold);
    let p99_limit = ms(b.args.p99_limit);
    let rates = b.args.rates.clone();
    let mut report = Report::new(Scenario::Sustained);
    report.p99_limit_ms = p99_limit;
    report.start_stats = b.stats();
    // Jobs per second the node accepts; measured by each step for the next one's lead time.
    let mut submit_rate = 20_000.0f64;
    let mut all_expected: HashMap<DeliveryKey, i64> = HashMap::new();
    let mut all_receipts = Vec::new();
    for rate in rates {
        let n = rate as u128 * hold as u128 / 1000;
        if n == 0 {
            continue;
        }
        if n > MAX_STEP_JOBS {
            report.notes.push(format!(
                "stopped before {rate}/s: {n} jobs in one step is more than the bench keeps track of ({MAX_STEP_JOBS})"
            ));
            break;
        }
        let n = n as usize;
        // Every job must exist before the planner's lookahead reaches the first due time.
        let lead = (n as f64 / submit_rate * 1500.0) as i64 + LOOKAHEAD_MS + 1_000;
        let start = now_ms() + lead;
        let due = move |i: usize| spread(start, hold, i, n);
        b.recorder.reserve(n + n / 8);
        let writer = b.job_writer(move |i| format!("{{\"at\":\"{}\"}}", rfc3339_ms(due(i))));
        let submitted = b.submit(n, true, writer).await?;
        submit_rate = (n as f64 / submitted.seconds.max(0.001)).max(100.0);
        let submit_end = now_ms();
        // The first step's lead is sized for a slow node, so it can wait minutes before its first
        // due time: say so, where no progress bar would (output sent to a file).
        eprintln!(
            "step {rate}/s: {n} jobs submitted in {:.1} s; the first due in {:.0} s, the last {:.0} s later",
            submitted.seconds,
            (start - submit_end).max(0) as f64 / 1000.0,
            hold as f64 / 1000.0
        );
        let fire_start = b.stats();
        report.jobs += n as u64;
        report.submit_seconds += submitted.seconds;
        report.submit_retries += submitted.retries;
        let expected = expected_one_offs(&submitted, due);
        let last_due = due(n - 1);
        b.wait_until(last_due + STEP_GRACE_MS, n as u64, &format!("{rate}/s"))
            .await?;
        let at_end = account(&expected, &b.recorder.snapshot());
        let held = at_end.missing == 0 && at_end.lateness.is_some_and(|l| l.p99 <= p99_limit);
        let drained = b
            .drain(&expected, last_due + ms(b.args.drain_timeout), |_| true)
            .await?;
        report.complete &= drained;
        let fire_end = b.stats();
        let receipts = b.recorder.take();
        let total = account(&expected, &receipts);
        eprintln!(
            "step {rate}/s: {} — {} jobs, at end of step {} missing, p99 {} ms; after drain {} missing",
            if held { "held" } else { "FAILED" },
            n,
            at_end.missing,
            at_end.lateness.map_or("n/a".into(), |l| l.p99.to_string()),
            total.missing
        );
        report.steps.push(Step {
            rate,
            jobs: n as u64,
            submit_seconds: submitted.seconds,
            lead_ms: lead,
            submit_overran_ms: (submit_end > start - LOOKAHEAD_MS)
                .then_some(submit_end - (start - LOOKAHEAD_MS)),
            at_end,
            total,
            held,
            server_cpu_seconds: match (fire_start, fire_end) {
                (Some(s), Some(e)) => Some(e.cpu_seconds - s.cpu_seconds),
                _ => None,
            },
        });
        all_expected.extend(expected);
        all_receipts.extend(receipts);
        if !held {
            break;
        }
    }
    report.end_stats = b.stats();
    let overall = account(&all_expected, &all_receipts);
    finish(&mut report, overall, &all_receipts);
    let best = report.steps.iter().rev().find(|s| s.held);
    report.max_rate_held = best.map(|s| s.rate);
    report.fire_rate_per_s = best.map(|s| s.rate as f64);
    report.lateness = best.or(report.steps.first()).and_then(|s| s.total.lateness);
    report.lateness_scope = if best.is_some() {
        "at the highest rate held"
    } else {
        "at the first step (none held)"
    };
    report.notes.push(
        "counts (executed, missing, duplicates, early) cover every step; lateness is that of the highest rate held".into(),
    );
    Ok(report)
}

/// Fills in the accounting-derived figures shared by every scenario.
/// `anchor-move`: N one-offs on one anchor an hour ahead, job i `1 s + i/n × spread` before it;
/// then the anchor moves to 5 s plus the spread after the submission ended. Each job's one
/// occurrence is expected at its new time (a delivery at an old time counts as unexpected); the
/// move's answer time and `jobs_moved` are noted.
pub async fn anchor_move(b: &mut Bench) -> anyhow::Result<Report> {
    let n = b.args.jobs.unwrap_or(10_000);
    let span = ms(b.args.spread.unwrap_or(Duration::from_secs(10)));
    let mut report = Report::new(Scenario::AnchorMove);
    b.recorder.reserve(n + n / 8);
    report.start_stats = b.stats();
    let name = format!("bench-{}", now_ms());
    put_anchor(&b.api, &name, now_ms() + 3_600_000).await?;
    let before = move |i: usize| 1_000 + spread(0, span, i, n);
    let anchor = name.clone();
    let writer = b.job_writer(move |i| {
        format!(
            "{{\"anchor\":\"{anchor}\",\"offset\":\"-{}ms\"}}",
            before(i)
        )
    });
    let submitted = b.submit(n, true, writer).await?;
    report.jobs = n as u64;
    report.submit_seconds = submitted.seconds;
    report.submit_retries = submitted.retries;
    let new_at = now_ms() + BURST_DELAY_MS + span + 1_000;
    let asked = std::time::Instant::now();
    let moved = put_anchor(&b.api, &name, new_at).await?;
    let answered_ms = asked.elapsed().as_secs_f64() * 1000.0;
    let due = move |i: usize| new_at - before(i);
    let expected = expected_one_offs(&submitted, due);
    let last_due = expected.values().copied().max().unwrap_or(new_at);
    b.wait_until(last_due, n as u64, "wait").await?;
    report.complete = b
        .drain(&expected, last_due + ms(b.args.drain_timeout), |_| true)
        .await?;
    report.end_stats = b.stats();
    let receipts = b.recorder.take();
    finish(&mut report, account(&expected, &receipts), &receipts);
    report.notes.push(format!(
        "the move of {n} jobs answered in {answered_ms:.0} ms with jobs_moved {moved}; \
         their new times {} to {}",
        rfc3339_ms(new_at - before(n - 1)),
        rfc3339_ms(new_at - before(0)),
    ));
    anyhow::ensure!(moved == n as u64, "the move moved {moved} jobs, not {n}");
    Ok(report)
}

/// `PUT /v1/anchors/{name}` at `at_ms`: the answer's `jobs_moved`.
async fn put_anchor(api: &super::submit::Api, name: &str, at_ms: i64) -> anyhow::Result<u64> {
    let response = api
        .request(reqwest::Method::PUT, &format!("/v1/anchors/{name}"))
        .header("content-type", "application/json")
        .body(format!("{{\"at\":\"{}\"}}", rfc3339_ms(at_ms)))
        .send()
        .await
        .context("PUT /v1/anchors")?;
    let status = response.status();
    let bytes = response.bytes().await.context("the anchor's answer")?;
    let body: serde_json::Value =
        serde_json::from_slice(&bytes).context("the anchor's answer is not JSON")?;
    anyhow::ensure!(
        status.is_success(),
        "PUT /v1/anchors/{name}: {status} {body}"
    );
    body["jobs_moved"]
        .as_u64()
        .context("the anchor's answer has no jobs_moved")
}

fn finish(report: &mut Report, acc: Accounting, receipts: &[super::accounting::Receipt]) {
    report.lateness = acc.lateness;
    report.fire_rate_per_s = acc.fire_rate_per_s();
    report.peak_receive_per_s = peak_per_second(receipts);
    report.acc = acc;
}
