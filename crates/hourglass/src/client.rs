//! The client half of the binary: thin commands over the HTTP API that print its answers, as
//! JSON or as tables (`--output`).

use std::io::IsTerminal;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::table::Style;
use crate::usage;
use crate::views::{self, View};

/// How to reach a node: flags or environment variables, over a profile of the client config file
/// (`--profile`), over the defaults.
#[derive(Args, Clone)]
pub struct Connection {
    /// Base URL of the node [default: the profile's, else http://127.0.0.1:7070].
    #[arg(long, env = "HOURGLASS_URL", global = true)]
    url: Option<String>,
    /// API key, sent as a Bearer token [default: the profile's].
    #[arg(long, env = "HOURGLASS_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Namespace to act in, for admin keys and development mode [default: the profile's, else
    /// the key's own].
    #[arg(long, env = "HOURGLASS_NAMESPACE", global = true)]
    namespace: Option<String>,
    /// Take the URL, API key and namespace from this profile of the client config file
    /// (~/.config/hourglass/client.toml, or HOURGLASS_CLIENT_CONFIG); flags and environment
    /// variables override its values.
    #[arg(long, env = "HOURGLASS_PROFILE", global = true)]
    profile: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("namespace", &self.namespace)
            .field("profile", &self.profile)
            .finish()
    }
}

const DEFAULT_URL: &str = "http://127.0.0.1:7070";

/// A node to talk to, as the flags, the environment and the profile settled it.
pub struct Endpoint {
    url: String,
    api_key: Option<String>,
    namespace: Option<String>,
}

impl Connection {
    /// Each of URL, key and namespace from its flag or environment variable, else from the
    /// profile (when one is named), else the default. A profile that cannot be read or is not
    /// in the file fails with a [`crate::profile::Usage`] error.
    pub fn resolve(&self) -> anyhow::Result<Endpoint> {
        let profile = match &self.profile {
            Some(name) => crate::profile::load(name)?,
            None => crate::profile::Profile::default(),
        };
        Ok(Endpoint {
            url: self
                .url
                .clone()
                .or(profile.url)
                .unwrap_or_else(|| DEFAULT_URL.to_string()),
            api_key: self.api_key.clone().or(profile.api_key),
            namespace: self.namespace.clone().or(profile.namespace),
        })
    }
}

/// How answers are printed: `--output`, else a table on a terminal and JSON elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // The API's JSON answer, pretty-printed (the default when stdout is not a terminal).
    Json,
    // A table or a key/value view for people (the default on a terminal).
    Table,
}

#[derive(Clone, Copy, Debug)]
pub struct Output {
    format: Format,
    /// `--output` or `HOURGLASS_OUTPUT` chose the format (not the terminal test).
    explicit: bool,
    style: Style,
}

impl Output {
    pub fn new(chosen: Option<Format>) -> Self {
        let terminal = std::io::stdout().is_terminal();
        Self {
            format: chosen.unwrap_or(if terminal {
                Format::Table
            } else {
                Format::Json
            }),
            explicit: chosen.is_some(),
            style: Style::detect(),
        }
    }

    /// Prints an answer's body: as it came, pretty (JSON), or in its view (table).
    fn body(&self, view: View, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.format {
            Format::Json => outln!("{}", pretty(text.to_string())),
            Format::Table => match serde_json::from_str::<Value>(text) {
                Ok(value) => self.table(view, &value),
                Err(_) => outln!("{text}"),
            },
        }
    }

    /// Prints a typed answer: serialized as it is (JSON), or in its view (table).
    fn value(&self, view: View, value: &impl serde::Serialize) -> anyhow::Result<()> {
        match self.format {
            Format::Json => print_json(value),
            Format::Table => {
                self.table(view, &serde_json::to_value(value)?);
                Ok(())
            }
        }
    }

    fn table(&self, view: View, value: &Value) {
        out!(
            "{}",
            views::render(view, value, self.style, jiff::Timestamp::now())
        );
    }
}

#[derive(Args, Debug)]
pub struct JobArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: JobCommand,
}

