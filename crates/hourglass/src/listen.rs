//! `hourglass listen`: a webhook receiver for development. It listens on 127.0.0.1, answers every
//! request with `--status` (default 200) and prints one block per delivery: when it arrived, how
//! late it was, its delivery id, its attempt, whether its signature verifies with the namespace's
//! secret (`--secret`), and its payload, pretty-printed. With colour on a terminal, plain text
//! when stdout is a pipe or a file (or `NO_COLOR` is set).
//!
//! With `--secret` it behaves as a receiver should: a request whose signatures do not verify, or
//! whose `webhook-timestamp` is more than the Standard Webhooks tolerance (5 minutes) from the
//! listener's clock (a replay, or a clock that is off), is answered `401` (the node gives up on it)
//! and none of its `hourglass-*` headers is shown, since nothing says they are the node's.
//!
//! A body larger than `--max-body-bytes` is not read: `413`. Whatever is printed from a request has
//! its control characters escaped, so a body cannot drive the terminal. A single delivery's headers are trusted only under their own
//! `hourglass-signature` (see the engine's `signing.rs`); a batch's facts are in its signed body.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hourglass_engine::signing::{Metadata, SigningKey};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::header::HeaderMap;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use tokio::net::TcpListener;

#[derive(Args, Debug)]
pub struct ListenArgs {
    /// Port on 127.0.0.1 to receive webhooks on (0 picks a free one).
    #[arg(long, default_value_t = 9000)]
    port: u16,
    /// HTTP status to answer every delivery with: 2xx is success; 408, 425, 429 and 5xx make the
    /// node retry; anything else fails the delivery for good.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(200..=599))]
    status: u16,
    /// The namespace's webhook signing secret (`whsec_...`, from `hourglass signing-secret`):
    /// each delivery's signature is checked against it. Without it, signatures are not checked.
    #[arg(long, env = "HOURGLASS_WEBHOOK_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// Largest request body read; a larger one is answered 413 unread. The default is above the
    /// largest request a node with default limits sends (a batch of 1 MiB of items).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY)]
    max_body_bytes: usize,
}

/// Twice the most bytes of items a webhook batch request carries (`deliver/batched.rs`): room for
/// the batch's own JSON around them, and well above a single delivery's 256 KiB payload.
const DEFAULT_MAX_BODY: usize = 2 * 1024 * 1024;

/// How far `webhook-timestamp` may be from the listener's clock, either way (Standard Webhooks).
const TOLERANCE_SECONDS: i64 = 5 * 60;

struct Listener {
    status: StatusCode,
    key: Option<SigningKey>,
    style: Style,
    max_body: usize,
}

