//! Crash and restart acceptance tests against the real `hourglass` binary: SIGKILL mid-run loses no
//! acknowledged job, never fires early and redelivers with the original delivery id; a graceful
//! (SIGTERM) or hard (SIGKILL) restart keeps ids, keys, schedules and next due times.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use common::{Api, Delivery, Receiver};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a (re)started node may take to print its listening line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long SIGTERM may take to drain an idle node.
const TERM_TIMEOUT: Duration = Duration::from_secs(5);
const READY_LINE: &str = "hourglass listening on http://";

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn rfc3339_ms(ms: i64) -> String {
    format!(
        "{:.3}",
        jiff::Timestamp::from_millisecond(ms).expect("valid instant")
    )
}

fn instant_ms(value: &Value) -> i64 {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected an instant, got {value}"))
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{value} is not an instant: {e}"))
        .as_millisecond()
}

/// A small xorshift generator, so the test needs no extra dependency; the seed is printed.
struct Rng(u64);

impl Rng {
    fn from_env_or_clock() -> Self {
        let seed = std::env::var("HOURGLASS_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("crash test seed: {seed} (set HOURGLASS_CRASH_SEED to replay)");
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// A temporary directory with the node's data dir and one stderr log per process started on it.
/// If the test panics, the tail of every log is printed for diagnosis.
struct Harness {
    dir: tempfile::TempDir,
    logs: Vec<PathBuf>,
}

impl Harness {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            logs: Vec::new(),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts `hourglass serve` on the data dir and a fresh loopback port, and waits until it
    /// reports that it listens (then checks /healthz).
    async fn start(&mut self) -> Server {
        let log = self
            .dir
            .path()
            .join(format!("stderr-{}.log", self.logs.len() + 1));
        self.logs.push(log.clone());
        let stderr = std::fs::File::create(&log).expect("stderr log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--allow-targets")
            .arg("127.0.0.0/8")
            .env("HOURGLASS_LOG", "warn")
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_LOG_FORMAT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn hourglass serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("read child stdout") {
                if let Some(addr) = line.strip_prefix(READY_LINE) {
                    return Some(addr.trim().parse::<SocketAddr>().expect("listen address"));
                }
            }
            None
        })
        .await;
        let addr = match ready {
            Ok(Some(addr)) => addr,
            Ok(None) => {
                let status = child.wait().await.expect("wait for child");
                panic!(
                    "hourglass exited ({status}) before listening; stderr:\n{}",
                    tail(&log, 40)
                );
            }
            Err(_) => panic!(
                "hourglass did not report listening within {READY_TIMEOUT:?}; stderr:\n{}",
                tail(&log, 40)
            ),
        };
        // Keep draining stdout so the child never blocks or fails on a full or closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        // reqwest is built without a default TLS provider; the binary installs ring, so do we.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = Api::new(addr);
        let (status, body) = api.call("GET", "/healthz", None).await;
        assert_eq!(status, 200, "healthz after start: {body}");
        Server { child, api }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for log in &self.logs {
                eprintln!(
                    "----- {} (tail) -----\n{}",
                    log.file_name().unwrap().to_string_lossy(),
                    tail(log, 40)
                );
            }
        }
    }
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One running `hourglass serve` child; SIGKILLed if dropped (`kill_on_drop`).
struct Server {
    child: Child,
    api: Api,
}

impl Server {
    /// SIGKILL, then reap the process so that its data dir lock is gone.
    async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        self.child.wait().await.expect("reap killed child");
    }

    /// SIGTERM, then wait for the graceful drain to end the process.
    async fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().expect("child still running");
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill -TERM");
        assert!(sent.success(), "kill -TERM {pid} failed: {sent}");
        match tokio::time::timeout(TERM_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.expect("wait for child"),
            Err(_) => panic!("hourglass did not exit within {TERM_TIMEOUT:?} of SIGTERM"),
        }
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll child")
    }
}

