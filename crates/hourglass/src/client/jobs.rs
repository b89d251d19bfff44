//! `hourglass job`: create, update, get, list, cancel, pause, resume, trigger, runs and
//! next-fires, each one request to the node (a job named by its id or its key).

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::job_fields::{CreateArgs, UpdateArgs, create_body, update_body};
use super::output::{Format, Output, pretty};
use super::{Connection, Endpoint, call, send};
use crate::usage;
use crate::views::View;

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

#[cfg(test)]
mod tests {
    use super::{job_segment, query_string};

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
