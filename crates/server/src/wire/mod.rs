//! Validation and conversion between the API's shapes (`hourglass_api`) and the domain: requests
//! become core drafts (a schedule, a target, a retry and misfire policy, a job spec) or a
//! validation error naming the offending field by its JSON path; records become answers
//! (`out`). The shapes themselves are the contract crate's.

use std::time::Duration;

use hourglass_api::{CreateJob, MisfireIn, PreviewRequest, RetryIn, ScheduleIn, SchedulePreview};
use hourglass_core::duration::{format_duration, parse_duration};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{
    JobSpec, MisfirePolicy, OverlapPolicy, RetryPolicy, Schedule, ScheduleKind, ValidationError,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

mod anchors;
mod calendars;
mod callbacks;
mod connection;
mod convert;
pub use anchors::{anchor_at, anchor_name, anchor_out, named_anchor, offset_out};
pub use calendars::{Calendars, calendar, calendar_name, calendar_out, named};
pub use callbacks::callback;
pub use connection::check_payload;
pub use convert::{job_state, run_outcome};
mod out;
mod target;
pub use out::{dead_letter_out, job_brief, job_out, payload_out, rfc3339, run_out, schedule_out};
pub(crate) use target::parse_url;
pub use target::{TargetRules, target};

/// Limits that validation enforces; the operator can change them in config.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_payload_bytes: usize,
    /// How far in the past an `at` instant may be (clock skew, slow clients); it fires at once.
    pub max_past: Duration,
    pub max_key_len: usize,
    /// A webhook URL's length, as sent and once normalized. 8 KiB is what common HTTP servers
    /// take in a request line (nginx, Apache), and leaves room for presigned URLs.
    pub max_url_bytes: usize,
    /// Extra headers on a webhook target.
    pub max_webhook_headers: usize,
    /// The extra headers' names and values together. 16 KiB is Node.js's default cap on a whole
    /// request head; every header this adds is stored with the job and sent on every attempt.
    pub max_webhook_header_bytes: usize,
    /// Largest body of a batch create (`POST /v1/jobs/batch`), refused with 413 above it.
    pub max_batch_bytes: usize,
    /// How long a request body may take to arrive, whole; 408 `body_timeout` after it.
    pub body_read_timeout: Duration,
    /// The encoded size past which a listing's page, or a lease's answer, stops: the rest comes
    /// on the next page (or lease). An answer may pass it by one item.
    pub max_answer_bytes: usize,
    /// Bytes of request bodies the node holds at once, in total and per API key.
    pub body_budget: crate::budget::BodyBudget,
}

/// What a single job's request body may hold besides its payload (type, schedule, target with
/// its headers, retry, misfire, key): the body of a create or edit is refused above
/// `max_payload_bytes` plus this.
pub const ENVELOPE_BYTES: usize = 64 * 1024;

impl Limits {
    /// Largest body of a single job's create or edit: its payload plus the rest of the request.
    pub fn job_body_bytes(&self) -> usize {
        self.max_payload_bytes.saturating_add(ENVELOPE_BYTES)
    }

    /// The most a stored job weighs, in memory or encoded in an answer: its payload and
    /// everything else its create could carry.
    pub fn max_job_bytes(&self) -> usize {
        self.job_body_bytes()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            max_past: Duration::from_secs(300),
            max_key_len: 256,
            max_url_bytes: 8 * 1024,
            max_webhook_headers: 32,
            max_webhook_header_bytes: 16 * 1024,
            max_batch_bytes: 16 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(60),
            max_answer_bytes: 4 * 1024 * 1024,
            body_budget: crate::budget::BodyBudget::default(),
        }
    }
}

/// A header name's length. Real header names are a few dozen bytes.
pub const MAX_HEADER_NAME_BYTES: usize = 256;
/// A header value's length: nginx's and Apache's default cap on one header line, so a longer
/// value would be refused by most receivers anyway.
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;
/// A cron expression's length. Six fields each listing every value they can take come to
/// about 530 characters; nothing meaningful is longer, and expressions are cached by their text.
pub const MAX_CRON_BYTES: usize = 1024;
/// The highest `rate_limit` a webhook target may ask for, in deliveries a second.
pub const MAX_RATE_LIMIT: u32 = 100_000;
/// The most deliveries a batched webhook target may put in one request.
pub const MAX_BATCH_ITEMS: u16 = 1000;
/// A time zone name's length; the longest IANA name has 32 characters.
pub const MAX_TIMEZONE_BYTES: usize = 64;

