//! The table views of the API's answers (`--output table`, the default on a terminal): what a
//! person scans for in each answer, from the same JSON the `json` output prints whole.

use jiff::Timestamp;
use serde_json::Value;

use crate::table::{Style, Table, ellipsize, instant, key_values, span};

/// Which answer is being shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// One job: create, get, pause, resume, trigger, cancel, a dead letter's replay.
    Job,
    /// `{"jobs": [...], "next_cursor": ...}`
    Jobs,
    /// `{"runs": [...], "next_cursor": ...}`
    Runs,
    /// `{"dead_letters": [...], "next_cursor": ...}`
    DeadLetters,
    /// One queue's counts.
    Queue,
    /// `{"queues": [...]}`
    Queues,
    /// `{"messages": [...]}` from a lease.
    Messages,
    /// Per-receipt results of ack, nack and extend.
    Receipts,
    /// `{"breakers": [...]}`
    Breakers,
    /// `{"connections": [...]}`
    Connections,
    /// `{"nodes": [...]}`
    Nodes,
    /// A rotated signing secret.
    Secret,
    /// `whoami`: the key's namespace, role and routes.
    Identity,
    /// `{"entries": [...], "next_cursor": ...}` of the audit log.
    Audit,
    /// `{"occurrences": N}`: an accepted backfill.
    Backfill,
    /// `{"changed": N, "more": ...}`: a bulk action by label selector.
    Bulk,
}

/// The view of `answer`, ending in a newline. A shape the view does not know (a node newer or
/// older than this client) falls back to the JSON itself, so nothing is hidden.
pub fn render(view: View, answer: &Value, style: Style, now: Timestamp) -> String {
    let shown = match view {
        View::Job => job(answer, style, now),
        View::Jobs => jobs(answer, style, now),
        View::Runs => runs(answer, style, now),
        View::DeadLetters => dead_letters(answer, style, now),
        View::Queue => queue(answer, style),
        View::Queues => queues(answer, style),
        View::Messages => messages(answer, style, now),
        View::Receipts => receipts(answer, style, now),
        View::Breakers => breakers(answer, style, now),
        View::Connections => connections(answer, style),
        View::Nodes => nodes(answer, style, now),
        View::Secret => secret(answer, style, now),
        View::Identity => identity(answer, style),
        View::Audit => audit(answer, style, now),
        View::Bulk => answer.get("changed").and_then(Value::as_u64).map(|n| {
            let s = if n == 1 { "" } else { "s" };
            match text(answer, "next_cursor") {
                Some(cursor) => format!("{n} job{s} changed; more may match: --cursor {cursor}\n"),
                None => format!("{n} job{s} changed\n"),
            }
        }),
        View::Backfill => answer.get("occurrences").and_then(Value::as_u64).map(|n| {
            let s = if n == 1 { "" } else { "s" };
            format!("backfill accepted: {n} occurrence{s} to run\n")
        }),
    };
    shown.unwrap_or_else(|| {
        let mut json = serde_json::to_string_pretty(answer).unwrap_or_default();
        json.push('\n');
        json
    })
}

/// A string field, or `None` when it is absent, null or not a string.
fn text(v: &Value, name: &str) -> Option<String> {
    v.get(name).and_then(Value::as_str).map(str::to_string)
}

/// A number or string field as text.
fn number(v: &Value, name: &str) -> Option<String> {
    match v.get(name)? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn or_dash(s: Option<String>) -> String {
    s.filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into())
}

/// `2026-11-24 08:11:20Z`, without the relative part: for times a person compares, not waits on.
fn stamp(v: &Value, name: &str) -> Option<String> {
    let raw = text(v, name)?;
    Some(match raw.parse::<Timestamp>() {
        Ok(ts) => ts.strftime("%Y-%m-%d %H:%M:%SZ").to_string(),
        Err(_) => raw,
    })
}

fn when(v: &Value, name: &str, now: Timestamp) -> Option<String> {
    text(v, name).map(|t| instant(&t, now))
}

/// The key a job was created with, else the tail of its id: the random part, which tells jobs
/// apart where the time-ordered head does not (every job created in one minute shares it).
pub fn job_label(job: &Value) -> String {
    if let Some(key) = text(job, "key") {
        return key;
    }
    id_tail(&text(job, "id").unwrap_or_default())
}