/// What the test knows about an acknowledged job.
#[derive(Debug, Clone, Copy)]
struct Expected {
    due_ms: i64,
    n: u64,
}

/// Acknowledged jobs by id, plus the counter that numbers their payloads.
#[derive(Default)]
struct Ledger {
    jobs: HashMap<String, Expected>,
    next_n: u64,
}

impl Ledger {
    /// Creates one one-off job per due time through the batch endpoint; records them once the
    /// node acknowledged the batch.
    async fn create_batch(&mut self, api: &Api, url: &str, dues: &[i64]) {
        let planned: Vec<(u64, i64)> = dues
            .iter()
            .map(|&due| {
                self.next_n += 1;
                (self.next_n, due)
            })
            .collect();
        let jobs: Vec<Value> = planned
            .iter()
            .map(|(n, due)| {
                json!({
                    "type": "crash.test",
                    "schedule": {"at": rfc3339_ms(*due)},
                    "target": {"webhook": {"url": url}},
                    "payload": {"n": n},
                })
            })
            .collect();
        let (status, body) = api
            .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
            .await;
        assert!(
            (200..300).contains(&status),
            "batch create answered {status}: {body}"
        );
        assert_eq!(body["created"], planned.len(), "batch create: {body}");
        let created = body["jobs"].as_array().expect("jobs array");
        assert_eq!(created.len(), planned.len());
        for (job, &(n, due_ms)) in created.iter().zip(&planned) {
            let id = job["id"].as_str().expect("job id").to_string();
            assert_eq!(
                instant_ms(&job["next_due_at"]),
                due_ms,
                "next_due_at of a new job is its `at`: {job}"
            );
            assert_eq!(job["payload"], json!({"n": n}));
            let previous = self.jobs.insert(id.clone(), Expected { due_ms, n });
            assert!(previous.is_none(), "job id {id} handed out twice");
        }
    }

    fn last_due_ms(&self) -> i64 {
        self.jobs.values().map(|e| e.due_ms).max().unwrap_or(0)
    }

    fn all_delivered(&self, deliveries: &[Delivery]) -> bool {
        if deliveries.len() < self.jobs.len() {
            return false;
        }
        let seen: std::collections::HashSet<&str> = deliveries
            .iter()
            .map(|d| d.header("hourglass-job-id"))
            .collect();
        self.jobs.keys().all(|id| seen.contains(id.as_str()))
    }
}