#[derive(Subcommand, Debug)]
enum JobCommand {
    /// Create a job from flags, or from a full JSON body with --json.
    #[command(after_help = CREATE_EXAMPLES)]
    Create(Box<CreateArgs>),
    /// Change a job: each field given replaces the job's, the others stay.
    #[command(after_help = UPDATE_EXAMPLES)]
    Update(Box<UpdateArgs>),
    /// Show one job: its schedule, target, state, next due time and retry state.
    Get {
        /// The job's id, or the key it was created with.
        id: String,
    },
    /// List the namespace's jobs, oldest first, a page at a time.
    #[command(after_help = LIST_EXAMPLES)]
    List {
        /// Only jobs in this state: active, paused, completed, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        /// Only jobs of this type.
        #[arg(long = "type")]
        job_type: Option<String>,
        /// Jobs per page (1 to 1000) [default: the node's, 100].
        #[arg(long)]
        limit: Option<usize>,
        /// The previous page's `next_cursor`, for the page after it.
        #[arg(long)]
        cursor: Option<String>,
        /// Include each job's payload (left out of listings by default).
        #[arg(long)]
        payload: bool,
    },
    /// Cancel a job: no occurrence that is not yet sent fires.
    Cancel {
        /// The job's id, or the key it was created with.
        id: String,
    },
    /// Pause a job: its occurrences wait until it is resumed.
    Pause {
        /// The job's id, or the key it was created with.
        id: String,
    },
    /// Resume a paused job; a recurring one continues from now.
    Resume {
        /// The job's id, or the key it was created with.
        id: String,
    },
    /// Fire an extra occurrence now.
    Trigger {
        /// The job's id, or the key it was created with.
        id: String,
    },
    /// Delivery attempts of a job, newest first, a page at a time.
    Runs {
        /// The job's id, or the key it was created with.
        id: String,
        /// Runs per page (1 to 1000) [default: the node's, 100].
        #[arg(long)]
        limit: Option<usize>,
        /// The previous page's `next_cursor`.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Print the next due times of a cron expression or an interval, and describe it in words.
    ///
    /// Creates nothing: it asks the node, which validates the schedule as a create would.
    #[command(after_help = NEXT_FIRES_EXAMPLES)]
    NextFires(NextFiresArgs),
}

const CREATE_EXAMPLES: &str = "\
Examples:
  hourglass job create --webhook https://example.com/hook --after 10m --payload '{\"id\": 7}'
  hourglass job create --webhook https://example.com/export --cron \"0 0 2 * * *\" \\
      --timezone Europe/Paris --key nightly-export --header authorization='Bearer s3cret'
  hourglass job create --queue emails --every 15m --max-runs 10 --payload @mail.json \\
      --max-attempts 5 --initial-backoff 30s --misfire skip
  hourglass job create --json '{\"schedule\": {\"after\": \"5s\"}, \"target\": {\"queue\": \"q\"}}'";

const UPDATE_EXAMPLES: &str = "\
Each flag replaces a whole field of the job, as PATCH /v1/jobs/{id} does: a new --webhook
takes its --header, --rate-limit and --batch again, and a retry flag replaces the whole retry
policy (the others back to their defaults). The key cannot change. --payload null clears the
payload.

Examples:
  hourglass job update nightly-export --cron \"0 30 2 * * *\" --timezone Europe/Paris
  hourglass job update 01a20c9b-fb01-7736-a59e-0a3ac367d4f9 --payload '{\"id\": 8}' --type report.v2
  hourglass job update nightly-export --webhook https://example.com/v2 --header x-team=billing
  hourglass job update nightly-export --max-attempts 10 --initial-backoff 1m --misfire skip
  hourglass job update nightly-export --json '{\"payload\": null}'";

const LIST_EXAMPLES: &str = "\
Examples:
  hourglass job list --state active --type reminder.flight
  hourglass job list --limit 50 --cursor 01a20c9b-fb01-7736-a59e-0a3ac367d4f9
  hourglass job list --output json | jq -r '.jobs[].id'";

const NEXT_FIRES_EXAMPLES: &str = "\
Examples:
  hourglass job next-fires \"0 30 9 * * MON-FRI\" --timezone Europe/Berlin -n 5
  hourglass job next-fires --every 15m --start 2027-01-01T00:00:00Z --max-runs 3";

#[derive(Args, Debug)]
struct NextFiresArgs {
    /// Cron expression (5 fields, or 6 with seconds).
    #[arg(required_unless_present = "every", conflicts_with = "every")]
    cron: Option<String>,
    /// IANA time zone for the cron expression (default UTC).
    #[arg(long, requires = "cron")]
    timezone: Option<String>,
    /// A fixed interval such as 15m, instead of a cron expression.
    #[arg(long)]
    every: Option<String>,
    /// No occurrence before this RFC 3339 instant (for --every: the first occurrence).
    #[arg(long)]
    start: Option<String>,
    /// No occurrence after this RFC 3339 instant.
    #[arg(long)]
    end: Option<String>,
    /// Stop after this many runs.
    #[arg(long)]
    max_runs: Option<u64>,
    /// How many due times to print (1 to 100).
    #[arg(short = 'n', long = "count", default_value_t = 10)]
    count: u64,
}

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
struct CreateArgs {
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
struct UpdateArgs {
    /// The job's id, or the key it was created with.
    id: String,
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

#[derive(Args, Debug)]
pub struct QueueArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Subcommand, Debug)]
enum QueueCommand {
    /// Lease messages and print them with their receipts; ack or nack each receipt afterwards.
    Lease {
        /// The queue's name.
        name: String,
        /// At most this many messages (1 to 1000).
        #[arg(long, default_value_t = 1)]
        max: u32,
        /// Long-poll up to this many milliseconds when the queue is empty (at most 20000).
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        /// Keep the messages from other consumers this long (1000 to 43200000).
        #[arg(long, default_value_t = 30_000)]
        visibility_ms: u64,
        /// Only messages of this job type (repeat for several).
        #[arg(long = "type")]
        types: Vec<String>,
    },
    /// Complete leased messages.
    Ack {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
    },
    /// Hand leased messages back for another attempt.
    Nack {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
        /// Retry after this many milliseconds instead of the job's retry backoff.
        #[arg(long)]
        delay_ms: Option<u64>,
    },
    /// Keep leased messages invisible for another --visibility-ms from now.
    Extend {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
        /// How long from now the messages stay leased (1000 to 43200000).
        #[arg(long, default_value_t = 30_000)]
        visibility_ms: u64,
    },
    /// Counts of one queue, or of every queue.
    Stats {
        /// The queue's name [default: every queue of the namespace].
        name: Option<String>,
    },
}

pub const QUEUE_EXAMPLES: &str = "\
Examples:
  hourglass queue stats
  hourglass queue lease emails --max 10 --wait-ms 20000
  hourglass queue ack emails RECEIPT...
  hourglass queue nack emails RECEIPT --delay-ms 60000";

#[derive(Args, Debug)]
pub struct DeadLetterArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: DeadLetterCommand,
}