pub async fn run(args: ListenArgs) -> anyhow::Result<()> {
    let key = match &args.secret {
        Some(secret) => Some(SigningKey::parse(secret).ok_or_else(|| {
            crate::usage(
                "--secret is not a webhook signing secret (whsec_ followed by base64 of at least \
                 16 bytes)",
            )
        })?),
        None => None,
    };
    let status =
        StatusCode::from_u16(args.status).map_err(|e| crate::usage(format!("--status: {e}")))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let socket = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = socket.local_addr()?;
    let state = Arc::new(Listener {
        status,
        key,
        style: Style::detect(),
        max_body: args.max_body_bytes,
    });
    outln!("hourglass listen: receiving webhooks on http://{addr}/ (any path)");
    outln!(
        "  answering {}; signatures {}; Ctrl-C to stop",
        status,
        if state.key.is_some() {
            "checked with --secret"
        } else {
            "not checked (pass --secret whsec_...)"
        }
    );
    let accept = async {
        loop {
            let Ok((stream, _)) = socket.accept().await else {
                // Out of file descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| handle(state.clone(), req));
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    tokio::select! {
        () = accept => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

async fn handle(
    state: Arc<Listener>,
    req: Request<Incoming>,
) -> Result<Response<Empty<Bytes>>, Infallible> {
    let arrived = Timestamp::now();
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = |state: &Listener| {
        let block = render_too_large(
            state,
            &parts.headers,
            parts.method.as_str(),
            parts.uri.path(),
        );
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(block.as_bytes());
        let _ = out.flush();
        let mut response = Response::new(Empty::new());
        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        Ok(response)
    };
    // Refused on its declared length before any of it is read; a chunked body is read only up to
    // the limit.
    if declared.is_some_and(|n| n > state.max_body as u64) {
        return too_large(&state);
    }
    let body = match http_body_util::Limited::new(body, state.max_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(&state),
        // The connection broke mid-body: nothing to show, and no one to answer.
        Err(_) => Bytes::new(),
    };
    let received = Received {
        arrived,
        method: parts.method.as_str(),
        path: parts.uri.path(),
        headers: &parts.headers,
        body: &body,
    };
    let check = check(&state, &received);
    let status = match check {
        Check::Failed(_) => StatusCode::UNAUTHORIZED,
        Check::Unchecked | Check::Verified => state.status,
    };
    let block = render(&state, &received, &check, status);
    // One write per block, so that concurrent deliveries never interleave their lines.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(block.as_bytes());
    let _ = out.flush();
    let mut response = Response::new(Empty::new());
    *response.status_mut() = status;
    Ok(response)
}

/// One request as it arrived.
struct Received<'a> {
    arrived: Timestamp,
    method: &'a str,
    path: &'a str,
    headers: &'a HeaderMap,
    body: &'a [u8],
}

impl Received<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// ANSI styling on a terminal, nothing otherwise.
#[derive(Clone, Copy)]
struct Style {
    color: bool,
}

impl Style {
    fn detect() -> Self {
        Self {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// What the signatures say about a request.
enum Check {
    /// No `--secret`: nothing was checked, and the headers are shown as they came.
    Unchecked,
    /// The body, the id and the timestamp, and a single delivery's `hourglass-*` headers, are
    /// the node's.
    Verified,
    /// Why the request is refused.
    Failed(String),
}

/// Checks a request against `--secret`: the Standard Webhooks signature, and for a single
/// delivery (a `webhook-id` that is not a batch's) the `hourglass-signature` over its metadata.
fn check(state: &Listener, r: &Received<'_>) -> Check {
    let Some(key) = &state.key else {
        return Check::Unchecked;
    };
    let (Some(id), Some(timestamp), Some(header)) = (
        r.header("webhook-id"),
        r.header("webhook-timestamp"),
        r.header("webhook-signature"),
    ) else {
        return Check::Failed(
            "missing (no webhook-id, webhook-timestamp and webhook-signature headers)".into(),
        );
    };
    let Ok(sent) = timestamp.parse::<i64>() else {
        return Check::Failed("webhook-timestamp is not unix seconds".into());
    };
    let skew = r.arrived.as_second().saturating_sub(sent);
    if skew > TOLERANCE_SECONDS {
        return Check::Failed(format!(
            "webhook-timestamp is {skew} s old, past the 5-minute tolerance (a replay?)"
        ));
    }
    if skew < -TOLERANCE_SECONDS {
        return Check::Failed(format!(
            "webhook-timestamp is {} s in the future, past the 5-minute tolerance",
            skew.unsigned_abs()
        ));
    }
    if !key.verify(id, timestamp, r.body, header) {
        return Check::Failed("signed with another secret, or the request was altered".into());
    }
    if id.starts_with("batch_") {
        return Check::Verified;
    }
    let meta = Metadata {
        job_id: r.header("hourglass-job-id").unwrap_or_default(),
        due_at: r.header("hourglass-due-at").unwrap_or_default(),
        attempt: r.header("hourglass-attempt").unwrap_or_default(),
        job_type: r.header("hourglass-job-type"),
    };
    match r.header("hourglass-signature") {
        Some(signed) if key.verify_metadata(id, timestamp, &meta, r.body, signed) => {
            Check::Verified
        }
        Some(_) => Check::Failed(
            "the hourglass-* headers were altered (hourglass-signature does not match)".into(),
        ),
        None => Check::Failed("no hourglass-signature over the hourglass-* headers".into()),
    }
}

/// The signature's state, in words, and whether it is good news.
fn signature(r: &Received<'_>, check: &Check) -> (String, Option<bool>) {
    match check {
        Check::Unchecked if r.header("webhook-signature").is_none() => (
            "missing (no webhook-id, webhook-timestamp and webhook-signature headers)".into(),
            None,
        ),
        Check::Unchecked => ("not checked (no --secret)".into(), None),
        Check::Verified => ("verified".into(), Some(true)),
        Check::Failed(why) => (format!("FAILED: {why}"), Some(false)),
    }
}

/// "3 ms late", "1.250 s late", "2 ms early".
fn lateness(ms: i64) -> String {
    let (amount, word) = if ms < 0 {
        (ms.unsigned_abs(), "early")
    } else {
        (ms.unsigned_abs(), "late")
    };
    if amount < 10_000 {
        format!("{amount} ms {word}")
    } else {
        format!("{}.{:03} s {word}", amount / 1000, amount % 1000)
    }
}

fn render(state: &Listener, r: &Received<'_>, check: &Check, status: StatusCode) -> String {
    let style = state.style;
    // A refused request's hourglass-* headers may be anyone's: show none of them.
    let trusted = |name: &str| match check {
        Check::Failed(_) => None,
        Check::Unchecked | Check::Verified => r.header(name),
    };
    let mut out = String::new();
    let id = r.header("webhook-id").unwrap_or("(no webhook-id header)");
    let _ = writeln!(
        out,
        "\n{} {}",
        style.paint("1", "delivery"),
        style.paint("1", id)
    );
    let _ = writeln!(out, "  arrived    {:.3}", r.arrived);
    let arrived_ms = r.arrived.as_millisecond();
    let due = trusted("hourglass-due-at").and_then(|v| v.parse::<Timestamp>().ok());
    let sent = r
        .header("webhook-timestamp")
        .and_then(|v| v.parse::<i64>().ok());
    match (due, sent) {
        (Some(due), _) => {
            let _ = writeln!(
                out,
                "  due        {due:.3} ({})",
                lateness(arrived_ms - due.as_millisecond())
            );
        }
        (None, Some(sent)) => {
            let _ = writeln!(
                out,
                "  sent       {sent} (unix s; {} after webhook-timestamp)",
                lateness(arrived_ms - sent.saturating_mul(1000))
            );
        }
        (None, None) => {}
    }
    if let Some(attempt) = trusted("hourglass-attempt") {
        let _ = writeln!(out, "  attempt    {attempt}");
    }
    if let Some(job) = trusted("hourglass-job-id") {
        match trusted("hourglass-job-type") {
            Some(job_type) => {
                let _ = writeln!(out, "  job        {job} (type {job_type})");
            }
            None => {
                let _ = writeln!(out, "  job        {job}");
            }
        }
    }
    let (words, good) = signature(r, check);
    let words = match good {
        Some(true) => style.paint("32", &words),
        Some(false) => style.paint("31;1", &words),
        None => style.paint("2", &words),
    };
    let _ = writeln!(out, "  signature  {words}");
    let _ = writeln!(
        out,
        "  request    {} {} -> answered {}",
        r.method,
        r.path,
        status.as_u16()
    );
    let payload = if r.body.is_empty() {
        "(empty body)".to_string()
    } else {
        match serde_json::from_slice::<serde_json::Value>(r.body) {
            Ok(json) => serde_json::to_string_pretty(&json)
                .unwrap_or_else(|_| String::from_utf8_lossy(r.body).into_owned()),
            Err(_) => String::from_utf8_lossy(r.body).into_owned(),
        }
    };
    for line in printable(&payload).lines() {
        let _ = writeln!(out, "  {line}");
    }
    out
}

/// The block of a request refused for its size: its id and where it went, nothing of its body.
fn render_too_large(state: &Listener, headers: &HeaderMap, method: &str, path: &str) -> String {
    let style = state.style;
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(no webhook-id header)");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} {}",
        style.paint("1", "delivery"),
        style.paint("1", &printable(id))
    );
    let _ = writeln!(
        out,
        "  request    {method} {} -> answered 413 (body over {} bytes, not read)",
        printable(path),
        state.max_body
    );
    out
}

/// `text` with every control character but line feeds and tabs escaped (`\u{1b}`), and the
/// bidirectional overrides too, so that what a request carries cannot move the cursor, recolour
/// or clear the terminal, or reorder what is shown.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(secret: Option<&str>) -> Listener {
        Listener {
            status: StatusCode::OK,
            key: secret.and_then(SigningKey::parse),
            style: Style { color: false },
            max_body: DEFAULT_MAX_BODY,
        }
    }

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    const ID: &str = "01a1fee1265e739b98093d3692d507c6_1795277530719";
    const META: Metadata<'static> = Metadata {
        job_id: "01a1fee1-265e-739b-9809-3d3692d507c6",
        due_at: "2026-11-21T16:12:10.719Z",
        attempt: "2",
        job_type: Some("reminder.flight"),
    };

    /// A delivery's headers, signed by `SECRET` as the node signs them, with the `hourglass-*`
    /// values of `sent` (a replay may alter them after signing).
    fn headers(body: &[u8], sent: &Metadata<'_>) -> HeaderMap {
        let key = SigningKey::parse(SECRET).unwrap();
        let signature = key.sign(ID, 1795277530, body);
        let meta_signature = key.sign_metadata(ID, 1795277530, &META, body);
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("webhook-id", ID),
            ("webhook-timestamp", "1795277530"),
            ("webhook-signature", &signature),
            ("hourglass-job-id", sent.job_id),
            ("hourglass-due-at", sent.due_at),
            ("hourglass-attempt", sent.attempt),
            ("hourglass-signature", &meta_signature),
        ] {
            h.insert(name, value.parse().unwrap());
        }
        if let Some(job_type) = sent.job_type {
            h.insert("hourglass-job-type", job_type.parse().unwrap());
        }
        h
    }

    fn received<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Received<'a> {
        Received {
            arrived: "2026-11-21T16:12:10.723Z".parse().unwrap(),
            method: "POST",
            path: "/hooks/reminder",
            headers,
            body,
        }
    }

    /// The block printed and the status answered for a request.
    fn show(listener: &Listener, r: &Received<'_>) -> (String, StatusCode) {
        let check = check(listener, r);
        let status = match check {
            Check::Failed(_) => StatusCode::UNAUTHORIZED,
            _ => listener.status,
        };
        (render(listener, r, &check, status), status)
    }

    #[test]
    fn a_block_shows_id_lateness_attempt_signature_and_payload() {
        let body = br#"{"flight":"LH 400","passenger":"p-123"}"#;
        let headers = headers(body, &META);
        let received = received(&headers, body);
        let (block, status) = show(&listener(Some(SECRET)), &received);
        assert_eq!(status, StatusCode::OK);
        for want in [
            "delivery 01a1fee1265e739b98093d3692d507c6_1795277530719\n",
            "  arrived    2026-11-21T16:12:10.723Z\n",
            "  due        2026-11-21T16:12:10.719Z (4 ms late)\n",
            "  attempt    2\n",
            "  job        01a1fee1-265e-739b-9809-3d3692d507c6 (type reminder.flight)\n",
            "  signature  verified\n",
            "  request    POST /hooks/reminder -> answered 200\n",
            "  {\n    \"flight\": \"LH 400\",\n    \"passenger\": \"p-123\"\n  }\n",
        ] {
            assert!(block.contains(want), "{want:?} missing from:\n{block}");
        }
        assert!(!block.contains('\x1b'), "plain text: {block:?}");
        let (unchecked, _) = show(&listener(None), &received);
        assert!(unchecked.contains("  signature  not checked (no --secret)\n"));
        let (other, status) = show(
            &listener(Some("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")),
            &received,
        );
        assert!(other.contains("  signature  FAILED"), "{other}");
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    /// Issue 39, defect 8: a replay whose body, id and timestamp are intact but whose
    /// `hourglass-*` headers were altered used to print "signature verified" beside the forged
    /// values. Now it is refused and the forged values are not shown.
    #[test]
    fn a_forged_metadata_header_is_refused_and_not_shown() {
        let body = br#"{"flight":"LH 400"}"#;
        let forgeries = [
            Metadata {
                job_type: Some("account.delete"),
                ..META
            },
            Metadata {
                job_id: "00000000-0000-0000-0000-000000000000",
                ..META
            },
            Metadata {
                attempt: "7",
                ..META
            },
            Metadata {
                due_at: "2026-11-21T16:12:00.000Z",
                ..META
            },
            Metadata {
                job_type: None,
                ..META
            },
        ];
        for forged in &forgeries {
            let headers = headers(body, forged);
            let (block, status) = show(&listener(Some(SECRET)), &received(&headers, body));
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{forged:?}:\n{block}");
            assert!(
                block.contains("  signature  FAILED: the hourglass-* headers were altered"),
                "{block}"
            );
            for hidden in [
                "account.delete",
                "00000000-0000",
                "attempt",
                "16:12:00",
                "  job  ",
            ] {
                assert!(!block.contains(hidden), "{hidden:?} shown:\n{block}");
            }
        }
        // Without the metadata signature at all, the headers are not trusted either.
        let mut headers = headers(body, &forgeries[0]);
        headers.remove("hourglass-signature");
        let (block, status) = show(&listener(Some(SECRET)), &received(&headers, body));
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(block.contains("no hourglass-signature"), "{block}");
        assert!(!block.contains("account.delete"), "{block}");
    }

    /// Issue 39, defect 10: a signed delivery replayed hours later, or stamped in the future,
    /// printed "signature verified". Standard Webhooks' 5 minutes either way now apply.
    #[test]
    fn a_timestamp_outside_five_minutes_is_refused() {
        let body = br#"{"flight":"LH 400"}"#;
        let headers = headers(body, &META);
        let sent: Timestamp = "2026-11-21T16:12:10Z".parse().unwrap();
        let at = |offset_s: i64| Received {
            arrived: sent + jiff::SignedDuration::from_secs(offset_s),
            ..received(&headers, body)
        };
        for (offset, verdict) in [
            (0, "  signature  verified\n"),
            (299, "  signature  verified\n"),
            (-299, "  signature  verified\n"),
            (301, "  signature  FAILED: webhook-timestamp is 301 s old"),
            (
                6 * 3600,
                "  signature  FAILED: webhook-timestamp is 21600 s old",
            ),
            (
                -301,
                "  signature  FAILED: webhook-timestamp is 301 s in the future",
            ),
        ] {
            let (block, status) = show(&listener(Some(SECRET)), &at(offset));
            assert!(block.contains(verdict), "{offset}: {block}");
            let want = if verdict.contains("FAILED") {
                StatusCode::UNAUTHORIZED
            } else {
                StatusCode::OK
            };
            assert_eq!(status, want, "{offset}");
        }
    }

    /// Issue 39, defect 10: a body that is not JSON was printed raw, control characters and all
    /// (an escape sequence could clear or recolour the terminal).
    #[test]
    fn control_characters_of_a_body_are_escaped() {
        let body = "hello\x1b[2J\x1b]0;owned\x07 world\r\n\u{9b}31m\u{202e}txt.exe\tend".as_bytes();
        let headers = HeaderMap::new();
        let (block, _) = show(&listener(None), &received(&headers, body));
        for raw in ['\x1b', '\x07', '\r', '\u{9b}', '\u{202e}'] {
            assert!(!block.contains(raw), "{raw:?} printed raw: {block:?}");
        }
        assert!(
            block.contains(
                "  hello\\u{1b}[2J\\u{1b}]0;owned\\u{7} world\\r\n  \\u{9b}31m\\u{202e}txt.exe\tend\n"
            ),
            "{block:?}"
        );
        // JSON strings come out escaped by the JSON printer already.
        let json = br#"{"a":"\u001b[2J"}"#;
        let (block, _) = show(&listener(None), &received(&headers, json));
        assert!(!block.contains('\x1b'), "{block:?}");
    }

    #[test]
    fn lateness_reads_naturally() {
        assert_eq!(lateness(3), "3 ms late");
        assert_eq!(lateness(-2), "2 ms early");
        assert_eq!(lateness(12_345), "12.345 s late");
    }
}