/// Waits until the receiver saw a delivery of every acknowledged job, or `deadline` passes.
/// Panics at once if the node dies meanwhile.
async fn wait_all_delivered(
    receiver: &Receiver,
    ledger: &Ledger,
    server: &mut Server,
    deadline: tokio::time::Instant,
) -> bool {
    loop {
        let done = tokio::time::timeout(
            Duration::from_secs(1),
            receiver.wait_for(Duration::from_secs(3600), "every job", |d| {
                ledger.all_delivered(d)
            }),
        )
        .await
        .is_ok();
        if done {
            return true;
        }
        if let Some(status) = server.exited() {
            panic!("hourglass exited unexpectedly ({status}) while jobs were still due");
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
    }
}

fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn summary(values: &mut [i64]) -> String {
    values.sort_unstable();
    format!(
        "n={} p50={}ms p99={}ms max={}ms",
        values.len(),
        percentile(values, 0.5),
        percentile(values, 0.99),
        values.last().copied().unwrap_or(0)
    )
}

const INITIAL_JOBS: usize = 3000;
const FIRING_WINDOW_MS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_mid_run_loses_no_acknowledged_job() {
    let mut harness = Harness::new();
    let mut rng = Rng::from_env_or_clock();
    let (receiver, recv_addr) = Receiver::start().await;
    let url = format!("http://{recv_addr}/crash");
    let mut ledger = Ledger::default();

    let mut server = harness.start().await;
    let fire_start = now_ms() + 3000;
    let fire_end = fire_start + FIRING_WINDOW_MS as i64;
    for _ in 0..INITIAL_JOBS / 1000 {
        let dues: Vec<i64> = (0..1000)
            .map(|_| fire_start + rng.below(FIRING_WINDOW_MS))
            .collect();
        ledger.create_batch(&server.api, &url, &dues).await;
    }
    assert_eq!(ledger.jobs.len(), INITIAL_JOBS);

    // Kill when roughly 20%, 45% and 70% of the initial jobs have been delivered (about 4 s,
    // 9 s and 14 s into the firing window), i.e. while deliveries stream in.
    let mut downtimes: Vec<(i64, i64)> = Vec::new();
    for share in [0.20, 0.45, 0.70] {
        let threshold = (INITIAL_JOBS as f64 * share) as usize + rng.below(150) as usize;
        receiver
            .wait_for(
                Duration::from_secs(40),
                &format!("{threshold} deliveries before a kill"),
                |d| d.len() >= threshold,
            )
            .await;
        // A batch acknowledged just before the kill, due around the restart.
        let now = now_ms();
        let dues: Vec<i64> = (0..50).map(|_| now + 300 + rng.below(2500)).collect();
        ledger.create_batch(&server.api, &url, &dues).await;

        let killed_at = now_ms();
        server.kill().await;
        server = harness.start().await;
        let back_at = now_ms();
        downtimes.push((killed_at, back_at));
        println!(
            "killed after {} deliveries at +{} ms into the window; back after {} ms",
            receiver.deliveries().len(),
            killed_at - fire_start,
            back_at - killed_at
        );

        // Jobs created on the restarted node, due over the rest of the window.
        let now = now_ms();
        let until = (fire_end - now).max(1000) as u64;
        let dues: Vec<i64> = (0..150).map(|_| now + 200 + rng.below(until)).collect();
        ledger.create_batch(&server.api, &url, &dues).await;
    }

    let deadline = tokio::time::Instant::now()
        + Duration::from_millis((ledger.last_due_ms() - now_ms()).max(0) as u64)
        + Duration::from_secs(60);
    let complete = wait_all_delivered(&receiver, &ledger, &mut server, deadline).await;
    let status = server.terminate().await;
    assert!(status.success(), "SIGTERM exit status: {status}");
    let deliveries = receiver.deliveries();

    // Group by job, in arrival order.
    let mut by_job: HashMap<&str, Vec<&Delivery>> = HashMap::new();
    for d in &deliveries {
        by_job
            .entry(d.header("hourglass-job-id"))
            .or_default()
            .push(d);
    }
    let unknown: Vec<&str> = by_job
        .keys()
        .copied()
        .filter(|id| !ledger.jobs.contains_key(*id))
        .collect();
    let mut missing: Vec<(&String, &Expected)> = ledger
        .jobs
        .iter()
        .filter(|(id, _)| !by_job.contains_key(id.as_str()))
        .collect();
    missing.sort_by_key(|(_, e)| e.due_ms);

    let mut mixed_ids = Vec::new();
    let mut early = Vec::new();
    let mut wrong_due = Vec::new();
    let mut wrong_payload = Vec::new();
    let mut first_lateness = Vec::new();
    let mut first_lateness_up = Vec::new();
    let mut redelivery_lateness = Vec::new();
    let mut duplicated_jobs = 0;
    for (id, list) in &by_job {
        let Some(expected) = ledger.jobs.get(*id) else {
            continue;
        };
        let ids: BTreeSet<&str> = list.iter().map(|d| d.header("webhook-id")).collect();
        if ids.len() != 1 {
            mixed_ids.push(format!("{id}: {ids:?}"));
        }
        if list.len() > 1 {
            duplicated_jobs += 1;
        }
        for (i, d) in list.iter().enumerate() {
            let due = d.due_ms();
            if due != expected.due_ms {
                wrong_due.push(format!(
                    "{id}: header due {} != created due {}",
                    d.header("hourglass-due-at"),
                    rfc3339_ms(expected.due_ms)
                ));
            }
            if d.received_ms < due {
                early.push(format!(
                    "{id}: received {} ms before its due {}",
                    due - d.received_ms,
                    d.header("hourglass-due-at")
                ));
            }
            if serde_json::from_slice::<Value>(&d.body).ok() != Some(json!({"n": expected.n})) {
                wrong_payload.push(format!("{id}: body {}", String::from_utf8_lossy(&d.body)));
            }
            let lateness = d.received_ms - expected.due_ms;
            if i == 0 {
                first_lateness.push(lateness);
                let due_while_down = downtimes
                    .iter()
                    .any(|(down, up)| (*down..=*up).contains(&expected.due_ms));
                if !due_while_down {
                    first_lateness_up.push(lateness);
                }
            } else {
                redelivery_lateness.push(lateness);
            }
        }
    }

    println!("---- crash test summary ----");
    println!(
        "jobs acknowledged: {} ({} before the first kill); deliveries: {}; distinct jobs delivered: {}",
        ledger.jobs.len(),
        INITIAL_JOBS,
        deliveries.len(),
        by_job.len()
    );
    println!(
        "duplicates: {} extra deliveries over {} jobs; kills: {}; downtimes (ms): {:?}",
        deliveries.len() - by_job.len(),
        duplicated_jobs,
        downtimes.len(),
        downtimes.iter().map(|(d, u)| u - d).collect::<Vec<_>>()
    );
    println!(
        "lateness, first deliveries (max excludes redeliveries): {}",
        summary(&mut first_lateness)
    );
    println!(
        "lateness, first deliveries of jobs not due while the node was down: {}",
        summary(&mut first_lateness_up)
    );
    println!(
        "lateness, redeliveries after kills: {}",
        summary(&mut redelivery_lateness)
    );

    let examples = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>();
    assert!(
        complete && missing.is_empty(),
        "{} acknowledged jobs never delivered, e.g. {:?}",
        missing.len(),
        missing
            .iter()
            .take(5)
            .map(|(id, e)| format!("{id} due {}", rfc3339_ms(e.due_ms)))
            .collect::<Vec<_>>()
    );
    assert!(
        unknown.is_empty(),
        "deliveries for {} job ids never created, e.g. {:?}",
        unknown.len(),
        &unknown[..unknown.len().min(5)]
    );
    assert!(
        mixed_ids.is_empty(),
        "{} jobs delivered under more than one delivery id, e.g. {:?}",
        mixed_ids.len(),
        examples(&mixed_ids)
    );
    assert!(
        early.is_empty(),
        "{} deliveries before their due time, e.g. {:?}",
        early.len(),
        examples(&early)
    );
    assert!(
        wrong_due.is_empty(),
        "{} deliveries with a due time other than the job's, e.g. {:?}",
        wrong_due.len(),
        examples(&wrong_due)
    );
    assert!(
        wrong_payload.is_empty(),
        "{} deliveries with another job's payload, e.g. {:?}",
        wrong_payload.len(),
        examples(&wrong_payload)
    );
}

/// GETs each job, by id.
async fn snapshot(api: &Api, ids: &[String]) -> Vec<Value> {
    let mut jobs = Vec::new();
    for id in ids {
        let (status, job) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
        assert_eq!(status, 200, "GET /v1/jobs/{id}: {job}");
        jobs.push(job);
    }
    jobs
}

/// Checks a restarted node against what the previous process answered.
async fn assert_same_jobs(
    api: &Api,
    when: &str,
    ids: &[String],
    before: &[Value],
    keyed: &[Value],
) {
    let after = snapshot(api, ids).await;
    for (old, new) in before.iter().zip(&after) {
        for field in ["id", "key", "type", "state", "schedule", "next_due_at"] {
            assert_eq!(
                old[field], new[field],
                "{when}: {field} of job {} changed:\nbefore {old}\nafter  {new}",
                old["id"]
            );
        }
        assert_eq!(old, new, "{when}: job record changed");
    }

    let (status, list) = api.call("GET", "/v1/jobs?limit=1000", None).await;
    assert_eq!(status, 200, "{when}: list: {list}");
    let listed: BTreeSet<&str> = list["jobs"]
        .as_array()
        .expect("jobs array")
        .iter()
        .map(|j| j["id"].as_str().expect("id"))
        .collect();
    let expected: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(
        listed, expected,
        "{when}: GET /v1/jobs lists exactly the jobs"
    );

    for body in keyed {
        let (status, job) = api.call("POST", "/v1/jobs", Some(body.clone())).await;
        assert_eq!(status, 200, "{when}: repeated keyed create: {job}");
        let original = before
            .iter()
            .find(|j| j["key"] == body["key"])
            .expect("keyed job");
        assert_eq!(job["id"], original["id"], "{when}: idempotent create");
        assert_eq!(job["next_due_at"], original["next_due_at"]);
    }

    // The same key with another body is a conflict, not a new job.
    let mut changed = keyed[0].clone();
    changed["payload"] = json!({"changed": true});
    let (status, answer) = api.call("POST", "/v1/jobs", Some(changed)).await;
    assert_eq!(status, 409, "{when}: reused key, other body: {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_survive_graceful_and_hard_restarts() {
    let mut harness = Harness::new();
    let server = harness.start().await;
    // Nothing is due within the test: the target is never called.
    let url = "http://127.0.0.1:9/never";
    let now = jiff::Timestamp::now();
    let cron_hour = (now.to_zoned(jiff::tz::TimeZone::UTC).hour() + 2) % 24;
    let keyed = vec![
        json!({
            "key": "restart-at",
            "type": "restart.at",
            "schedule": {"at": rfc3339_ms(now.as_millisecond() + 3_600_000)},
            "target": {"webhook": {"url": url}},
            "payload": {"kind": "at"},
        }),
        json!({
            "key": "restart-cron",
            "schedule": {"cron": format!("0 30 {cron_hour} * * *"), "timezone": "Europe/Berlin"},
            "target": {"webhook": {"url": url, "headers": {"X-Tenant": "acme"}}},
            "payload": {"kind": "cron"},
        }),
        json!({
            "key": "restart-every",
            "schedule": {"every": "1h", "max_runs": 5},
            "target": {"webhook": {"url": url}},
            "retry": {"max_attempts": 4, "initial_backoff": "2s", "max_backoff": "1m"},
        }),
    ];
    let unkeyed = json!({
        "schedule": {"after": "1h"},
        "target": {"webhook": {"url": url}},
        "misfire": "once",
    });

    let mut ids = Vec::new();
    for body in keyed.iter().chain([&unkeyed]) {
        let job = server.api.create(body.clone()).await;
        assert_eq!(job["key"], body.get("key").cloned().unwrap_or(Value::Null));
        assert!(job["next_due_at"].is_string(), "{job}");
        ids.push(job["id"].as_str().expect("id").to_string());
    }
    let before = snapshot(&server.api, &ids).await;
    assert_same_jobs(&server.api, "before any restart", &ids, &before, &keyed).await;

    let status = server.terminate().await;
    assert!(
        status.success(),
        "SIGTERM should drain and exit 0: {status}"
    );
    let server = harness.start().await;
    assert_same_jobs(&server.api, "after SIGTERM", &ids, &before, &keyed).await;

    server.kill().await;
    let server = harness.start().await;
    assert_same_jobs(&server.api, "after SIGKILL", &ids, &before, &keyed).await;

    let status = server.terminate().await;
    assert!(
        status.success(),
        "SIGTERM should drain and exit 0: {status}"
    );
}

/// Queue messages leased when the server is SIGKILLed: the unacked ones are delivered again after
/// the restart, the acked ones never are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_leased_queue_messages_redelivers_only_unacked_ones() {
    let mut harness = Harness::new();
    let server = harness.start().await;
    let jobs: Vec<Value> = (0..40)
        .map(|i| {
            json!({
                "type": "crash.queue",
                "schedule": {"after": "1ms"},
                "target": {"queue": "work"},
                "payload": {"i": i},
            })
        })
        .collect();
    let (status, created) = server
        .api
        .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
        .await;
    assert_eq!(status, 201, "{created}");
    let all: BTreeSet<String> = created["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all.len(), 40);

    // Lease everything for a long time, then ack half.
    let mut leased = Vec::new();
    while leased.len() < 40 {
        let (status, out) = server
            .api
            .call(
                "POST",
                "/v1/queues/work/lease",
                Some(json!({"max": 40, "wait_ms": 2000, "visibility_ms": 600_000})),
            )
            .await;
        assert_eq!(status, 200, "{out}");
        let got = out["messages"].as_array().unwrap().clone();
        assert!(!got.is_empty(), "all 40 are due");
        leased.extend(got);
    }
    let (acked, unacked) = leased.split_at(20);
    let receipts: Vec<&Value> = acked.iter().map(|m| &m["receipt"]).collect();
    let (status, out) = server
        .api
        .call(
            "POST",
            "/v1/queues/work/ack",
            Some(json!({"receipts": receipts})),
        )
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["succeeded"].as_array().unwrap().len(), 20, "{out}");
    let acked_ids: BTreeSet<String> = acked
        .iter()
        .map(|m| m["job_id"].as_str().unwrap().to_string())
        .collect();
    let unacked_ids: BTreeSet<String> = unacked
        .iter()
        .map(|m| m["job_id"].as_str().unwrap().to_string())
        .collect();

    server.kill().await;
    let server = harness.start().await;

    // The unacked messages come back at once (their 10-minute leases died with the process).
    let mut again = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while again.len() < 20 && std::time::Instant::now() < deadline {
        let (status, out) = server
            .api
            .call(
                "POST",
                "/v1/queues/work/lease",
                Some(json!({"max": 40, "wait_ms": 1000, "visibility_ms": 600_000})),
            )
            .await;
        assert_eq!(status, 200, "{out}");
        again.extend(out["messages"].as_array().unwrap().clone());
    }
    let again_ids: BTreeSet<String> = again
        .iter()
        .map(|m| m["job_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(again.len(), again_ids.len(), "each message once");
    assert_eq!(
        again_ids, unacked_ids,
        "exactly the unacked messages come back"
    );
    let first_delivery: std::collections::BTreeMap<&str, &Value> = unacked
        .iter()
        .map(|m| (m["job_id"].as_str().unwrap(), &m["delivery_id"]))
        .collect();
    for m in &again {
        assert_eq!(
            &m["delivery_id"],
            first_delivery[m["job_id"].as_str().unwrap()]
        );
    }
    // An old receipt from before the crash is stale now.
    let (_, out) = server
        .api
        .call(
            "POST",
            "/v1/queues/work/ack",
            Some(json!({"receipts": [unacked[0]["receipt"]]})),
        )
        .await;
    assert_eq!(out["failed"][0]["code"], "stale_receipt", "{out}");
    for id in &acked_ids {
        let (_, job) = server
            .api
            .call("GET", &format!("/v1/jobs/{id}"), None)
            .await;
        assert_eq!(job["state"], "completed", "acked before the crash: {job}");
    }
    let (_, stats) = server.api.call("GET", "/v1/queues/work", None).await;
    assert_eq!(stats["available"], 0, "{stats}");
    assert_eq!(stats["in_flight"], 20, "{stats}");
    assert!(acked_ids.is_disjoint(&again_ids) && all.len() == 40);
    server.kill().await;
}
