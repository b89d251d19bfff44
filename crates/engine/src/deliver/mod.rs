//! Delivery to targets. A delivery's result is a value (delivered / retry / give up), never an
//! error: the completer turns it into the store action.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use hourglass_core::occurrence::RESPONSE_SNIPPET_BYTES;
use hourglass_core::{Claim, Clock, Occurrence, Target, WebhookTarget};
use http::header::{self, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use prometheus_client::metrics::histogram::Histogram;

pub mod batch;
mod batched;

use self::batch::Unanswered;
use crate::held::Held;
use crate::metrics::Metrics;
use crate::netguard::TargetPolicy;
use crate::secrets::Secrets;
use crate::signing::{Metadata, SigningKeys};

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Delivered,
    /// A transient failure; `after` is the receiver's Retry-After, when it sent one.
    Retry {
        after: Option<Duration>,
        reason: String,
    },
    /// A permanent failure: retrying cannot help.
    GiveUp {
        reason: String,
    },
    /// Not sent: the node's claim on the occurrence was taken back (a pause, cancel or edit of
    /// its job, or a lease lost) while it waited to go out. Its attempt is not spent and nothing
    /// is written: the change that took the claim back decides what happens next.
    Withdrawn,
}

#[derive(Debug, Clone)]
pub struct DeliveryResult {
    pub status: Option<u16>,
    pub latency: Duration,
    pub verdict: Verdict,
    /// The start of the target's answer to a failed attempt, kept with its run (see
    /// `AttemptRecord::response`); `None` for a delivered one.
    pub response: Option<String>,
    /// Set on all but one of the deliveries that went in one request (a webhook batch): the
    /// request's outcome is theirs too, and the destination's breaker counts it once.
    pub shared: bool,
}

/// Sends one occurrence to its target. Immediately before it sends (after any wait of its own,
/// such as a batch line), it checks `claim` and answers [`Verdict::Withdrawn`] unsent when the
/// claim is no longer held.
#[async_trait]
pub trait Deliverer: Send + Sync + 'static {
    async fn deliver(&self, occurrence: &Occurrence, claim: &ClaimCheck) -> DeliveryResult;
}

/// Whether this node may still send the occurrence being delivered: its claim is held, and no
/// pause, cancel or edit of the job (here or on another node) nor a refused renewal has taken it
/// back, and its lease has not run out. Cheap to clone: batch lines keep one per entry.
#[derive(Clone)]
pub struct ClaimCheck(Option<Arc<Claimed>>);

struct Claimed {
    held: Arc<Held>,
    clock: Arc<dyn Clock>,
    claim: Claim,
}

impl ClaimCheck {
    /// For a delivery outside the engine's pipeline (a tool, a test): always held.
    pub fn unchecked() -> Self {
        Self(None)
    }

    pub(crate) fn new(held: Arc<Held>, clock: Arc<dyn Clock>, claim: Claim) -> Self {
        Self(Some(Arc::new(Claimed { held, clock, claim })))
    }

    /// Whether the occurrence may be sent now.
    pub fn still_held(&self) -> bool {
        self.0
            .as_ref()
            .is_none_or(|c| c.held.still_ours(c.claim, c.clock.now().as_millisecond()))
    }
}

impl DeliveryResult {
    /// The result of an occurrence that was not sent because its claim was taken back.
    pub fn withdrawn() -> Self {
        DeliveryResult {
            status: None,
            latency: Duration::ZERO,
            verdict: Verdict::Withdrawn,
            response: None,
            shared: false,
        }
    }
}

/// Headers Hourglass sets itself; a job cannot override them.
pub const RESERVED_HEADER_PREFIXES: [&str; 2] = ["webhook-", "hourglass-"];
pub const RESERVED_HEADERS: [&str; 6] = [
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "connection",
    "user-agent",
];

/// The webhook client: hyper's pool over TCP (through [`GuardedResolver`]) or rustls.
type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector<GuardedResolver>>, Full<Bytes>>;

/// POSTs the payload to the job's URL with Standard Webhooks headers; a target that asks for
/// batches gets its deliveries through `batched.rs`, several to a request.
///
/// hyper's client is called directly: no redirects are followed (a 3xx is an answer), nothing is
/// retried here (the job's retry policy decides), and the whole exchange is bounded by `timeout`.
pub struct WebhookDeliverer {
    http: Arc<Http>,
    batches: batched::Lines,
}

/// What every request needs: the client, the signing keys, the clock and the address policy.
struct Http {
    client: HttpClient,
    secrets: Secrets,
    /// The signature's timestamp and the wait an HTTP-date Retry-After asks for.
    clock: Arc<dyn Clock>,
    policy: TargetPolicy,
    /// Bounds sending the request and receiving the response's head.
    timeout: Duration,
    /// Deliveries in each batch request sent.
    batch_sizes: Histogram,
}