/// The latest instant a job may be scheduled for.
pub(crate) const MAX_FUTURE: SignedDuration = SignedDuration::from_hours(100 * 366 * 24);
/// The longest `every` interval: one occurrence per scheduling horizon.
const MAX_EVERY: Duration = Duration::from_secs(100 * 366 * 24 * 3600);
/// The longest misfire catch-up window. Past it, a missed run is an outage to look at, not a
/// backlog to replay; and every bound on a duration keeps the engine's time arithmetic in range.
pub const MAX_MISFIRE_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

/// The longest `schedule.jitter`: a day, so a daily job may spread over its whole day.
pub const MAX_JITTER: Duration = Duration::from_secs(24 * 3600);

/// A validated create request.
pub struct ValidJob {
    pub key: Option<String>,
    pub spec: JobSpec,
    pub payload: Option<String>,
    pub first_due: Timestamp,
}

fn parse_instant(text: &str, field: &str) -> Result<Timestamp, ValidationError> {
    // jiff reads offsets up to ±25:59; RFC 3339 allows ±23:59 only.
    let offset_hours = text
        .len()
        .checked_sub(6)
        .and_then(|i| text.get(i..))
        .filter(|tail| tail.starts_with(['+', '-']) && tail.as_bytes()[3] == b':')
        .and_then(|tail| tail[1..3].parse::<u8>().ok());
    if offset_hours.is_some_and(|h| h > 23) {
        return Err(ValidationError::new(
            "invalid_instant",
            field,
            format!("{text:?} has an offset beyond ±23:59"),
        ));
    }
    text.parse::<Timestamp>().map_err(|_| {
        ValidationError::new(
            "invalid_instant",
            field,
            format!(
                "{text:?} is not an RFC 3339 instant with an offset, e.g. \"2027-03-01T09:00:00+01:00\""
            ),
        )
    })
}

/// Whole milliseconds: sub-millisecond instants would make the delivery id ambiguous.
fn truncate_ms(ts: Timestamp) -> Timestamp {
    hourglass_core::from_ms(ts.as_millisecond())
}

pub fn validate_name(value: &str, field: &str, max: usize) -> Result<(), ValidationError> {
    if value.is_empty() || value.len() > max || value.chars().any(|c| c.is_control()) {
        return Err(ValidationError::new(
            "invalid_field",
            field,
            format!("must be 1 to {max} characters without control characters"),
        ));
    }
    Ok(())
}

