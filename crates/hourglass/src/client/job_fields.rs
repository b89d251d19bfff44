//! A job's fields as flags, for `job create` and `job update`, and the request body they make
//! (or a whole body given with `--json`).

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

use crate::usage;

/// The flags that make a `--json` body unnecessary, for `conflicts_with_all`.
const FIELD_FLAGS: [&str; 19] = [
    "webhook",
    "queue",
    "at",
    "after",
    "cron",
    "timezone",
    "every",
    "start",
    "end",
    "max_runs",
    "payload",
    "job_type",
    "headers",
    "max_attempts",
    "initial_backoff",
    "max_backoff",
    "misfire",
    "rate_limit",
    "batch",
];

#[derive(Args, Debug)]
pub(super) struct CreateArgs {
    /// The whole request body as JSON; it cannot be combined with the other flags.
    #[arg(long, conflicts_with_all = FIELD_FLAGS, conflicts_with = "key")]
    json: Option<String>,
    /// Idempotency key; the job can also be addressed by it.
    #[arg(long)]
    key: Option<String>,
    #[command(flatten)]
    fields: JobFields,
}

#[derive(Args, Debug)]
pub(super) struct UpdateArgs {
    /// The job's id, or the key it was created with.
    pub(super) id: String,
    /// The whole PATCH body as JSON; it cannot be combined with the other flags.
    #[arg(long, conflicts_with_all = FIELD_FLAGS)]
    json: Option<String>,
    #[command(flatten)]
    fields: JobFields,
}

/// A job's fields as flags, for `job create` and `job update`.
#[derive(Args, Debug)]
struct JobFields {
    /// Webhook URL to deliver to.
    #[arg(long, conflicts_with = "queue")]
    webhook: Option<String>,
    /// Pull queue to put the occurrences on, instead of a webhook.
    #[arg(long)]
    queue: Option<String>,
    /// A webhook request header, NAME=VALUE; repeat for more.
    #[arg(long = "header", value_name = "NAME=VALUE", requires = "webhook")]
    headers: Vec<String>,
    /// Most deliveries a second to the webhook's destination.
    #[arg(long, requires = "webhook")]
    rate_limit: Option<u32>,
    /// Deliver to the webhook in batches of up to this many occurrences a request.
    #[arg(long, value_name = "MAX_ITEMS", requires = "webhook")]
    batch: Option<u32>,
    /// One-off at an RFC 3339 instant.
    #[arg(long)]
    at: Option<String>,
    /// One-off after a delay, e.g. 90s.
    #[arg(long)]
    after: Option<String>,
    /// Cron expression (5 fields, or 6 with seconds).
    #[arg(long)]
    cron: Option<String>,
    /// IANA time zone for --cron [default: UTC].
    #[arg(long, requires = "cron")]
    timezone: Option<String>,
    /// Fixed interval, e.g. 15m.
    #[arg(long)]
    every: Option<String>,
    /// A recurring job's first possible run, RFC 3339 (an interval is aligned to it).
    #[arg(long)]
    start: Option<String>,
    /// A recurring job's last possible run, RFC 3339.
    #[arg(long)]
    end: Option<String>,
    /// A recurring job's number of runs, at most.
    #[arg(long)]
    max_runs: Option<u64>,
    /// Payload JSON, or @FILE to read it from a file, or @- from standard input.
    #[arg(long)]
    payload: Option<String>,
    /// The job's type, for workers and filters.
    #[arg(long = "type")]
    job_type: Option<String>,
    /// Attempts per occurrence before it is dead-lettered.
    #[arg(long)]
    max_attempts: Option<u32>,
    /// First retry delay, e.g. 10s.
    #[arg(long)]
    initial_backoff: Option<String>,
    /// Longest retry delay, e.g. 10m.
    #[arg(long)]
    max_backoff: Option<String>,
    /// What a late recurring occurrence does: skip, once, all, or all:WINDOW (e.g. all:6h).
    #[arg(long)]
    misfire: Option<String>,
}