/// Sent with every delivery.
const USER_AGENT: &str = concat!("hourglass/", env!("CARGO_PKG_VERSION"));

// The headers every delivery sets, named once: inserting by a `&str` name parses and checks the
// name again on every request.
const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
const HOURGLASS_JOB_ID: HeaderName = HeaderName::from_static("hourglass-job-id");
const HOURGLASS_DUE_AT: HeaderName = HeaderName::from_static("hourglass-due-at");
const HOURGLASS_ATTEMPT: HeaderName = HeaderName::from_static("hourglass-attempt");
const HOURGLASS_JOB_TYPE: HeaderName = HeaderName::from_static("hourglass-job-type");
const HOURGLASS_SIGNATURE: HeaderName = HeaderName::from_static("hourglass-signature");

/// How long a connection may sit idle in the pool, and the TCP keepalive probes on it.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
const TCP_KEEPALIVE: Duration = Duration::from_secs(15);

impl WebhookDeliverer {
    /// `max_connections` should be the engine's delivery concurrency: fewer idle connections kept
    /// per host than deliveries in flight means closing and reopening connections under load.
    /// Batch requests are counted in `metrics.webhook_batch_size`.
    ///
    /// Fails when the platform has no trusted CA certificates to check https targets against
    /// (Debian's `ca-certificates` missing, and no `SSL_CERT_FILE`).
    pub fn new(
        secrets: Secrets,
        clock: Arc<dyn Clock>,
        policy: TargetPolicy,
        timeout: Duration,
        max_connections: usize,
        metrics: &Metrics,
    ) -> Result<Self, rustls::Error> {
        // This client names its provider, but others in the node's process (reqwest built
        // without a default provider, so that aws-lc is never linked) take the process default:
        // make it ring, once.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut http = HttpConnector::new_with_resolver(GuardedResolver {
            policy: policy.clone(),
        });
        // https URLs go through the TLS layer around this connector.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_keepalive(Some(TCP_KEEPALIVE));
        http.set_connect_timeout(Some(timeout.min(Duration::from_secs(5))));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(max_connections)
            .build(https);
        let http = Arc::new(Http {
            client,
            secrets,
            clock,
            policy,
            timeout,
            batch_sizes: metrics.webhook_batch_size.clone(),
        });
        Ok(Self {
            batches: batched::lines(http.clone()),
            http,
        })
    }
}

fn retry(reason: String, latency: Duration) -> DeliveryResult {
    DeliveryResult {
        status: None,
        latency,
        verdict: Verdict::Retry {
            after: None,
            reason,
        },
        response: None,
        shared: false,
    }
}

/// A result a batch could not give (its line or its request went away): a transient failure.
impl Unanswered for DeliveryResult {
    fn unanswered(reason: String) -> Self {
        retry(reason, Duration::ZERO)
    }

    fn withdrawn() -> Self {
        DeliveryResult::withdrawn()
    }
}

/// The start of a target's answer, as kept with a failed attempt's run.
fn snippet(body: &[u8]) -> Option<String> {
    let head = &body[..body.len().min(RESPONSE_SNIPPET_BYTES)];
    (!head.is_empty()).then(|| String::from_utf8_lossy(head).into_owned())
}

fn give_up(reason: impl Into<String>, started: Instant) -> DeliveryResult {
    DeliveryResult {
        status: None,
        latency: started.elapsed(),
        verdict: Verdict::GiveUp {
            reason: reason.into(),
        },
        response: None,
        shared: false,
    }
}

/// How one signed POST ended: with an answer, or with the delivery result of a request that got
/// none (no signing key, a forbidden address, a connection failure, a timeout).
enum Exchange {
    Answered {
        status: u16,
        retry_after: Option<Duration>,
        /// The start of the response body: as much as `keep` asked for the status.
        body: Vec<u8>,
        latency: Duration,
    },
    Failed(DeliveryResult),
}