fn id_tail(id: &str) -> String {
    match id.len() {
        0 => "-".into(),
        n if n > 12 => format!("…{}", &id[n - 12..]),
        _ => id.to_string(),
    }
}

/// One line for a target: a webhook's URL, `queue NAME`, or a bus or cloud target's kind, where
/// it goes and the connection it goes through.
pub fn target_summary(target: &Value) -> String {
    let Some((kind, spec)) = target.as_object().and_then(|o| o.iter().next()) else {
        return "-".into();
    };
    match (kind.as_str(), spec) {
        ("webhook", w) => text(w, "url").unwrap_or_else(|| "webhook".into()),
        ("queue", Value::String(name)) => format!("queue {name}"),
        (kind, spec) => {
            let destination = [
                "bus",
                "queue_url",
                "topic_arn",
                "function",
                "subject",
                "stream",
                "exchange",
            ]
            .iter()
            .find_map(|field| text(spec, field));
            match (destination, text(spec, "connection")) {
                (Some(d), Some(c)) => format!("{kind} {d} (via {c})"),
                (Some(d), None) => format!("{kind} {d}"),
                (None, Some(c)) => format!("{kind} (via {c})"),
                (None, None) => kind.to_string(),
            }
        }
    }
}

fn schedule_summary(s: &Value) -> Option<String> {
    let mut out = if let Some(at) = stamp(s, "at") {
        format!("once at {at}")
    } else if let Some(cron) = text(s, "cron") {
        format!(
            "cron {cron} ({})",
            text(s, "timezone").unwrap_or_else(|| "UTC".into())
        )
    } else if let Some(every) = text(s, "every") {
        match stamp(s, "start") {
            Some(start) => format!("every {every} from {start}"),
            None => format!("every {every}"),
        }
    } else {
        return None;
    };
    if text(s, "cron").is_some()
        && let Some(start) = stamp(s, "start")
    {
        out.push_str(&format!(", from {start}"));
    }
    if let Some(end) = stamp(s, "end") {
        out.push_str(&format!(", until {end}"));
    }
    if let Some(n) = number(s, "max_runs") {
        out.push_str(&format!(", at most {n} runs"));
    }
    if let Some(jitter) = text(s, "jitter") {
        out.push_str(&format!(", jitter {jitter}"));
    }
    Some(out)
}

/// When a job's next attempt is: a retry waiting out its backoff first, else its next fire
/// time, with its due time beside it when jitter makes them differ.
fn next(job: &Value, now: Timestamp) -> Option<String> {
    let fire = text(job, "next_fire_at");
    match when(job, "next_attempt_at", now) {
        Some(retry) if text(job, "next_attempt_at") != fire => Some(format!("retry {retry}")),
        _ => match when(job, "next_fire_at", now) {
            Some(fire) => Some(format!(
                "{fire} (due {})",
                or_dash(when(job, "next_due_at", now))
            )),
            None => when(job, "next_due_at", now),
        },
    }
}

/// A job's labels as `key=value, ...` (sorted by key, as the node sends them); `None` without.
fn labels(j: &Value) -> Option<String> {
    let labels = j.get("labels")?.as_object().filter(|l| !l.is_empty())?;
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    Some(pairs.join(", "))
}