pub fn schedule(
    input: &ScheduleIn,
    now: Timestamp,
    limits: &Limits,
    calendars: &Calendars,
) -> Result<Schedule, ValidationError> {
    let calendar = calendars::schedule_calendar(input, calendars)?;
    let anchored = anchors::schedule_anchor(input, &calendars.anchors)?;
    // A schedule read back from a job shows its anchor's instant as `at` (or `start`), which
    // `schedule_anchor` checked; it is the anchor's, not a time or bound of its own.
    let read_back;
    let input = if anchored.is_some() && (input.at.is_some() || input.start.is_some()) {
        read_back = ScheduleIn {
            at: None,
            start: None,
            ..input.clone()
        };
        &read_back
    } else {
        input
    };
    // An anchor without `every` is a one-off at its instant.
    let anchored_at = anchored
        .as_ref()
        .filter(|_| input.every.is_none())
        .map(|(_, instant)| *instant);
    let within = |e: ValidationError| e.within("schedule");
    let kinds = [
        input.at.is_some(),
        input.after.is_some(),
        input.cron.is_some(),
        input.every.is_some(),
        anchored_at.is_some(),
    ]
    .iter()
    .filter(|k| **k)
    .count();
    if kinds != 1 {
        return Err(ValidationError::new(
            "invalid_schedule",
            "schedule",
            "give exactly one of at, after, cron, every or anchor",
        ));
    }
    if input.timezone.is_some() && input.cron.is_none() {
        return Err(ValidationError::new(
            "invalid_schedule",
            "schedule.timezone",
            "timezone applies to cron schedules only",
        ));
    }
    let start = input
        .start
        .as_deref()
        .map(|s| parse_instant(s, "start").map(truncate_ms))
        .transpose()
        .map_err(within)?;
    let end = input
        .end
        .as_deref()
        .map(|s| parse_instant(s, "end").map(truncate_ms))
        .transpose()
        .map_err(within)?;
    let one_off = input.at.is_some() || input.after.is_some() || anchored_at.is_some();
    if one_off {
        let extra = [
            ("start", input.start.is_some()),
            ("end", input.end.is_some()),
            ("max_runs", input.max_runs.is_some()),
        ];
        if let Some((name, _)) = extra.iter().find(|(_, present)| *present) {
            return Err(ValidationError::new(
                "invalid_schedule",
                format!("schedule.{name}"),
                "start, end and max_runs apply to recurring schedules only",
            ));
        }
    }
    if let (Some(start), Some(end)) = (start, end)
        && end < start
    {
        return Err(ValidationError::new(
            "invalid_schedule",
            "schedule.end",
            "end is before start",
        ));
    }
    if input.max_runs == Some(0) {
        return Err(ValidationError::new(
            "invalid_field",
            "schedule.max_runs",
            "max_runs must be at least 1",
        ));
    }
    let latest = now.saturating_add(MAX_FUTURE).unwrap_or(Timestamp::MAX);
    let too_far = |field: &str| {
        ValidationError::new(
            "instant_too_far",
            format!("schedule.{field}"),
            "jobs may be scheduled at most 100 years ahead",
        )
    };
    if start.is_some_and(|start| start > latest) {
        return Err(too_far("start"));
    }
    let kind = if let Some(at) = anchored_at {
        // Where the anchor is now; it moves with it. Bounded as `at` is.
        if at < hourglass_core::sub_saturating(now, limits.max_past) {
            return Err(ValidationError::new(
                "instant_in_past",
                "schedule.anchor",
                format!(
                    "the anchor plus the offset, {}, is more than {} in the past",
                    rfc3339(at),
                    format_duration(limits.max_past)
                ),
            ));
        }
        if at > latest {
            return Err(too_far("anchor"));
        }
        ScheduleKind::At(at)
    } else if let Some(at) = &input.at {
        let at = truncate_ms(parse_instant(at, "at").map_err(within)?);
        if at < hourglass_core::sub_saturating(now, limits.max_past) {
            return Err(ValidationError::new(
                "instant_in_past",
                "schedule.at",
                format!(
                    "{at} is more than {} in the past",
                    format_duration(limits.max_past)
                ),
            ));
        }
        if at > latest {
            return Err(too_far("at"));
        }
        ScheduleKind::At(at)
    } else if let Some(after) = &input.after {
        let delay = parse_duration(after, "after").map_err(within)?;
        match SignedDuration::try_from(delay) {
            Ok(delay) if delay <= MAX_FUTURE => {
                ScheduleKind::At(hourglass_core::add_saturating(now, delay.unsigned_abs()))
            }
            _ => return Err(too_far("after")),
        }
    } else if let Some(expr) = &input.cron {
        if expr.len() > MAX_CRON_BYTES {
            return Err(ValidationError::new(
                "invalid_cron",
                "schedule.cron",
                format!(
                    "the cron expression is {} bytes; the limit is {MAX_CRON_BYTES}",
                    expr.len()
                ),
            ));
        }
        let tz = input.timezone.as_deref().unwrap_or("UTC");
        if tz.len() > MAX_TIMEZONE_BYTES {
            return Err(ValidationError::new(
                "unknown_timezone",
                "schedule.timezone",
                format!(
                    "not an IANA time zone name (those have at most {MAX_TIMEZONE_BYTES} bytes)"
                ),
            ));
        }
        let cron = CronSchedule::parse(expr, tz).map_err(within)?;
        // Any occurrence the job could get counts, however far (a leap day from 2097 is in
        // 2104): from its start, or from now when the start has passed, to the horizon.
        cron.check_fires_between(start.unwrap_or(now).max(now), latest)
            .map_err(within)?;
        ScheduleKind::Cron(Box::new(cron))
    } else {
        let every = input.every.as_deref().unwrap_or_default();
        let interval = parse_duration(every, "every").map_err(within)?;
        if interval < Duration::from_secs(1) {
            return Err(ValidationError::new(
                "invalid_duration",
                "schedule.every",
                "the shortest interval is 1s",
            ));
        }
        if interval > MAX_EVERY {
            return Err(ValidationError::new(
                "invalid_duration",
                "schedule.every",
                "the longest interval is 100 years (878400h): jobs may be scheduled at most 100 years ahead",
            ));
        }
        let anchor = match &anchored {
            Some((_, instant)) => *instant,
            None => start.unwrap_or(hourglass_core::add_saturating(now, interval)),
        };
        ScheduleKind::Every { interval, anchor }
    };
    Ok(Schedule {
        kind,
        start: if input.every.is_some() { None } else { start },
        end,
        max_runs: input.max_runs,
        jitter: input.jitter.as_deref().map(jitter).transpose()?,
        calendar,
        anchor: anchored.map(|(reference, _)| Box::new(reference)),
    })
}

