//! Drives the node's public API: batch creates from several concurrent submitters, and cancels.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::ProgressBar;
use serde::Deserialize;
use tokio::task::JoinSet;

use super::accounting::parse_job_id;

/// Writes the JSON object of job `i` onto the request body.
pub type JobWriter = Arc<dyn Fn(usize, &mut String) + Send + Sync>;

#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
    api_key: Option<String>,
    /// The namespace requests name (`hourglass-namespace`); `None`: the node's default.
    namespace: Option<String>,
    /// With several nodes: every node's base URL; submitter `i` talks to node `i % len`.
    spread: Vec<String>,
    /// Ask for whole jobs in batch answers; by default the submitters send `Prefer:
    /// return=minimal`, as a bulk loader would: they need only each job's id and due time.
    pub full_responses: bool,
}

/// A created job: its id (as inside delivery ids) and first due time, unix ms.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreatedJob {
    pub job: u128,
    pub next_due_ms: Option<i64>,
    /// A jittered job's first fire time (`next_fire_at`, in full answers only).
    pub next_fire_ms: Option<i64>,
}

pub struct Submitted {
    /// In submission order; empty unless the jobs were asked for.
    pub jobs: Vec<CreatedJob>,
    pub created: u64,
    pub seconds: f64,
    /// Batches sent again after a transient failure (a retried batch may have been created twice:
    /// the bench submits without idempotency keys, so such twins show up as `unexpected`).
    pub retries: u64,
}

#[derive(Deserialize)]
struct BatchOut {
    created: u64,
    #[serde(default)]
    jobs: Vec<JobOut>,
}

#[derive(Deserialize)]
struct BatchCount {
    created: u64,
}

#[derive(Deserialize)]
struct JobOut {
    id: String,
    next_due_at: Option<String>,
    #[serde(default)]
    next_fire_at: Option<String>,
}

const ATTEMPTS: u32 = 6;

impl Api {
    pub fn new(base: &str, api_key: Option<String>) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .context("cannot build the http client")?;
        Ok(Self {
            client,
            base: base.to_string(),
            api_key,
            namespace: None,
            spread: Vec::new(),
            full_responses: false,
        })
    }

    /// Spreads the submitters of `submit` over these nodes (round-robin).
    pub fn spread_over(&mut self, bases: Vec<String>) {
        self.spread = bases;
    }

    /// One client per node the requests are spread over (just this one without a spread).
    pub fn per_node(&self) -> Vec<Api> {
        if self.spread.is_empty() {
            return vec![self.clone()];
        }
        self.spread
            .iter()
            .map(|base| Api {
                base: base.clone(),
                spread: Vec::new(),
                ..self.clone()
            })
            .collect()
    }

    /// The same client, naming `namespace` in every request.
    pub fn in_namespace(&self, namespace: &str) -> Api {
        Api {
            namespace: Some(namespace.to_string()),
            ..self.clone()
        }
    }

    pub(super) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(namespace) = &self.namespace {
            request = request.header("hourglass-namespace", namespace);
        }
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Creates `n` jobs through POST /v1/jobs/batch, `batch` per request, `submitters` requests
    /// in flight. With `keep`, returns each job's id and first due time in submission order.
    pub async fn submit(
        &self,
        n: usize,
        batch: usize,
        submitters: usize,
        keep: bool,
        write_job: JobWriter,
        progress: &ProgressBar,
    ) -> anyhow::Result<Submitted> {
        let batches = n.div_ceil(batch);
        let next = Arc::new(AtomicUsize::new(0));
        let retries = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for submitter in 0..submitters.clamp(1, batches.max(1)) {
            let mut api = self.clone();
            if !self.spread.is_empty() {
                api.base = self.spread[submitter % self.spread.len()].clone();
            }
            let (api, next, retries, write_job, progress) = (
                api,
                next.clone(),
                retries.clone(),
                write_job.clone(),
                progress.clone(),
            );
            tasks.spawn(async move {
                let mut done: Vec<(usize, Vec<CreatedJob>)> = Vec::new();
                let mut created = 0u64;
                let mut body = String::new();
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= batches {
                        break;
                    }
                    let range = b * batch..((b + 1) * batch).min(n);
                    let count = range.len();
                    body.clear();
                    body.push_str("{\"jobs\":[");
                    for i in range.clone() {
                        if i > range.start {
                            body.push(',');
                        }
                        write_job(i, &mut body);
                    }
                    body.push_str("]}");
                    let bytes = api.post_batch(&body, &retries).await?;
                    if keep {
                        let out: BatchOut =
                            serde_json::from_slice(&bytes).context("unexpected batch response")?;
                        if out.jobs.len() != count {
                            bail!("batch of {count} answered with {} jobs", out.jobs.len());
                        }
                        let jobs = out
                            .jobs
                            .iter()
                            .map(|j| {
                                let job = parse_job_id(&j.id)
                                    .with_context(|| format!("unexpected job id {:?}", j.id))?;
                                let instant = |text: Option<&str>| {
                                    text.and_then(|t| t.parse::<jiff::Timestamp>().ok())
                                        .map(|t| t.as_millisecond())
                                };
                                Ok(CreatedJob {
                                    job,
                                    next_due_ms: instant(j.next_due_at.as_deref()),
                                    next_fire_ms: instant(j.next_fire_at.as_deref()),
                                })
                            })
                            .collect::<anyhow::Result<Vec<_>>>()?;
                        created += out.created;
                        done.push((range.start, jobs));
                    } else {
                        let out: BatchCount =
                            serde_json::from_slice(&bytes).context("unexpected batch response")?;
                        created += out.created;
                    }
                    progress.inc(count as u64);
                }
                Ok::<_, anyhow::Error>((created, done))
            });
        }
        let mut created = 0;
        let mut parts = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (c, done) = joined.context("submitter task failed")??;
            created += c;
            parts.extend(done);
        }
        let seconds = started.elapsed().as_secs_f64();
        parts.sort_unstable_by_key(|(start, _)| *start);
        let jobs = if keep {
            let mut jobs = Vec::with_capacity(n);
            for (_, part) in parts {
                jobs.extend(part);
            }
            jobs
        } else {
            Vec::new()
        };
        Ok(Submitted {
            jobs,
            created,
            seconds,
            retries: retries.load(Ordering::Relaxed),
        })
    }

    async fn post_batch(
        &self,
        body: &str,
        retries: &AtomicU64,
    ) -> anyhow::Result<hyper::body::Bytes> {
        let mut wait = Duration::from_millis(200);
        for attempt in 1..=ATTEMPTS {
            let mut request = self
                .request(reqwest::Method::POST, "/v1/jobs/batch")
                .header("content-type", "application/json");
            if !self.full_responses {
                request = request.header("prefer", "return=minimal");
            }
            let sent = request.body(body.to_string()).send().await;
            let transient = match sent {
                Ok(response) if response.status().is_success() => {
                    return Ok(response.bytes().await?);
                }
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    if !(status.is_server_error() || status.as_u16() == 429) {
                        bail!("batch create failed with HTTP {status}: {text}");
                    }
                    format!("HTTP {status}: {text}")
                }
                Err(e) => format!("{e}"),
            };
            if attempt == ATTEMPTS {
                bail!("batch create failed {ATTEMPTS} times; last: {transient}");
            }
            retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        unreachable!("the loop returns or bails")
    }

    /// Cancels jobs (DELETE /v1/jobs/{id}), `concurrency` at a time; returns how many failed.
    pub async fn cancel(&self, jobs: &[u128], concurrency: usize) -> u64 {
        let ids = Arc::new(jobs.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let (api, ids, next) = (self.clone(), ids.clone(), next.clone());
            tasks.spawn(async move {
                let mut failed = 0u64;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = ids.get(i) else { break };
                    let path = format!("/v1/jobs/{}", hyphenated(*job));
                    match api.request(reqwest::Method::DELETE, &path).send().await {
                        Ok(r) if r.status().is_success() => {}
                        _ => failed += 1,
                    }
                }
                failed
            });
        }
        let mut failed = 0;
        while let Some(joined) = tasks.join_next().await {
            failed += joined.unwrap_or(0);
        }
        failed
    }
}