fn job(j: &Value, style: Style, now: Timestamp) -> Option<String> {
    j.get("id")?;
    let target = j.get("target");
    let mut target_line = target.map(target_summary);
    if let Some(w) = target.and_then(|t| t.get("webhook")) {
        let mut extra = Vec::new();
        if let Some(headers) = w.get("headers").and_then(Value::as_object)
            && !headers.is_empty()
        {
            let names: Vec<&str> = headers.keys().map(String::as_str).collect();
            extra.push(format!("headers {}", names.join(", ")));
        }
        if let Some(rate) = number(w, "rate_limit") {
            extra.push(format!("at most {rate}/s"));
        }
        if let Some(max_items) = w.get("batch").and_then(|b| number(b, "max_items")) {
            extra.push(format!("batches of up to {max_items}"));
        }
        if let (Some(line), false) = (&mut target_line, extra.is_empty()) {
            line.push_str(&format!(" ({})", extra.join("; ")));
        }
    }
    let retry = j.get("retry").map(|r| {
        format!(
            "up to {} attempts, backoff {} to {}",
            or_dash(number(r, "max_attempts")),
            or_dash(text(r, "initial_backoff")),
            or_dash(text(r, "max_backoff"))
        )
    });
    let misfire = j.get("misfire").map(|m| match m {
        Value::String(s) => s.clone(),
        m => format!(
            "{} (window {})",
            or_dash(text(m, "policy")),
            or_dash(text(m, "window"))
        ),
    });
    let payload = j
        .get("payload")
        .filter(|p| !p.is_null())
        .map(|p| ellipsize(&p.to_string(), 200));
    let attempt = j
        .get("attempt")
        .and_then(Value::as_u64)
        .filter(|a| *a > 0)
        .map(|a| a.to_string());
    Some(key_values(
        &[
            ("id", text(j, "id")),
            ("key", text(j, "key")),
            ("type", text(j, "type")),
            ("namespace", text(j, "namespace")),
            ("state", text(j, "state")),
            ("schedule", j.get("schedule").and_then(schedule_summary)),
            ("target", target_line),
            ("labels", labels(j)),
            ("payload", payload),
            ("next due", when(j, "next_due_at", now)),
            ("next fire", when(j, "next_fire_at", now)),
            (
                "next attempt",
                when(j, "next_attempt_at", now)
                    .filter(|_| text(j, "next_attempt_at") != text(j, "next_fire_at")),
            ),
            ("failed attempts", attempt),
            ("last error", text(j, "last_error")),
            ("runs", number(j, "runs")),
            ("skipped", number(j, "skipped").filter(|s| s != "0")),
            ("retry", retry),
            ("misfire", misfire),
            // Shown when it is not the default.
            ("overlap", text(j, "overlap").filter(|o| o != "buffer_all")),
            ("delivery id", text(j, "delivery_id")),
            ("created", when(j, "created_at", now)),
            ("updated", when(j, "updated_at", now)),
        ],
        style,
    ))
}

/// The table, `no NOUN` when it is empty, and how to get the next page.
fn page(table: Table, noun: &str, answer: &Value, style: Style) -> String {
    let mut out = if table.is_empty() {
        format!("no {noun}\n")
    } else {
        table.render(style)
    };
    if let Some(cursor) = text(answer, "next_cursor") {
        out.push_str(&format!("more: --cursor {cursor}\n"));
    }
    out
}

fn jobs(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&["JOB", "TYPE", "STATE", "NEXT DUE", "TARGET"]);
    for j in answer.get("jobs")?.as_array()? {
        table.row(vec![
            job_label(j),
            or_dash(text(j, "type")),
            or_dash(text(j, "state")),
            or_dash(next(j, now)),
            ellipsize(&j.get("target").map(target_summary).unwrap_or_default(), 60),
        ]);
    }
    Some(page(table, "jobs", answer, style))
}

fn runs(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&[
        "STARTED", "DUE", "ATTEMPT", "OUTCOME", "STATUS", "LATENCY", "ERROR",
    ]);
    for r in answer.get("runs")?.as_array()? {
        table.row(vec![
            or_dash(when(r, "started_at", now)),
            or_dash(stamp(r, "due_at")),
            or_dash(number(r, "attempt")),
            or_dash(text(r, "outcome").map(|o| {
                let backfill = r.get("backfill").and_then(Value::as_bool) == Some(true);
                if backfill {
                    format!("{o} (backfill)")
                } else {
                    o
                }
            })),
            or_dash(number(r, "status_code")),
            or_dash(number(r, "latency_ms").map(|ms| format!("{ms} ms"))),
            ellipsize(&or_dash(text(r, "error")), 60),
        ]);
    }
    Some(page(table, "runs", answer, style))
}

fn dead_letters(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&[
        "ID",
        "JOB",
        "TYPE",
        "DUE",
        "ATTEMPTS",
        "REASON",
        "DEAD SINCE",
    ]);
    for d in answer.get("dead_letters")?.as_array()? {
        table.row(vec![
            or_dash(number(d, "id")),
            id_tail(&text(d, "job_id").unwrap_or_default()),
            or_dash(text(d, "type")),
            or_dash(stamp(d, "due_at")),
            or_dash(number(d, "attempts")),
            ellipsize(&or_dash(text(d, "reason")), 60),
            or_dash(when(d, "created_at", now)),
        ]);
    }
    Some(page(table, "dead letters", answer, style))
}

fn oldest(q: &Value) -> String {
    q.get("oldest_available_age_ms")
        .and_then(Value::as_u64)
        .map(|ms| span(ms / 1000))
        .unwrap_or_else(|| "-".into())
}