/// `schedule.jitter`: a positive duration of at most [`MAX_JITTER`].
fn jitter(text: &str) -> Result<Duration, ValidationError> {
    let jitter = parse_duration(text, "jitter").map_err(|e| e.within("schedule"))?;
    if jitter > MAX_JITTER {
        return Err(ValidationError::new(
            "invalid_duration",
            "schedule.jitter",
            "the longest jitter is 1 day (24h)",
        ));
    }
    Ok(jitter)
}

pub fn retry(input: &RetryIn) -> Result<RetryPolicy, ValidationError> {
    let defaults = RetryPolicy::default();
    let max_attempts = input.max_attempts.unwrap_or(defaults.max_attempts);
    if !(1..=100).contains(&max_attempts) {
        return Err(ValidationError::new(
            "invalid_field",
            "retry.max_attempts",
            "max_attempts must be between 1 and 100",
        ));
    }
    let duration = |v: &Option<String>, name: &str, default: Duration| {
        v.as_deref().map_or(Ok(default), |text| {
            parse_duration(text, name).map_err(|e| e.within("retry"))
        })
    };
    let initial_backoff = duration(
        &input.initial_backoff,
        "initial_backoff",
        defaults.initial_backoff,
    )?;
    let max_backoff = duration(&input.max_backoff, "max_backoff", defaults.max_backoff)?;
    if max_backoff < initial_backoff {
        return Err(ValidationError::new(
            "invalid_field",
            "retry.max_backoff",
            "max_backoff is shorter than initial_backoff",
        ));
    }
    if max_backoff > Duration::from_secs(7 * 24 * 3600) {
        return Err(ValidationError::new(
            "invalid_field",
            "retry.max_backoff",
            "max_backoff is at most 7 days",
        ));
    }
    Ok(RetryPolicy {
        max_attempts,
        initial_backoff,
        max_backoff,
    })
}

pub fn misfire(input: &MisfireIn) -> Result<MisfirePolicy, ValidationError> {
    let invalid = || {
        ValidationError::new(
            "invalid_misfire",
            "misfire",
            "misfire is \"skip\", \"once\", \"all\" or {\"policy\": \"all\", \"window\": \"6h\"}",
        )
    };
    let (name, window) = match &input.0 {
        Value::String(name) => (name.as_str(), None),
        Value::Object(fields) => {
            if let Some(unknown) = fields.keys().find(|k| *k != "policy" && *k != "window") {
                return Err(ValidationError::new(
                    "unknown_field",
                    format!("misfire.{unknown}"),
                    format!("unknown field `{unknown}`, expected `policy` or `window`"),
                ));
            }
            let text = |key: &str| match fields.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(ValidationError::new(
                    "invalid_misfire",
                    format!("misfire.{key}"),
                    format!("{key} must be a string"),
                )),
            };
            (text("policy")?.ok_or_else(invalid)?, text("window")?)
        }
        _ => return Err(invalid()),
    };
    match (name, window) {
        ("skip", None) => Ok(MisfirePolicy::Skip),
        ("once", None) => Ok(MisfirePolicy::Once),
        ("all", window) => {
            let window = window
                .map(|w| parse_duration(w, "misfire.window"))
                .transpose()?
                .unwrap_or(Duration::from_secs(3600));
            if window > MAX_MISFIRE_WINDOW {
                return Err(ValidationError::new(
                    "invalid_duration",
                    "misfire.window",
                    "the catch-up window is at most 30 days (720h)",
                ));
            }
            Ok(MisfirePolicy::All { window })
        }
        _ => Err(invalid()),
    }
}

