//! A job's fields as flags, for `job create` and `job update`, and the request they make as the
//! API contract's shape (`CreateJob`, `PatchJob`), or a whole body given with `--json`; and a
//! schedule from its flags, which `job next-fires` shares.

use anyhow::Context;
use clap::Args;
use hourglass_client::api::{
    CallbackIn, CreateJob, HeadersIn, MisfireIn, PatchJob, RetryIn, ScheduleIn, TargetIn,
    WebhookBatch, WebhookIn,
};
use serde_json::Value;

use crate::usage;

/// The flags that make a `--json` body unnecessary, for `conflicts_with_all`.
const FIELD_FLAGS: [&str; 27] = [
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
    "jitter",
    "calendar",
    "roll",
    "anchor",
    "offset",
    "payload",
    "job_type",
    "headers",
    "max_attempts",
    "initial_backoff",
    "max_backoff",
    "misfire",
    "rate_limit",
    "batch",
    "labels",
    "on_failure_url",
    "on_success_url",
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
    /// Fire each occurrence up to this long after its due time, e.g. 10m (at most 24h).
    #[arg(long)]
    jitter: Option<String>,
    /// A calendar of the namespace whose excluded days the occurrences avoid
    /// (`hourglass calendar put`).
    #[arg(long)]
    calendar: Option<String>,
    /// With --calendar: skip (default), previous or next — what an occurrence on an excluded
    /// day does.
    #[arg(long, requires = "calendar")]
    roll: Option<String>,
    /// An anchor of the namespace (`hourglass anchor put`): alone, a one-off at the anchor plus
    /// --offset; with --every, an interval starting there. Moving the anchor moves the job.
    #[arg(long)]
    anchor: Option<String>,
    /// With --anchor: a signed duration from the anchor's instant, e.g. -8h.
    #[arg(long, requires = "anchor", allow_hyphen_values = true)]
    offset: Option<String>,
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
    /// What a recurring occurrence that falls due while the previous one is still in flight
    /// does: skip, buffer_one, buffer_all (the default), or allow (run it at once too).
    #[arg(long)]
    overlap: Option<String>,
    /// A label to select the job by, KEY=VALUE (e.g. tenant=acme); repeat for more (at most
    /// 16). On update, the labels given replace all of the job's.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// A webhook URL told (an `occurrence.failed` event) when an occurrence is dead-lettered.
    #[arg(long, value_name = "URL")]
    on_failure_url: Option<String>,
    /// A webhook URL told (an `occurrence.succeeded` event) when an occurrence is delivered.
    #[arg(long, value_name = "URL")]
    on_success_url: Option<String>,
}

pub(super) fn create_body(c: CreateArgs) -> anyhow::Result<CreateJob> {
    if let Some(text) = c.json {
        return json_flag(&text);
    }
    let fields = c.fields.into_fields()?;
    let Some(target) = fields.target else {
        return Err(usage(
            "give --webhook (the URL to call) or --queue, or a full body with --json",
        ));
    };
    let Some(schedule) = fields.schedule else {
        return Err(usage(
            "give exactly one of --at, --after, --cron or --every",
        ));
    };
    Ok(CreateJob {
        key: c.key,
        job_type: fields.job_type,
        schedule,
        target,
        payload: fields.payload,
        retry: fields.retry,
        misfire: fields.misfire,
        overlap: fields.overlap,
        labels: fields.labels,
        on_failure: fields.on_failure,
        on_success: fields.on_success,
    })
}

/// The PATCH body of `job update`: each field given replaces the job's.
pub(super) fn update_body(u: UpdateArgs) -> anyhow::Result<PatchJob> {
    if let Some(text) = u.json {
        return json_flag(&text);
    }
    let fields = u.fields.into_fields()?;
    let patch = PatchJob {
        job_type: fields.job_type,
        schedule: fields.schedule,
        target: fields.target,
        // `--payload null` removes the payload.
        payload: fields.payload.map(|p| Some(p).filter(|p| !p.is_null())),
        retry: fields.retry,
        misfire: fields.misfire,
        overlap: fields.overlap,
        labels: fields.labels,
        on_failure: fields.on_failure.map(Some),
        on_success: fields.on_success.map(Some),
    };
    let nothing = patch.job_type.is_none()
        && patch.on_failure.is_none()
        && patch.on_success.is_none()
        && patch.schedule.is_none()
        && patch.target.is_none()
        && patch.payload.is_none()
        && patch.retry.is_none()
        && patch.misfire.is_none()
        && patch.overlap.is_none()
        && patch.labels.is_none();
    if nothing {
        return Err(usage(
            "nothing to change: give the fields to replace (--after, --webhook, --payload, \
             --type, ...) or a body with --json",
        ));
    }
    Ok(patch)
}