fn queue(q: &Value, style: Style) -> Option<String> {
    q.get("name")?;
    Some(key_values(
        &[
            ("name", text(q, "name")),
            ("available", number(q, "available")),
            ("in flight", number(q, "in_flight")),
            ("scheduled", number(q, "scheduled")),
            ("oldest waiting", Some(oldest(q))),
        ],
        style,
    ))
}

fn queues(answer: &Value, style: Style) -> Option<String> {
    let mut table = Table::new(&[
        "QUEUE",
        "AVAILABLE",
        "IN FLIGHT",
        "SCHEDULED",
        "OLDEST WAITING",
    ]);
    for q in answer.get("queues")?.as_array()? {
        table.row(vec![
            or_dash(text(q, "name")),
            or_dash(number(q, "available")),
            or_dash(number(q, "in_flight")),
            or_dash(number(q, "scheduled")),
            oldest(q),
        ]);
    }
    Some(page(table, "queues", answer, style))
}

fn messages(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&[
        "RECEIPT",
        "JOB",
        "TYPE",
        "ATTEMPT",
        "DUE",
        "VISIBLE UNTIL",
        "PAYLOAD",
    ]);
    for m in answer.get("messages")?.as_array()? {
        let attempt = match (number(m, "attempt"), number(m, "max_attempts")) {
            (Some(a), Some(max)) => format!("{a} of {max}"),
            (a, _) => or_dash(a),
        };
        table.row(vec![
            or_dash(text(m, "receipt")),
            id_tail(&text(m, "job_id").unwrap_or_default()),
            or_dash(text(m, "type")),
            attempt,
            or_dash(stamp(m, "due_at")),
            or_dash(when(m, "visible_until", now)),
            ellipsize(
                &m.get("payload").map(Value::to_string).unwrap_or_default(),
                40,
            ),
        ]);
    }
    Some(page(table, "messages", answer, style))
}

fn receipts(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let succeeded = answer.get("succeeded")?.as_array()?.len();
    let failed = answer.get("failed")?.as_array()?;
    let mut out = format!("{succeeded} succeeded, {} failed\n", failed.len());
    if let Some(until) = when(answer, "visible_until", now) {
        out.push_str(&format!("visible until {until}\n"));
    }
    if !failed.is_empty() {
        let mut table = Table::new(&["RECEIPT", "CODE", "MESSAGE"]);
        for f in failed {
            table.row(vec![
                or_dash(text(f, "receipt")),
                or_dash(text(f, "code")),
                or_dash(text(f, "message")),
            ]);
        }
        out.push_str(&table.render(style));
    }
    Some(out)
}

fn breakers(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&["DESTINATION", "OPEN SINCE"]);
    for b in answer.get("breakers")?.as_array()? {
        table.row(vec![
            or_dash(text(b, "destination")),
            or_dash(when(b, "open_since", now)),
        ]);
    }
    Some(page(table, "open breakers on this node", answer, style))
}

fn connections(answer: &Value, style: Style) -> Option<String> {
    let mut table = Table::new(&["CONNECTION", "KIND", "DELIVERED", "RETRIED", "REJECTED"]);
    for c in answer.get("connections")?.as_array()? {
        let published = c.get("published").unwrap_or(&Value::Null);
        table.row(vec![
            or_dash(text(c, "name")),
            or_dash(text(c, "kind")),
            or_dash(number(published, "delivered")),
            or_dash(number(published, "retry")),
            or_dash(number(published, "rejected")),
        ]);
    }
    Some(page(table, "connections", answer, style))
}

fn nodes(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&["NODE", "VERSION", "STARTED", "LAST HEARTBEAT", "CLAIMS"]);
    for n in answer.get("nodes")?.as_array()? {
        table.row(vec![
            or_dash(text(n, "id")),
            or_dash(text(n, "version")),
            or_dash(stamp(n, "started_at")),
            or_dash(when(n, "last_heartbeat", now)),
            or_dash(number(n, "claims_held")),
        ]);
    }
    Some(page(table, "live nodes", answer, style))
}

