//! The binary's test harness: `hourglass serve` processes that a test can SIGKILL, SIGSTOP,
//! SIGCONT and restart (`node`), a JSON client (`api`), the ledger that holds what arrived against
//! what was acknowledged (`ledger`); from the testkit, the webhook receiver (cheap enough for tens
//! of thousands of deliveries) and PostgreSQL databases and throwaway clusters (`postgres`).

pub mod api;
pub mod ledger;
pub mod node;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

pub use api::Api;
use hourglass_testkit::percentile;
pub use hourglass_testkit::postgres;
pub use hourglass_testkit::{Delivery, Receiver};
pub use ledger::{Expected, Ledger, Planned, account, batch_body, wait_all_delivered};
pub use node::{NodeOptions, NodeProc, Nodes};

pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

pub fn rfc3339_ms(ms: i64) -> String {
    format!(
        "{:.3}",
        jiff::Timestamp::from_millisecond(ms).expect("valid instant")
    )
}

pub fn instant_ms(value: &Value) -> i64 {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected an instant, got {value}"))
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{value} is not an instant: {e}"))
        .as_millisecond()
}

/// The tests that push thousands of deliveries through node processes (the mid-run SIGKILLs,
/// the multi-node runs, the outage) take this first: one of them at a time, so that on a small
/// machine they do not starve each other's nodes, and each one's printed figures are its own.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn one_heavy_test_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    HEAVY.lock().await
}

/// Sleeps until the wall clock reads `at_ms`.
pub async fn sleep_until_ms(at_ms: i64) {
    let wait = at_ms - now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// "n=… p50=… p99=… max=…" of lateness figures in ms (nearest-rank percentiles, 0 when there
/// are none), printed for whoever reads the output; no test asserts on them (`hourglass-bench`
/// measures lateness).
pub fn summary(values: &mut [i64]) -> String {
    values.sort_unstable();
    let at = |q: f64| match values.is_empty() {
        true => 0,
        false => percentile(values, q),
    };
    format!(
        "n={} p50={}ms p90={}ms p99={}ms max={}ms",
        values.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        values.last().copied().unwrap_or(0)
    )
}

/// A small xorshift generator, so the tests need no extra dependency; the seed is printed.
pub struct Rng(u64);

impl Rng {
    pub fn from_env_or_clock(var: &str) -> Self {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("seed: {seed} (set {var} to replay)");
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// Waits until `ready` holds, polling every `every`; false after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, every: Duration, mut ready: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if ready().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

/// moto's URL, from `scripts/with-buses` (`HOURGLASS_TEST_MOTO_URL`).
pub fn moto() -> String {
    std::env::var("HOURGLASS_TEST_MOTO_URL").unwrap_or_else(|_| {
        panic!("HOURGLASS_TEST_MOTO_URL is not set: run the tests with scripts/test")
    })
}

/// The environment the standard AWS chain reads in a child process: moto's endpoint, a region,
/// static keys, and no instance metadata lookups.
pub fn aws_env_for_moto() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", moto()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]
}