/// A whole body given with `--json`, read into the request's shape here: text that is not
/// JSON, or JSON that is not that request, is a usage error naming what is wrong.
fn json_flag<T: serde::de::DeserializeOwned + WithTarget>(text: &str) -> anyhow::Result<T> {
    // Read straight from the text, not through a `Value`, which would keep only one of a name
    // given twice.
    let body: T = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            usage(format!(
                "--json is not a request body this command sends: {e}"
            ))
        } else {
            usage(format!("--json is not valid JSON: {e}"))
        }
    })?;
    // Derived shapes also read an array, by position; a request body is an object.
    if !text.trim_start().starts_with('{') {
        return Err(usage("--json is not a JSON object"));
    }
    // The shape keeps one value of a header named twice; the node would refuse the name.
    if let Some(name) = body
        .target()
        .and_then(|t| t.webhook.as_ref())
        .and_then(|w| w.headers.repeated.as_ref())
    {
        return Err(usage(format!("--json: the header {name:?} is given twice")));
    }
    Ok(body)
}

/// The request shapes `--json` reads, by their target.
trait WithTarget {
    fn target(&self) -> Option<&TargetIn>;
}

impl WithTarget for CreateJob {
    fn target(&self) -> Option<&TargetIn> {
        Some(&self.target)
    }
}

impl WithTarget for PatchJob {
    fn target(&self) -> Option<&TargetIn> {
        self.target.as_ref()
    }
}

/// The fields a job's flags set, each only when a flag of it was given.
struct Fields {
    target: Option<TargetIn>,
    schedule: Option<ScheduleIn>,
    payload: Option<Value>,
    job_type: Option<String>,
    retry: Option<RetryIn>,
    misfire: Option<MisfireIn>,
    overlap: Option<String>,
    labels: Option<std::collections::BTreeMap<String, String>>,
    on_failure: Option<CallbackIn>,
    on_success: Option<CallbackIn>,
}

/// A schedule from its flags (`job create`, `job update`, `job next-fires`): `at`, `after`,
/// `cron` (in `timezone`, UTC by default) or `every`, exactly one, bounded by `start`, `end`
/// and `max_runs`. `None` when none of them is given.
pub(super) struct ScheduleFlags {
    pub(super) at: Option<String>,
    pub(super) after: Option<String>,
    pub(super) cron: Option<String>,
    pub(super) timezone: Option<String>,
    pub(super) every: Option<String>,
    pub(super) start: Option<String>,
    pub(super) end: Option<String>,
    pub(super) max_runs: Option<u64>,
    pub(super) jitter: Option<String>,
    pub(super) calendar: Option<String>,
    pub(super) roll: Option<String>,
    pub(super) anchor: Option<String>,
    pub(super) offset: Option<String>,
}

impl ScheduleFlags {
    pub(super) fn into_schedule(self) -> anyhow::Result<Option<ScheduleIn>> {
        let anchored_once = self.anchor.is_some() && self.every.is_none();
        let mut schedule = match (self.at, self.after, self.cron, self.every) {
            (None, None, None, None) if anchored_once => ScheduleIn::default(),
            (Some(at), None, None, None) => ScheduleIn {
                at: Some(at),
                ..ScheduleIn::default()
            },
            (None, Some(after), None, None) => ScheduleIn {
                after: Some(after),
                ..ScheduleIn::default()
            },
            (None, None, Some(cron), None) => ScheduleIn {
                cron: Some(cron),
                timezone: Some(self.timezone.unwrap_or_else(|| "UTC".into())),
                ..ScheduleIn::default()
            },
            (None, None, None, Some(every)) => ScheduleIn {
                every: Some(every),
                ..ScheduleIn::default()
            },
            (None, None, None, None) => {
                if self.start.is_some() || self.end.is_some() || self.max_runs.is_some() {
                    return Err(usage(
                        "--start, --end and --max-runs belong to a schedule: give --cron or \
                         --every too",
                    ));
                }
                if self.jitter.is_some() || self.calendar.is_some() {
                    return Err(usage(
                        "--jitter and --calendar belong to a schedule: give --at, --after, --cron \
                         or --every too",
                    ));
                }
                return Ok(None);
            }
            _ => {
                return Err(usage(
                    "give exactly one of --at, --after, --cron or --every (or --anchor)",
                ));
            }
        };
        schedule.anchor = self.anchor;
        schedule.offset = self.offset;
        schedule.start = self.start;
        schedule.end = self.end;
        schedule.max_runs = self.max_runs;
        schedule.jitter = self.jitter;
        schedule.calendar = self.calendar;
        schedule.roll = self.roll;
        Ok(Some(schedule))
    }
}