fn audit(answer: &Value, style: Style, now: Timestamp) -> Option<String> {
    let mut table = Table::new(&["WHEN", "KEY", "ACTION", "JOBS", "DETAIL"]);
    for e in answer.get("entries")?.as_array()? {
        let jobs: Vec<String> = e
            .get("jobs")
            .and_then(Value::as_array)
            .map(|ids| ids.iter().filter_map(Value::as_str).map(id_tail).collect())
            .unwrap_or_default();
        let count = e.get("job_count").and_then(Value::as_u64).unwrap_or(0);
        let jobs = match (jobs.len(), count) {
            (0, _) => "-".to_owned(),
            (1, 1) => jobs[0].clone(),
            _ => format!("{count} ({}, ...)", jobs[0]),
        };
        let fields: Vec<&str> = e
            .get("fields")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let detail = match text(e, "dead_letter_id") {
            Some(id) => format!("dead letter {id}"),
            None if !fields.is_empty() => fields.join(", "),
            None => "-".to_owned(),
        };
        table.row(vec![
            or_dash(when(e, "at", now)),
            or_dash(text(e, "key_id")),
            or_dash(text(e, "action")),
            jobs,
            detail,
        ]);
    }
    Some(page(table, "audit entries", answer, style))
}

fn secret(s: &Value, style: Style, now: Timestamp) -> Option<String> {
    s.get("signing_secret")?;
    Some(key_values(
        &[
            ("namespace", text(s, "namespace")),
            ("signing secret", text(s, "signing_secret")),
            ("previous valid until", when(s, "previous_valid_until", now)),
            ("note", text(s, "note")),
        ],
        style,
    ))
}