pub(super) fn create_body(c: CreateArgs) -> anyhow::Result<Value> {
    if let Some(text) = c.json {
        return json_flag(&text);
    }
    let mut body = c.fields.into_body()?;
    if !body.contains_key("target") {
        return Err(usage(
            "give --webhook (the URL to call) or --queue, or a full body with --json",
        ));
    }
    if !body.contains_key("schedule") {
        return Err(usage(
            "give exactly one of --at, --after, --cron or --every",
        ));
    }
    if let Some(key) = c.key {
        body.insert("key".into(), json!(key));
    }
    Ok(Value::Object(body))
}

/// The PATCH body of `job update`: each field given replaces the job's.
pub(super) fn update_body(u: UpdateArgs) -> anyhow::Result<Value> {
    if let Some(text) = u.json {
        return json_flag(&text);
    }
    let body = u.fields.into_body()?;
    if body.is_empty() {
        return Err(usage(
            "nothing to change: give the fields to replace (--after, --webhook, --payload, \
             --type, ...) or a body with --json",
        ));
    }
    Ok(Value::Object(body))
}

fn json_flag(text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).map_err(|e| usage(format!("--json is not valid JSON: {e}")))
}

impl JobFields {
    /// The API fields these flags set: `target`, `schedule`, `payload`, `type`, `retry` and
    /// `misfire`, each only when a flag of it was given.
    fn into_body(self) -> anyhow::Result<serde_json::Map<String, Value>> {
        let c = self;
        let mut body = serde_json::Map::new();
        let webhook_flags = !c.headers.is_empty() || c.rate_limit.is_some() || c.batch.is_some();
        match (c.webhook, c.queue) {
            (Some(url), None) => {
                let mut webhook = json!({"url": url});
                if !c.headers.is_empty() {
                    let mut headers = serde_json::Map::new();
                    for header in &c.headers {
                        let Some((name, value)) = header.split_once('=') else {
                            return Err(usage(format!("--header {header:?} is not NAME=VALUE")));
                        };
                        headers.insert(name.trim().to_string(), json!(value));
                    }
                    webhook["headers"] = Value::Object(headers);
                }
                if let Some(rate) = c.rate_limit {
                    webhook["rate_limit"] = json!(rate);
                }
                if let Some(max_items) = c.batch {
                    webhook["batch"] = json!({"max_items": max_items});
                }
                body.insert("target".into(), json!({"webhook": webhook}));
            }
            (None, Some(queue)) => {
                body.insert("target".into(), json!({"queue": queue}));
            }
            (None, None) if webhook_flags => {
                return Err(usage("--header, --rate-limit and --batch need --webhook"));
            }
            _ => {}
        }
        let schedule = match (c.at, c.after, c.cron, c.every) {
            (Some(at), None, None, None) => Some(json!({"at": at})),
            (None, Some(after), None, None) => Some(json!({"after": after})),
            (None, None, Some(cron), None) => {
                Some(json!({"cron": cron, "timezone": c.timezone.unwrap_or_else(|| "UTC".into())}))
            }
            (None, None, None, Some(every)) => Some(json!({"every": every})),
            (None, None, None, None) => None,
            _ => {
                return Err(usage(
                    "give exactly one of --at, --after, --cron or --every",
                ));
            }
        };
        let bounds = c.start.is_some() || c.end.is_some() || c.max_runs.is_some();
        match schedule {
            Some(mut schedule) => {
                for (name, value) in [("start", c.start), ("end", c.end)] {
                    if let Some(value) = value {
                        schedule[name] = json!(value);
                    }
                }
                if let Some(max_runs) = c.max_runs {
                    schedule["max_runs"] = json!(max_runs);
                }
                body.insert("schedule".into(), schedule);
            }
            None if bounds => {
                return Err(usage(
                    "--start, --end and --max-runs belong to a schedule: give --cron or --every \
                     too",
                ));
            }
            None => {}
        }
        if let Some(payload) = c.payload {
            let text = match payload.strip_prefix('@') {
                Some("-") => std::io::read_to_string(std::io::stdin())
                    .context("cannot read the payload from standard input")?,
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("--payload: cannot read {path}: {e}")))?,
                None => payload,
            };
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| usage(format!("--payload is not valid JSON: {e}")))?;
            body.insert("payload".into(), value);
        }
        if let Some(job_type) = c.job_type {
            body.insert("type".into(), json!(job_type));
        }
        let mut retry = serde_json::Map::new();
        if let Some(n) = c.max_attempts {
            retry.insert("max_attempts".into(), json!(n));
        }
        for (name, value) in [
            ("initial_backoff", c.initial_backoff),
            ("max_backoff", c.max_backoff),
        ] {
            if let Some(value) = value {
                retry.insert(name.into(), json!(value));
            }
        }
        if !retry.is_empty() {
            body.insert("retry".into(), Value::Object(retry));
        }
        if let Some(misfire) = c.misfire {
            let policy = match misfire.split_once(':') {
                Some(("all", window)) => json!({"policy": "all", "window": window}),
                Some(_) => {
                    return Err(usage(format!(
                        "--misfire {misfire:?}: give skip, once, all or all:WINDOW"
                    )));
                }
                None => json!(misfire),
            };
            body.insert("misfire".into(), policy);
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::{CreateArgs, create_body};

    #[derive(Parser)]
    struct Create {
        #[command(flatten)]
        args: CreateArgs,
    }

    fn body(args: &[&str]) -> serde_json::Value {
        let parsed = Create::try_parse_from(std::iter::once("create").chain(args.iter().copied()))
            .expect("flags parse");
        create_body(parsed.args).expect("a body")
    }

    #[test]
    fn create_flags_make_the_whole_body() {
        assert_eq!(
            body(&[
                "--webhook",
                "https://example.com/h",
                "--header",
                "authorization=Bearer x",
                "--rate-limit",
                "5",
                "--batch",
                "100",
                "--every",
                "15m",
                "--start",
                "2027-01-01T00:00:00Z",
                "--max-runs",
                "10",
                "--max-attempts",
                "3",
                "--initial-backoff",
                "2s",
                "--misfire",
                "all:6h",
                "--payload",
                "{\"a\": 1}",
                "--key",
                "k",
                "--type",
                "t",
            ]),
            json!({
                "schedule": {"every": "15m", "start": "2027-01-01T00:00:00Z", "max_runs": 10},
                "target": {"webhook": {
                    "url": "https://example.com/h",
                    "headers": {"authorization": "Bearer x"},
                    "rate_limit": 5,
                    "batch": {"max_items": 100},
                }},
                "payload": {"a": 1},
                "key": "k",
                "type": "t",
                "retry": {"max_attempts": 3, "initial_backoff": "2s"},
                "misfire": {"policy": "all", "window": "6h"},
            })
        );
        assert_eq!(
            body(&["--queue", "emails", "--after", "1m", "--misfire", "skip"]),
            json!({"schedule": {"after": "1m"}, "target": {"queue": "emails"}, "misfire": "skip"})
        );
    }

    #[test]
    fn a_payload_is_read_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payload.json");
        std::fs::write(&path, r#"{"from": "file"}"#).unwrap();
        let at = format!("@{}", path.display());
        let b = body(&["--queue", "q", "--after", "1m", "--payload", &at]);
        assert_eq!(b["payload"], json!({"from": "file"}));
    }

    #[test]
    fn json_cannot_be_combined_with_other_flags() {
        assert!(Create::try_parse_from(["create", "--json", "{}", "--after", "1m"]).is_err());
        assert!(
            Create::try_parse_from(["create", "--webhook", "https://e/", "--queue", "q"]).is_err()
        );
    }
}