#[derive(Subcommand, Debug)]
enum DeadLetterCommand {
    /// List the namespace's dead letters: occurrences that used up their attempts.
    List,
    /// Deliver a dead letter again, as a new one-off job due now.
    Replay {
        /// The dead letter's id (a number, from `dead-letters list`).
        id: String,
    },
    /// Delete a dead letter for good.
    Delete {
        /// The dead letter's id (a number, from `dead-letters list`).
        id: String,
    },
}

pub const DEAD_LETTER_EXAMPLES: &str = "\
Examples:
  hourglass dead-letters list
  hourglass dead-letters replay 7
  hourglass dead-letters delete 7";

impl Endpoint {
    /// The typed client from `hourglass-client`, for the commands built on it.
    fn api_client(&self) -> anyhow::Result<hourglass_client::Client> {
        let mut client = hourglass_client::Client::new(&self.url)?;
        if let Some(key) = &self.api_key {
            client = client.api_key(key);
        }
        if let Some(ns) = &self.namespace {
            client = client.namespace(ns);
        }
        Ok(client)
    }
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Sends a request and prints its answer.
async fn call(
    conn: &Endpoint,
    out: Output,
    view: View,
    method: reqwest::Method,
    path: String,
    body: Option<Value>,
) -> anyhow::Result<()> {
    let text = send(conn, method, &path, body).await?;
    out.body(view, &text);
    Ok(())
}

fn pretty(text: String) -> String {
    serde_json::from_str::<Value>(&text)
        .map(|v| serde_json::to_string_pretty(&v).unwrap_or(text.clone()))
        .unwrap_or(text)
}

/// A refusal from the node, as the CLI reports it: one line with the status, the stable code,
/// the message and the field. `main` picks the exit code from the status.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    code: Option<String>,
    message: String,
    field: Option<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http {}", self.status)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(field) = &self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

impl Refused {
    /// From an error answer: the API's `{"error": {...}}` body, or whatever a proxy sent.
    fn from_answer(status: u16, text: &str) -> Self {
        let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let error = &body["error"];
        let text_of = |v: &Value| v.as_str().map(str::to_owned);
        match text_of(&error["code"]) {
            Some(code) => Refused {
                status,
                code: Some(code),
                message: text_of(&error["message"]).unwrap_or_default(),
                field: text_of(&error["field"]),
            },
            None => Refused {
                status,
                code: None,
                message: text.trim().chars().take(200).collect(),
                field: None,
            },
        }
    }
}

/// The node could not be reached at all: the URL, and why.
#[derive(Debug)]
pub struct Unreachable {
    url: String,
    source: reqwest::Error,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach {}", self.url)
    }
}