impl Http {
    /// Signs `body` under `msg_id` with the namespace's keys and POSTs it to the target with the
    /// target's headers, the signature headers and what `extra` adds (given the keys, the
    /// signature's timestamp and the body, to sign what it adds). Keeps the first `keep(status)`
    /// bytes of the answer's body.
    async fn post(
        &self,
        namespace: &str,
        target: &WebhookTarget,
        msg_id: &str,
        body: Bytes,
        keep: fn(u16) -> usize,
        extra: impl FnOnce(&mut http::HeaderMap, &SigningKeys, i64, &[u8]),
    ) -> Exchange {
        let started = Instant::now();
        // IP-literal URLs never reach the resolver, so check them here.
        let literal = match target.url.host() {
            Some(url::Host::Ipv4(v4)) => Some(std::net::IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(std::net::IpAddr::V6(v6)),
            _ => None,
        };
        if let Some(Err(class)) = literal.map(|ip| self.policy.check_ip(ip)) {
            return Exchange::Failed(give_up(
                format!("target is a forbidden {class} address"),
                started,
            ));
        }
        let keys = match self.secrets.keys_for(namespace).await {
            Ok(key) => key,
            Err(e) => {
                return Exchange::Failed(retry(
                    format!("signing key unavailable: {e}"),
                    started.elapsed(),
                ));
            }
        };
        let timestamp = self.clock.now().as_second();
        let uri = match http::Uri::try_from(target.url.as_str()) {
            Ok(uri) => uri,
            Err(e) => return Exchange::Failed(give_up(format!("url not usable: {e}"), started)),
        };
        let signature = keys.sign(msg_id, timestamp, &body);
        // A reference to the same bytes, for `extra`'s signature.
        let signed = body.clone();
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.reserve(8 + target.headers.len());
        for (name, value) in &target.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        }
        if let Ok(id) = HeaderValue::from_str(msg_id) {
            headers.insert(WEBHOOK_ID, id);
        }
        if let Ok(signature) = HeaderValue::try_from(signature) {
            headers.insert(WEBHOOK_SIGNATURE, signature);
        }
        headers.insert(WEBHOOK_TIMESTAMP, HeaderValue::from(timestamp));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
        extra(headers, &keys, timestamp, &signed);
        let response = tokio::time::timeout(self.timeout, self.client.request(request)).await;
        let latency = started.elapsed();
        match response {
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, self.clock.now()));
                // Read a little of the body, so the connection can be reused and a failure's
                // answer kept with its run, without letting a receiver stall us or fill memory.
                let mut head = Vec::new();
                let _ = tokio::time::timeout(
                    Duration::from_millis(100),
                    read_head(response.into_body(), keep(status), &mut head),
                )
                .await;
                Exchange::Answered {
                    status,
                    retry_after,
                    body: head,
                    latency,
                }
            }
            Ok(Err(e)) if forbidden_cause(&e).is_some() => {
                Exchange::Failed(give_up(forbidden_cause(&e).unwrap_or_default(), started))
            }
            Ok(Err(e)) => {
                let reason = if e.is_connect() {
                    format!("connect failed: {}", root_cause(&e))
                } else {
                    format!("request failed: {}", root_cause(&e))
                };
                Exchange::Failed(retry(reason, latency))
            }
            Err(_elapsed) => Exchange::Failed(retry("timed out".to_string(), latency)),
        }
    }
}

/// An occurrence's payload as a request body, shared rather than copied.
struct PayloadBytes(Arc<str>);

impl AsRef<[u8]> for PayloadBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A single delivery keeps the start of a failure's answer only.
fn keep_failure(status: u16) -> usize {
    if (200..300).contains(&status) {
        0
    } else {
        RESPONSE_SNIPPET_BYTES
    }
}

#[async_trait]
impl Deliverer for WebhookDeliverer {
    async fn deliver(&self, occ: &Occurrence, claim: &ClaimCheck) -> DeliveryResult {
        let started = Instant::now();
        let Target::Webhook(target) = &occ.spec.target else {
            // The engine claims only fired targets; a queue message here is a bug upstream.
            return give_up(
                format!("not a webhook target: {}", occ.spec.target.kind()),
                started,
            );
        };
        if let Some(batch) = target.batch {
            return self
                .batches
                .deliver(occ, target, batch, claim, started)
                .await;
        }
        // The dispatcher checked the claim just before it called; the signing key lookup and the
        // pool's connection come after, but nothing here waits on a quota or a line.
        let body = match &occ.payload {
            Some(payload) => Bytes::from_owner(PayloadBytes(payload.clone())),
            None => Bytes::from_static(b"null"),
        };
        let msg_id = occ.delivery_id();
        let exchange = self
            .http
            .post(
                &occ.namespace,
                target,
                msg_id.as_str(),
                body,
                keep_failure,
                |headers, keys, timestamp, body| {
                    sign_metadata(headers, keys, msg_id.as_str(), timestamp, body, occ);
                },
            )
            .await;
        match exchange {
            Exchange::Answered {
                status,
                retry_after,
                body,
                latency,
            } => DeliveryResult {
                status: Some(status),
                latency,
                verdict: classify(status, retry_after),
                response: snippet(&body),
                shared: false,
            },
            Exchange::Failed(result) => result,
        }
    }
}