impl JobFields {
    /// The API fields these flags set: `target`, `schedule`, `payload`, `type`, `retry` and
    /// `misfire`, each only when a flag of it was given.
    fn into_fields(self) -> anyhow::Result<Fields> {
        let c = self;
        let webhook_flags = !c.headers.is_empty() || c.rate_limit.is_some() || c.batch.is_some();
        let target = match (c.webhook, c.queue) {
            (Some(url), None) => {
                let mut headers = HeadersIn::default();
                for header in &c.headers {
                    let Some((name, value)) = header.split_once('=') else {
                        return Err(usage(format!("--header {header:?} is not NAME=VALUE")));
                    };
                    headers
                        .headers
                        .insert(name.trim().to_string(), value.to_string());
                }
                Some(TargetIn {
                    webhook: Some(WebhookIn {
                        url,
                        headers,
                        rate_limit: c.rate_limit,
                        batch: c.batch.map(|max_items| WebhookBatch { max_items }),
                    }),
                    ..TargetIn::default()
                })
            }
            (None, Some(queue)) => Some(TargetIn {
                queue: Some(queue),
                ..TargetIn::default()
            }),
            (None, None) if webhook_flags => {
                return Err(usage("--header, --rate-limit and --batch need --webhook"));
            }
            _ => None,
        };
        let schedule = ScheduleFlags {
            at: c.at,
            after: c.after,
            cron: c.cron,
            timezone: c.timezone,
            every: c.every,
            start: c.start,
            end: c.end,
            max_runs: c.max_runs,
            jitter: c.jitter,
            calendar: c.calendar,
            roll: c.roll,
            anchor: c.anchor,
            offset: c.offset,
        }
        .into_schedule()?;
        let payload = match c.payload {
            None => None,
            Some(payload) => {
                let text = match payload.strip_prefix('@') {
                    Some("-") => std::io::read_to_string(std::io::stdin())
                        .context("cannot read the payload from standard input")?,
                    Some(path) => std::fs::read_to_string(path)
                        .map_err(|e| usage(format!("--payload: cannot read {path}: {e}")))?,
                    None => payload,
                };
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| usage(format!("--payload is not valid JSON: {e}")))?;
                Some(value)
            }
        };
        let retry = RetryIn {
            max_attempts: c.max_attempts,
            initial_backoff: c.initial_backoff,
            max_backoff: c.max_backoff,
        };
        let retry_given = retry.max_attempts.is_some()
            || retry.initial_backoff.is_some()
            || retry.max_backoff.is_some();
        let misfire = match c.misfire {
            None => None,
            Some(misfire) => Some(MisfireIn(match misfire.split_once(':') {
                Some(("all", window)) => {
                    let mut policy = serde_json::Map::new();
                    policy.insert("policy".into(), Value::String("all".into()));
                    policy.insert("window".into(), Value::String(window.into()));
                    Value::Object(policy)
                }
                Some(_) => {
                    return Err(usage(format!(
                        "--misfire {misfire:?}: give skip, once, all or all:WINDOW"
                    )));
                }
                None => Value::String(misfire),
            })),
        };
        let mut labels = std::collections::BTreeMap::new();
        for label in &c.labels {
            let Some((key, value)) = label.split_once('=') else {
                return Err(usage(format!("--label {label:?} is not KEY=VALUE")));
            };
            labels.insert(key.to_owned(), value.to_owned());
        }
        Ok(Fields {
            target,
            schedule,
            payload,
            job_type: c.job_type,
            retry: retry_given.then_some(retry),
            misfire,
            overlap: c.overlap,
            labels: (!c.labels.is_empty()).then_some(labels),
            on_failure: c.on_failure_url.map(webhook_callback),
            on_success: c.on_success_url.map(webhook_callback),
        })
    }
}

/// A callback to a webhook, with the defaults (`--json` gives the others).
fn webhook_callback(url: String) -> CallbackIn {
    CallbackIn {
        target: TargetIn {
            webhook: Some(WebhookIn {
                url,
                headers: HeadersIn::default(),
                rate_limit: None,
                batch: None,
            }),
            ..TargetIn::default()
        },
        every_attempt: false,
        include_payload: false,
        retry: None,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::{CreateArgs, UpdateArgs, create_body, update_body};

    #[derive(Parser)]
    struct Update {
        #[command(flatten)]
        args: UpdateArgs,
    }

    fn patch(args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let parsed =
            Update::try_parse_from(["update", "job-1"].into_iter().chain(args.iter().copied()))
                .expect("flags parse");
        Ok(serde_json::to_value(update_body(parsed.args)?).expect("serializes"))
    }

    #[test]
    fn update_bodies_hold_the_fields_given_and_json_is_read_as_the_patch() {
        assert_eq!(
            patch(&["--payload", "null", "--type", "t"]).unwrap(),
            json!({"type": "t", "payload": null})
        );
        assert_eq!(
            patch(&["--json", "{\"payload\": null}"]).unwrap(),
            json!({"payload": null})
        );
        for bad in [
            "{\"nope\": 1}",
            "[\"report\"]",
            "{\"target\": {\"webhook\": {\"url\": \"https://e/\", \"headers\": {\"a\": \"1\", \"a\": \"2\"}}}}",
        ] {
            let e = patch(&["--json", bad]).unwrap_err();
            assert!(
                e.downcast_ref::<crate::profile::Usage>().is_some(),
                "{bad}: {e}"
            );
        }
        assert!(patch(&[]).is_err(), "nothing to change");
    }

    #[derive(Parser)]
    struct Create {
        #[command(flatten)]
        args: CreateArgs,
    }

    fn body(args: &[&str]) -> serde_json::Value {
        let parsed = Create::try_parse_from(std::iter::once("create").chain(args.iter().copied()))
            .expect("flags parse");
        serde_json::to_value(create_body(parsed.args).expect("a body")).expect("serializes")
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