impl std::error::Error for Unreachable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Sends a request and returns the body of a successful answer; an error answer fails the
/// command with a [`Refused`].
async fn send(
    conn: &Endpoint,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!("{}{}", conn.url.trim_end_matches('/'), path);
    let writes = matches!(
        method,
        reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
    );
    let mut request = client.request(method, &url);
    if let Some(key) = &conn.api_key {
        request = request.bearer_auth(key);
    }
    if let Some(ns) = &conn.namespace {
        request = request.header("hourglass-namespace", ns);
    }
    match body {
        Some(body) => request = request.json(&body),
        // The node wants the JSON type on every write, also without a body (pause, trigger,
        // signing-secret).
        None if writes => request = request.header("content-type", "application/json"),
        None => {}
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(source) => return Err(Unreachable { url, source }.into()),
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() {
        Ok(text)
    } else {
        Err(Refused::from_answer(status.as_u16(), &text).into())
    }
}

pub async fn job(args: JobArgs, out: Output) -> anyhow::Result<()> {
    use reqwest::Method;
    let conn = &args.conn.resolve()?;
    let one = |method: Method, path: String| call(conn, out, View::Job, method, path, None);
    match args.command {
        JobCommand::Create(create) => {
            let body = create_body(*create)?;
            call(
                conn,
                out,
                View::Job,
                Method::POST,
                "/v1/jobs".into(),
                Some(body),
            )
            .await
        }
        JobCommand::Update(update) => {
            let path = format!("/v1/jobs/{}", job_segment(&update.id));
            let body = update_body(*update)?;
            call(conn, out, View::Job, Method::PATCH, path, Some(body)).await
        }
        JobCommand::Get { id } => one(Method::GET, format!("/v1/jobs/{}", job_segment(&id))).await,
        JobCommand::List {
            state,
            job_type,
            limit,
            cursor,
            payload,
        } => {
            let query = query_string([
                ("state", state),
                ("type", job_type),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
                ("payload", payload.then(|| "true".to_owned())),
            ]);
            let path = format!("/v1/jobs{query}");
            call(conn, out, View::Jobs, Method::GET, path, None).await
        }
        JobCommand::Cancel { id } => {
            one(Method::DELETE, format!("/v1/jobs/{}", job_segment(&id))).await
        }
        JobCommand::Pause { id } => {
            one(Method::POST, format!("/v1/jobs/{}/pause", job_segment(&id))).await
        }
        JobCommand::Resume { id } => {
            one(
                Method::POST,
                format!("/v1/jobs/{}/resume", job_segment(&id)),
            )
            .await
        }
        JobCommand::Trigger { id } => {
            one(
                Method::POST,
                format!("/v1/jobs/{}/trigger", job_segment(&id)),
            )
            .await
        }
        JobCommand::Runs { id, limit, cursor } => {
            let query = query_string([("limit", limit.map(|l| l.to_string())), ("cursor", cursor)]);
            let path = format!("/v1/jobs/{}/runs{query}", job_segment(&id));
            call(conn, out, View::Runs, Method::GET, path, None).await
        }
        JobCommand::NextFires(args) => next_fires(conn, out, args).await,
    }
}

/// A job's path segment for an argument that is an id or a key: an id (any form the API parses as
/// a UUID) as it is, `key:<key>` as it is, anything else as the key `key:<arg>`. Percent-encoded
/// as one segment, so a key may hold `/`, `%`, `?` or spaces. A key that looks like an id is
/// named with its `key:` prefix.
fn job_segment(arg: &str) -> String {
    let segment = if arg.starts_with("key:") || hourglass_core::JobId::parse_str(arg).is_ok() {
        arg.to_owned()
    } else {
        format!("key:{arg}")
    };
    let mut url = reqwest::Url::parse("http://segment.invalid/").expect("a valid base url");
    url.path_segments_mut()
        .expect("an http url has path segments")
        .push(&segment);
    url.path()[1..].to_owned()
}

/// `?name=value&...` for the parameters that are set, form-encoded (a job type may hold `&` or
/// spaces), or nothing.
fn query_string<const N: usize>(params: [(&str, Option<String>); N]) -> String {
    let mut url = reqwest::Url::parse("http://query.invalid/").expect("a valid base url");
    for (name, value) in params {
        if let Some(value) = value {
            url.query_pairs_mut().append_pair(name, &value);
        }
    }
    url.query().map_or_else(String::new, |q| format!("?{q}"))
}

/// Prints the description, then one due time per line: the instant in UTC as the API gives it
/// and, for a cron expression, the wall-clock time in its zone beside it, since that is the
/// clock the expression is written for (and where DST shows). That text is the answer on a
/// terminal and in a pipe alike (it always was); only an explicit `--output json` prints the
/// node's JSON instead.
async fn next_fires(conn: &Endpoint, out: Output, args: NextFiresArgs) -> anyhow::Result<()> {
    let mut schedule = match (&args.cron, &args.every) {
        (Some(cron), None) => {
            json!({"cron": cron, "timezone": args.timezone.as_deref().unwrap_or("UTC")})
        }
        (None, Some(every)) => json!({"every": every}),
        _ => return Err(usage("give a cron expression or --every")),
    };
    for (name, value) in [("start", &args.start), ("end", &args.end)] {
        if let Some(v) = value {
            schedule[name] = json!(v);
        }
    }
    if let Some(max_runs) = args.max_runs {
        schedule["max_runs"] = json!(max_runs);
    }
    let body = json!({"schedule": schedule, "count": args.count});
    let text = send(
        conn,
        reqwest::Method::POST,
        "/v1/schedules/preview",
        Some(body),
    )
    .await?;
    if out.explicit && out.format == Format::Json {
        outln!("{}", pretty(text));
        return Ok(());
    }
    let preview: Value = serde_json::from_str(&text).context("the node's answer is not JSON")?;
    // Only a cron with --timezone gets the wall-clock column, read with the tz database bundled
    // in this binary as the node reads it. Should this binary's database lack a zone the node
    // knows, the UTC instants alone are still the answer.
    let zone = match (&args.cron, args.timezone.as_deref()) {
        (Some(_), Some(name)) => hourglass_core::cron::time_zone(name).ok(),
        _ => None,
    };
    outln!("{}", preview["description"].as_str().unwrap_or_default());
    for time in preview["fire_times"].as_array().into_iter().flatten() {
        let time = time.as_str().context("fire time is not a string")?;
        match &zone {
            Some(zone) => {
                let local = time
                    .parse::<jiff::Timestamp>()
                    .context("fire time is not an instant")?
                    .to_zoned(zone.clone())
                    .strftime("%a %Y-%m-%d %H:%M:%S %Z");
                outln!("{time}  {local}");
            }
            None => outln!("{time}"),
        }
    }
    Ok(())
}

fn create_body(c: CreateArgs) -> anyhow::Result<Value> {
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
fn update_body(u: UpdateArgs) -> anyhow::Result<Value> {
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

pub async fn dead_letters(args: DeadLetterArgs, out: Output) -> anyhow::Result<()> {
    use reqwest::Method;
    let conn = &args.conn.resolve()?;
    match args.command {
        DeadLetterCommand::List => {
            let path = "/v1/dead-letters".to_string();
            call(conn, out, View::DeadLetters, Method::GET, path, None).await
        }
        DeadLetterCommand::Replay { id } => {
            // The answer is the new job.
            let path = format!("/v1/dead-letters/{id}/replay");
            call(conn, out, View::Job, Method::POST, path, None).await
        }
        DeadLetterCommand::Delete { id } => {
            send(
                conn,
                Method::DELETE,
                &format!("/v1/dead-letters/{id}"),
                None,
            )
            .await?;
            // The answer is empty: JSON output prints nothing, as it always did.
            if out.format == Format::Table {
                outln!("dead letter {id} deleted");
            }
            Ok(())
        }
    }
}

#[derive(Args, Debug)]
pub struct SigningSecretArgs {
    #[command(flatten)]
    conn: Connection,
    /// Print the current secret without rotating it (for `hourglass listen --secret`).
    #[arg(long)]
    show: bool,
}

/// Rotates the namespace's signing secret and prints the new one, or with `--show` prints the
/// current one.
pub async fn signing_secret(args: SigningSecretArgs, out: Output) -> anyhow::Result<()> {
    let conn = &args.conn.resolve()?;
    let path = "/v1/signing-secret".to_string();
    let method = if args.show {
        reqwest::Method::GET
    } else {
        reqwest::Method::POST
    };
    call(conn, out, View::Secret, method, path, None).await
}

/// The namespace's destinations whose circuit breaker is open on this node.
pub async fn breakers(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/breakers".to_string();
    call(conn, out, View::Breakers, reqwest::Method::GET, path, None).await
}

/// The bus and cloud connections the namespace may use, with this node's publish counts.
pub async fn connections(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/connections".to_string();
    call(
        conn,
        out,
        View::Connections,
        reqwest::Method::GET,
        path,
        None,
    )
    .await
}

/// The cluster's live nodes (an admin key when the node has keys).
pub async fn nodes(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/nodes".to_string();
    call(conn, out, View::Nodes, reqwest::Method::GET, path, None).await
}

pub async fn queue(args: QueueArgs, out: Output) -> anyhow::Result<()> {
    use hourglass_client::{LeaseOptions, Receipt, ReceiptResults};
    use std::time::Duration;

    let client = args.conn.resolve()?.api_client()?;
    let receipts = |r: Vec<String>| r.into_iter().map(Receipt).collect::<Vec<_>>();
    // Prints the per-receipt results; any refused receipt fails the command.
    let results = |r: ReceiptResults| -> anyhow::Result<()> {
        out.value(View::Receipts, &r)?;
        if !r.failed.is_empty() {
            bail!("{} of the receipts failed", r.failed.len());
        }
        Ok(())
    };
    match args.command {
        QueueCommand::Lease {
            name,
            max,
            wait_ms,
            visibility_ms,
            types,
        } => {
            let options = LeaseOptions {
                max,
                wait: Duration::from_millis(wait_ms),
                visibility: Duration::from_millis(visibility_ms),
                types,
            };
            let messages = client.lease(&name, &options).await?;
            out.value(View::Messages, &json!({ "messages": messages }))
        }
        QueueCommand::Ack { name, receipts: r } => results(client.ack(&name, &receipts(r)).await?),
        QueueCommand::Nack {
            name,
            receipts: r,
            delay_ms,
        } => results(
            client
                .nack(&name, &receipts(r), delay_ms.map(Duration::from_millis))
                .await?,
        ),
        QueueCommand::Extend {
            name,
            receipts: r,
            visibility_ms,
        } => results(
            client
                .extend(&name, &receipts(r), Duration::from_millis(visibility_ms))
                .await?,
        ),
        QueueCommand::Stats { name: Some(name) } => {
            out.value(View::Queue, &client.queue_stats(&name).await?)
        }
        QueueCommand::Stats { name: None } => out.value(
            View::Queues,
            &json!({ "queues": client.list_queues().await? }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::{CreateArgs, create_body, job_segment, query_string};

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

    #[test]
    fn a_job_argument_that_is_not_an_id_is_sent_as_its_key() {
        let id = "0190f9b4-2f1c-7c3a-8d4e-1b2c3d4e5f60";
        assert_eq!(job_segment(id), id);
        assert_eq!(job_segment("nightly-export"), "key:nightly-export");
        assert_eq!(job_segment("a/b c%"), "key:a%2Fb%20c%25");
        assert_eq!(job_segment("key:0190f9b4"), "key:0190f9b4");
        assert_eq!(job_segment(&format!("key:{id}")), format!("key:{id}"));
    }

    #[test]
    fn query_strings_hold_only_the_set_parameters_form_encoded() {
        assert_eq!(query_string([("limit", None), ("cursor", None)]), "");
        assert_eq!(
            query_string([("limit", Some("2".into())), ("cursor", Some("17.3".into()))]),
            "?limit=2&cursor=17.3"
        );
        assert_eq!(
            query_string([("state", None), ("type", Some("a&b c".into()))]),
            "?type=a%26b+c"
        );
    }
}