/// A backfill's range `[from, to)`: `from` before `to`, and `to` not after `now` (a backfill
/// runs the past).
pub fn backfill_range(
    input: &hourglass_api::BackfillRequest,
    now: Timestamp,
) -> Result<(Timestamp, Timestamp), ValidationError> {
    let from = parse_instant(&input.from, "from")?;
    let to = parse_instant(&input.to, "to")?;
    if to <= from {
        return Err(ValidationError::new(
            "invalid_field",
            "to",
            "to must be after from: the range is [from, to)",
        ));
    }
    if to > now {
        return Err(ValidationError::new(
            "invalid_field",
            "to",
            "to must not be in the future: a backfill runs past occurrences",
        ));
    }
    Ok((from, to))
}

/// `overlap`: a policy's name (`hourglass_core::overlap`).
pub fn overlap(name: &str) -> Result<OverlapPolicy, ValidationError> {
    match name {
        "skip" => Ok(OverlapPolicy::Skip),
        "buffer_one" => Ok(OverlapPolicy::BufferOne),
        "buffer_all" => Ok(OverlapPolicy::BufferAll),
        "allow" => Ok(OverlapPolicy::Allow),
        _ => Err(ValidationError::new(
            "invalid_field",
            "overlap",
            "overlap is \"skip\", \"buffer_one\", \"buffer_all\" or \"allow\"",
        )),
    }
}

pub fn job(
    input: &CreateJob,
    now: Timestamp,
    limits: &Limits,
    rules: TargetRules,
    calendars: &Calendars,
) -> Result<ValidJob, ValidationError> {
    if let Some(key) = &input.key {
        validate_name(key, "key", limits.max_key_len)?;
    }
    if let Some(job_type) = &input.job_type {
        validate_name(job_type, "type", 128)?;
    }
    let schedule = self::schedule(&input.schedule, now, limits, calendars)?;
    let target = self::target(&input.target, rules, limits)?;
    connection::check_payload(&target, input.payload.as_ref())?;
    let retry = input
        .retry
        .as_ref()
        .map(self::retry)
        .transpose()?
        .unwrap_or_default();
    let misfire = input
        .misfire
        .as_ref()
        .map(self::misfire)
        .transpose()?
        .unwrap_or_default();
    let overlap = input
        .overlap
        .as_deref()
        .map(self::overlap)
        .transpose()?
        .unwrap_or_default();
    let labels = input.labels.clone().unwrap_or_default();
    hourglass_core::labels::validate(&labels)?;
    let (on_failure, on_success) = callbacks::callbacks(
        input.on_failure.as_ref(),
        input.on_success.as_ref(),
        rules,
        limits,
    )?;
    // A callback's event names the job's key; a claim does not carry it, and it never changes.
    let callback_key = input
        .key
        .clone()
        .filter(|_| on_failure.is_some() || on_success.is_some());
    let payload = encode_payload(input.payload.as_ref(), limits)?;
    let first_due = first_due(&schedule, now)?;
    Ok(ValidJob {
        key: input.key.clone(),
        spec: JobSpec {
            job_type: input.job_type.clone(),
            schedule,
            target,
            retry,
            misfire,
            overlap,
            backfill: None,
            labels,
            on_failure,
            on_success,
            callback_of: None,
            callback_key,
            occurrence_of: None,
        },
        payload,
        first_due,
    })
}

/// The first due time of a validated schedule for a job accepted at `now`, or
/// `schedule_never_fires` when its end (or max runs) leaves it none.
pub fn first_due(schedule: &Schedule, now: Timestamp) -> Result<Timestamp, ValidationError> {
    schedule
        .first_due(now)
        .ok_or_else(|| match &schedule.calendar {
            Some(_) => ValidationError::new(
                "schedule_never_fires",
                "schedule.calendar",
                "the calendar excludes every occurrence of the schedule (before its end)",
            ),
            None => ValidationError::new(
                "schedule_never_fires",
                "schedule",
                "the schedule has no occurrence before its end",
            ),
        })
}

pub const PREVIEW_DEFAULT_COUNT: u64 = 10;
pub const PREVIEW_MAX_COUNT: u64 = 100;