/// The key's facts, then the routes it may call, one a line (`GET     /v1/jobs`).
fn identity(answer: &Value, style: Style) -> Option<String> {
    let role = text(answer, "role")?;
    let scope = match answer.get("all_namespaces")?.as_bool()? {
        true => "every namespace (hourglass-namespace header)",
        false => "this namespace only",
    };
    let development = match answer.get("development").and_then(Value::as_bool) {
        Some(true) => Some("yes: the node has no API keys, every caller is an admin".to_string()),
        _ => None,
    };
    let mut shown = key_values(
        &[
            ("namespace", text(answer, "namespace")),
            ("key id", text(answer, "key_id")),
            ("role", Some(role)),
            ("scope", Some(scope.to_string())),
            ("development", development),
        ],
        style,
    );
    let mut table = Table::new(&["METHOD", "ROUTE"]);
    for r in answer.get("routes")?.as_array()? {
        table.row(vec![or_dash(text(r, "method")), or_dash(text(r, "path"))]);
    }
    shown.push('\n');
    shown.push_str(&table.render(style));
    Some(shown)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A table line's cells: the text between runs of two or more spaces.
    fn cells(line: &str) -> Vec<&str> {
        line.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    }

    fn now() -> Timestamp {
        "2026-11-24T08:00:00Z".parse().unwrap()
    }

    fn a_job() -> Value {
        json!({
            "id": "01a20c9b-fb01-7736-a59e-0a3ac367d4f9",
            "namespace": "default",
            "key": null,
            "type": "reminder.flight",
            "state": "active",
            "schedule": {"cron": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin", "max_runs": 3},
            "target": {"webhook": {"url": "https://example.com/h", "headers": {"authorization": "<redacted>"}, "rate_limit": 5, "batch": {"max_items": 100}}},
            "payload": {"a": 1},
            "retry": {"max_attempts": 5, "initial_backoff": "2s", "max_backoff": "10m"},
            "misfire": {"policy": "all", "window": "6h"},
            "next_due_at": "2026-11-24T08:30:00.000Z",
            "next_attempt_at": null,
            "attempt": 0,
            "last_error": null,
            "runs": 2,
            "skipped": 0,
            "created_at": "2026-11-23T08:00:00.000Z",
            "updated_at": "2026-11-24T07:59:00.000Z",
        })
    }

    #[test]
    fn a_job_list_shows_key_or_id_tail_type_state_next_due_and_target() {
        let mut keyed = a_job();
        keyed["key"] = json!("nightly-export");
        keyed["target"] = json!({"queue": "emails"});
        keyed["next_attempt_at"] = json!("2026-11-24T08:00:30.000Z");
        let answer = json!({"jobs": [a_job(), keyed], "next_cursor": "abc"});
        let out = render(View::Jobs, &answer, Style::default(), now());
        let rows: Vec<Vec<&str>> = out.lines().map(cells).collect();
        assert_eq!(rows[0], ["JOB", "TYPE", "STATE", "NEXT DUE", "TARGET"]);
        assert_eq!(
            rows[1],
            [
                "…0a3ac367d4f9",
                "reminder.flight",
                "active",
                "2026-11-24 08:30:00Z (in 30m)",
                "https://example.com/h"
            ]
        );
        assert_eq!(
            rows[2],
            [
                "nightly-export",
                "reminder.flight",
                "active",
                "retry 2026-11-24 08:00:30Z (in 30s)",
                "queue emails"
            ]
        );
        // The columns line up.
        let lines: Vec<&str> = out.lines().collect();
        let at = |line: &str, cell: &str| line[..line.find(cell).unwrap()].chars().count();
        assert_eq!(at(lines[0], "TARGET"), at(lines[1], "https://"));
        assert_eq!(at(lines[1], "reminder"), at(lines[2], "reminder"));
        assert_eq!(out.lines().nth(3), Some("more: --cursor abc"));
    }

    #[test]
    fn whoami_shows_the_role_the_scope_and_one_route_a_line() {
        let answer = json!({
            "all_namespaces": false,
            "development": false,
            "namespace": "acme",
            "role": "worker",
            "routes": [
                {"method": "GET", "path": "/v1/queues"},
                {"method": "POST", "path": "/v1/queues/{name}/lease"},
            ],
        });
        let out = render(View::Identity, &answer, Style::default(), now());
        let rows: Vec<Vec<&str>> = out.lines().map(cells).collect();
        assert!(rows.contains(&vec!["namespace", "acme"]), "{out}");
        assert!(rows.contains(&vec!["role", "worker"]), "{out}");
        assert!(
            rows.contains(&vec!["scope", "this namespace only"]),
            "{out}"
        );
        assert!(!out.contains("development"), "{out}");
        let at = rows.iter().position(|r| r == &["METHOD", "ROUTE"]).unwrap();
        assert_eq!(rows[at + 1], ["GET", "/v1/queues"]);
        assert_eq!(rows[at + 2], ["POST", "/v1/queues/{name}/lease"]);
    }

    #[test]
    fn an_empty_list_says_so() {
        let out = render(
            View::Jobs,
            &json!({"jobs": [], "next_cursor": null}),
            Style::default(),
            now(),
        );
        assert_eq!(out, "no jobs\n");
    }

    #[test]
    fn one_job_is_a_key_value_view() {
        let out = render(View::Job, &a_job(), Style::default(), now());
        for line in [
            "id         01a20c9b-fb01-7736-a59e-0a3ac367d4f9",
            "state      active",
            "schedule   cron 0 30 9 * * MON-FRI (Europe/Berlin), at most 3 runs",
            "target     https://example.com/h (headers authorization; at most 5/s; batches of up to 100)",
            "payload    {\"a\":1}",
            "next due   2026-11-24 08:30:00Z (in 30m)",
            "retry      up to 5 attempts, backoff 2s to 10m",
            "misfire    all (window 6h)",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} in\n{out}");
        }
        assert!(!out.contains("next attempt"), "{out}");
        assert!(!out.contains("key "), "{out}");
        assert!(!out.contains("last error"), "{out}");
    }

    #[test]
    fn a_retrying_job_says_when_and_why() {
        let mut retrying = a_job();
        retrying["attempt"] = json!(2);
        retrying["next_attempt_at"] = json!("2026-11-24T08:00:30.000Z");
        retrying["last_error"] = json!("http 503");
        let out = render(View::Job, &retrying, Style::default(), now());
        let line = |key: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("{key} ")))
                .map(|l| l[key.len()..].trim())
                .unwrap_or_else(|| panic!("no {key} in\n{out}"))
        };
        assert_eq!(line("failed attempts"), "2");
        assert_eq!(line("next attempt"), "2026-11-24 08:00:30Z (in 30s)");
        assert_eq!(line("last error"), "http 503");
    }

    #[test]
    fn bus_targets_name_destination_and_connection() {
        assert_eq!(
            target_summary(&json!({"sqs": {"connection": "aws", "queue_url": "https://q/1"}})),
            "sqs https://q/1 (via aws)"
        );
        assert_eq!(target_summary(&json!({"queue": "emails"})), "queue emails");
    }

    #[test]
    fn an_unknown_shape_falls_back_to_json() {
        let out = render(View::Jobs, &json!({"other": 1}), Style::default(), now());
        assert_eq!(out, "{\n  \"other\": 1\n}\n");
    }
}