pub fn hyphenated(job: u128) -> String {
    let hex = format!("{job:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Appends `{"schedule": <schedule>, "target": <target>, "payload": <payload>}`; all three are
/// JSON values, and an empty `payload` leaves the job without one.
pub fn write_job(
    body: &mut String,
    schedule: std::fmt::Arguments<'_>,
    target: &str,
    payload: &str,
) {
    let _ = write!(body, "{{\"schedule\":{schedule},\"target\":{target}");
    if !payload.is_empty() {
        let _ = write!(body, ",\"payload\":{payload}");
    }
    body.push('}');
}

/// The target object of a job that POSTs to `url`, `batch` deliveries a request at most when
/// given.
pub fn webhook_target(url: &str, batch: Option<u16>) -> String {
    let mut webhook = serde_json::json!({ "url": url });
    if let Some(max_items) = batch {
        webhook["batch"] = serde_json::json!({ "max_items": max_items });
    }
    serde_json::json!({ "webhook": webhook }).to_string()
}

/// The target object of a job whose occurrences go to the pull queue `queue`.
pub fn queue_target(queue: &str) -> String {
    serde_json::json!({ "queue": queue }).to_string()
}

/// An RFC 3339 instant with milliseconds, as the API and the due-at header spell it.
pub fn rfc3339_ms(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| format!("{t:.3}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_bodies_and_ids() {
        let mut body = String::new();
        write_job(
            &mut body,
            format_args!("{{\"at\":\"{}\"}}", rfc3339_ms(1_700_000_000_123)),
            &webhook_target("http://127.0.0.1:9/hook", None),
            "",
        );
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["schedule"]["at"], "2023-11-14T22:13:20.123Z");
        assert_eq!(value["target"]["webhook"]["url"], "http://127.0.0.1:9/hook");
        assert!(value.get("payload").is_none(), "no payload unless asked");
        body.clear();
        write_job(
            &mut body,
            format_args!("{{\"cron\":\"* * * * * *\"}}"),
            &queue_target("bench"),
            r#"{"pad":"xx"}"#,
        );
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["target"], serde_json::json!({"queue": "bench"}));
        assert_eq!(value["payload"], serde_json::json!({"pad": "xx"}));
        let job = 0x0190_abcd_0000_7000_8000_0000_0000_0001;
        assert_eq!(hyphenated(job), "0190abcd-0000-7000-8000-000000000001");
        assert_eq!(parse_job_id(&hyphenated(job)), Some(job));
    }
}