/// Sets a single delivery's `hourglass-*` headers and `hourglass-signature` over them (see
/// `signing.rs`): what the signature covers is exactly what is sent. A job type that cannot be a
/// header value (not visible ASCII) is not sent, and signed as absent; one with spaces around it
/// is sent and signed trimmed, since receivers' HTTP parsers drop those spaces.
fn sign_metadata(
    headers: &mut http::HeaderMap,
    keys: &SigningKeys,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
    occ: &Occurrence,
) {
    // The occurrence as its job knows it: a handed-off `allow` occurrence is its parent's.
    let (job_id, due) = occ.origin();
    let job_id = job_id.to_string();
    let due_at = format!("{due:.3}");
    let attempt = itoa::Buffer::new().format(occ.attempt).to_owned();
    let job_type = occ
        .spec
        .job_type
        .as_deref()
        .map(|t| t.trim_matches([' ', '\t']))
        .and_then(|t| HeaderValue::from_str(t).ok().map(|v| (t, v)));
    let meta = Metadata {
        job_id: &job_id,
        due_at: &due_at,
        attempt: &attempt,
        job_type: job_type.as_ref().map(|(t, _)| *t),
    };
    let signature = keys.sign_metadata(msg_id, timestamp, &meta, body);
    for (name, value) in [
        (HOURGLASS_JOB_ID, job_id.as_str()),
        (HOURGLASS_DUE_AT, due_at.as_str()),
        (HOURGLASS_ATTEMPT, attempt.as_str()),
        (HOURGLASS_SIGNATURE, signature.as_str()),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    if let Some((_, value)) = job_type {
        headers.insert(HOURGLASS_JOB_TYPE, value);
    }
}

/// Most bytes of a response body read to keep its connection alive; past this the connection is
/// dropped instead of drained (a receiver cannot make the node buffer a large answer).
const DRAIN_LIMIT: usize = 64 * 1024;

/// Reads the start of a response body: its first `keep` bytes into `head`, and at most
/// [`DRAIN_LIMIT`] bytes in all. The caller bounds it in time, and keeps what arrived by then.
async fn read_head(mut body: hyper::body::Incoming, keep: usize, head: &mut Vec<u8>) {
    let mut read = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(chunk) = frame.into_data() else {
            continue; // trailers
        };
        if head.len() < keep {
            let take = (keep - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
        }
        read += chunk.len();
        if read >= DRAIN_LIMIT {
            break;
        }
    }
}

/// 2xx succeeds; 408, 425, 429 and 5xx are transient; everything else (other 4xx, and 3xx since
/// redirects are not followed) is permanent.
pub fn classify(status: u16, retry_after: Option<Duration>) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        408 | 425 | 429 | 500..=599 => Verdict::Retry {
            after: retry_after,
            reason: format!("http {status}"),
        },
        300..=399 => Verdict::GiveUp {
            reason: format!("http {status}: redirects are not followed"),
        },
        _ => Verdict::GiveUp {
            reason: format!("http {status}"),
        },
    }
}

/// Retry-After as delta-seconds or an HTTP date (a wait from `now`).
pub fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = when.as_millisecond().saturating_sub(now.as_millisecond());
    Some(Duration::from_millis(wait.max(0) as u64))
}

/// The resolver's refusal, found anywhere in an error's chain.
fn forbidden_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(current) = cause {
        if let Some(forbidden) = current.downcast_ref::<ForbiddenTarget>() {
            return Some(forbidden.to_string());
        }
        cause = current.source();
    }
    None
}

/// A hostname that resolved only to addresses the target policy refuses. Permanent: retrying
/// cannot help until the operator changes the allowlist.
#[derive(Debug)]
struct ForbiddenTarget(String);

impl std::fmt::Display for ForbiddenTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves only to forbidden addresses", self.0)
    }
}

impl std::error::Error for ForbiddenTarget {}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Resolves hostnames and drops forbidden addresses, so a name cannot smuggle a request to an
/// internal service (DNS rebinding included: the check is on the address actually dialled).
#[derive(Clone)]
struct GuardedResolver {
    policy: TargetPolicy,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed = policy.filter(resolved.into_iter());
            if allowed.is_empty() {
                return Err(Box::new(ForbiddenTarget(host)) as Self::Error);
            }
            Ok(allowed.into_iter())
        })
    }
}

/// TLS for https targets: rustls on ring, certificates checked against the platform's trust
/// store (on Linux the system roots, `SSL_CERT_FILE` and `SSL_CERT_DIR` honoured), offering HTTP/2
/// and HTTP/1.1 by ALPN.
fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes() {
        assert_eq!(classify(204, None), Verdict::Delivered);
        assert!(matches!(classify(503, None), Verdict::Retry { .. }));
        assert!(matches!(
            classify(429, Some(Duration::from_secs(7))),
            Verdict::Retry { after: Some(d), .. } if d == Duration::from_secs(7)
        ));
        assert!(matches!(classify(404, None), Verdict::GiveUp { .. }));
        assert!(matches!(classify(302, None), Verdict::GiveUp { .. }));
    }

    #[test]
    fn retry_after_forms() {
        let now: jiff::Timestamp = "2015-10-21T07:27:00Z".parse().unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:26:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