/// The due times a job with this schedule would get if it were created at `now`: validated
/// exactly as a create validates it (same codes, same `schedule.*` paths), then walked the
/// way the engine advances an on-time job, so `start`, `end` and `max_runs` cut the list
/// where they would cut the job.
pub fn preview(
    input: &PreviewRequest,
    now: Timestamp,
    limits: &Limits,
    calendars: &Calendars,
) -> Result<SchedulePreview, ValidationError> {
    let schedule = schedule(&input.schedule, now, limits, calendars)?;
    let count = input.count.unwrap_or(PREVIEW_DEFAULT_COUNT);
    if !(1..=PREVIEW_MAX_COUNT).contains(&count) {
        return Err(ValidationError::new(
            "invalid_field",
            "count",
            format!("count must be between 1 and {PREVIEW_MAX_COUNT}"),
        ));
    }
    let job_id = match &input.job_id {
        Some(text) => text.parse::<uuid::Uuid>().map_err(|_| {
            ValidationError::new("invalid_field", "job_id", "job_id must be a job's UUID")
        })?,
        None => uuid::Uuid::nil(),
    };
    let mut due = first_due(&schedule, now)?;
    let mut dues = vec![due];
    while (dues.len() as u64) < count {
        // The runs listed so far count as done, which is how max_runs ends the list.
        match schedule.next_for_run(due, dues.len() as u64) {
            Some(next) => {
                due = next;
                dues.push(due);
            }
            None => break,
        }
    }
    let fire_times = dues
        .iter()
        .map(|due| rfc3339(schedule.fire_time(job_id, *due)))
        .collect();
    // A rolled occurrence fires away from its nominal time too.
    let nominal_times = (schedule.jitter.is_some() || schedule.calendar.is_some())
        .then(|| dues.into_iter().map(rfc3339).collect());
    Ok(SchedulePreview {
        fire_times,
        nominal_times,
        description: describe_schedule(&schedule, now),
    })
}

/// A validated schedule in words, as of `now`: "once at ...", "every 15m from ...", or croner's
/// wording of a cron expression with its zone, followed by whatever bounds it has. A start that
/// has passed is not called "from": nothing before `now` runs. An interval keeps it as the
/// cadence it is aligned to; a cron expression has no use for it. A jitter comes last.
pub fn describe_schedule(s: &Schedule, now: Timestamp) -> String {
    let mut words = match &s.kind {
        ScheduleKind::At(at) => format!("once at {}", rfc3339(*at)),
        ScheduleKind::Every { interval, anchor } => {
            let from = if *anchor < now { "aligned to" } else { "from" };
            format!(
                "every {} {from} {}",
                format_duration(*interval),
                rfc3339(*anchor)
            )
        }
        ScheduleKind::Cron(cron) => {
            let mut words = format!("{} ({})", cron.describe(), cron.timezone());
            if let Some(start) = s.start.filter(|start| *start > now) {
                words.push_str(&format!(", from {}", rfc3339(start)));
            }
            words
        }
    };
    if let Some(anchor) = &s.anchor {
        words.push_str(&format!(
            " (anchor {:?} {}, moving with it)",
            anchor.name,
            offset_out(anchor.offset_ms)
        ));
    }
    if let Some(end) = s.end {
        words.push_str(&format!(", until {}", rfc3339(end)));
    }
    match s.max_runs {
        Some(1) => words.push_str(", at most 1 run"),
        Some(n) => words.push_str(&format!(", at most {n} runs")),
        None => {}
    }
    if let Some(jitter) = s.jitter {
        words.push_str(&format!(
            ", each up to {} late (jitter)",
            format_duration(jitter)
        ));
    }
    if let Some(cal) = &s.calendar {
        let what = match cal.roll {
            hourglass_core::Roll::Skip => "skipped",
            hourglass_core::Roll::Previous => "moved to the previous included day",
            hourglass_core::Roll::Next => "moved to the next included day",
        };
        words.push_str(&format!(
            ", on days calendar {:?} excludes {what}",
            cal.name
        ));
    }
    words
}

pub fn encode_payload(
    payload: Option<&Value>,
    limits: &Limits,
) -> Result<Option<String>, ValidationError> {
    let Some(value) = payload.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = serde_json::to_string(value).expect("json values serialize");
    if text.len() > limits.max_payload_bytes {
        return Err(ValidationError::new(
            "payload_too_large",
            "payload",
            format!(
                "payload is {} bytes; the limit is {} bytes",
                text.len(),
                limits.max_payload_bytes
            ),
        ));
    }
    Ok(Some(text))
}

/// What a queue name may be, as error messages say it.
pub const QUEUE_NAME_RULE: &str =
    "a queue name is 1-64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

/// Queue names: the same alphabet as namespaces, so they are safe in paths, metrics and logs.
/// `.` and `..` are refused: in a URL path they are dot segments, which clients and proxies
/// resolve away (`/v1/queues/../lease`), so such a queue could not be addressed.
pub fn valid_queue_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests;
