//! `hourglass job`: create, update, get, list, cancel, pause, resume, trigger, backfill, runs and
//! next-fires, each one call of the typed client (a job named by its id or its key).

use anyhow::Context;
use clap::{Args, Subcommand};
use hourglass_client::JobRef;
use hourglass_client::api::JobListQuery;

use super::job_fields::{CreateArgs, ScheduleFlags, UpdateArgs, create_body, update_body};
use super::output::{Format, Output};
use super::{Connection, failed};
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
        /// Only jobs with this label: KEY=VALUE, or KEY for any value; repeat for more (all
        /// must match, at most 8).
        #[arg(long = "label", value_name = "SELECTOR")]
        labels: Vec<String>,
        /// Only jobs whose schedule refers to this anchor.
        #[arg(long)]
        anchor: Option<String>,
    },
    /// Pause, resume, cancel or trigger every live job that the label selectors pick.
    #[command(after_help = BULK_EXAMPLES)]
    Bulk(BulkArgs),
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
    /// Run each of a recurring job's occurrences in a past range [--from, --to) once, paced,
    /// before its own; a range backfilled before runs nothing again.
    #[command(after_help = BACKFILL_EXAMPLES)]
    Backfill {
        /// The job's id, or the key it was created with.
        id: String,
        /// The range's first nominal time (RFC 3339).
        #[arg(long)]
        from: String,
        /// The range's end, not in it (RFC 3339): not in the future, nor after the job's
        /// next due time.
        #[arg(long)]
        to: String,
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

const BACKFILL_EXAMPLES: &str = "\
At most 1000 occurrences a request, fired at most 10 a second. Examples:
  hourglass job backfill nightly-export --from 2026-03-01T00:00:00Z --to 2026-03-08T00:00:00Z
  hourglass job runs nightly-export";

const LIST_EXAMPLES: &str = "\
Examples:
  hourglass job list --state active --type reminder.flight
  hourglass job list --limit 50 --cursor 01a20c9b-fb01-7736-a59e-0a3ac367d4f9
  hourglass job list --output json | jq -r '.jobs[].id'";

const NEXT_FIRES_EXAMPLES: &str = "\
Examples:
  hourglass job next-fires \"0 30 9 * * MON-FRI\" --timezone Europe/Berlin -n 5
  hourglass job next-fires --every 15m --start 2027-01-01T00:00:00Z --max-runs 3
  hourglass job next-fires \"0 0 9 25 * *\" --timezone Europe/Berlin --calendar de-business --roll previous";

const BULK_EXAMPLES: &str = "\
One request changes at most 1000 jobs, in id order; --all repeats it from where the previous one
stopped until no selected job is left. pause changes active jobs, resume paused ones, cancel and
trigger active and paused ones. Examples:
  hourglass job bulk pause --label tenant=acme
  hourglass job bulk trigger --label tenant=acme --label kind=reminder --all
  hourglass job bulk cancel --label campaign --type reminder.email";

#[derive(Args, Debug)]
struct BulkArgs {
    /// What to do to each selected job.
    #[arg(value_enum)]
    action: BulkVerb,
    /// A label selector: KEY=VALUE, or KEY for any value; repeat for more (all must match,
    /// at most 8). At least one.
    #[arg(long = "label", value_name = "SELECTOR", required = true)]
    labels: Vec<String>,
    /// Only jobs of this type.
    #[arg(long = "type")]
    job_type: Option<String>,
    /// The previous answer's cursor, to go on from where it stopped.
    #[arg(long, conflicts_with = "all")]
    cursor: Option<String>,
    /// Repeat the request from where each one stopped until no selected job is left.
    #[arg(long)]
    all: bool,
}

/// `job bulk`'s actions.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum BulkVerb {
    Pause,
    Resume,
    Cancel,
    Trigger,
}

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
    /// Fire each occurrence up to this long after its due time, e.g. 10s: prints when each
    /// fires beside its due time.
    #[arg(long)]
    jitter: Option<String>,
    /// With --jitter: the job whose offsets to print (they depend on its id).
    #[arg(long, value_name = "ID", requires = "jitter")]
    job: Option<String>,
    /// A calendar of the namespace whose excluded days the occurrences avoid: prints when each
    /// fires beside its due time where a roll moved it.
    #[arg(long)]
    calendar: Option<String>,
    /// With --calendar: skip (default), previous or next — what an occurrence on an excluded
    /// day does.
    #[arg(long, requires = "calendar")]
    roll: Option<String>,
    /// How many due times to print (1 to 100).
    #[arg(short = 'n', long = "count", default_value_t = 10)]
    count: u64,
}

pub async fn job(args: JobArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    let answer = match args.command {
        JobCommand::Create(create) => client.create_job(create_body(*create)?).await,
        JobCommand::Update(update) => {
            let job = job_ref(&update.id);
            client.update_job(job, &update_body(*update)?).await
        }
        JobCommand::Get { id } => client.get_job(job_ref(&id)).await,
        JobCommand::List {
            state,
            job_type,
            limit,
            cursor,
            payload,
            labels,
            anchor,
        } => {
            // The state goes as it was given: the node judges it, as for any client.
            let query = JobListQuery {
                state,
                job_type,
                limit,
                cursor,
                payload: payload.then_some(true),
                label: labels,
                anchor,
                ..JobListQuery::default()
            };
            let page = client.list_jobs(query).await.map_err(failed)?;
            return out.answer(View::Jobs, &page);
        }
        JobCommand::Cancel { id } => client.cancel_job(job_ref(&id)).await,
        JobCommand::Pause { id } => client.pause_job(job_ref(&id)).await,
        JobCommand::Resume { id } => client.resume_job(job_ref(&id)).await,
        JobCommand::Trigger { id } => client.trigger_job(job_ref(&id), None).await,
        JobCommand::Backfill { id, from, to } => {
            let instant = |flag: &str, text: &str| {
                text.parse::<jiff::Timestamp>().map_err(|e| {
                    usage(format!("--{flag} {text:?} is not an RFC 3339 instant: {e}"))
                })
            };
            let (from, to) = (instant("from", &from)?, instant("to", &to)?);
            let accepted = client
                .backfill_job(job_ref(&id), from, to)
                .await
                .map_err(failed)?;
            return out.answer(View::Backfill, &accepted);
        }
        JobCommand::Runs { id, limit, cursor } => {
            let runs = client
                .job_runs(job_ref(&id), limit, cursor.as_deref())
                .await
                .map_err(failed)?;
            return out.answer(View::Runs, &runs);
        }
        JobCommand::NextFires(args) => return next_fires(&client, out, args).await,
        JobCommand::Bulk(args) => return bulk(&client, out, args).await,
    };
    out.answer(View::Job, &answer.map_err(failed)?)
}

/// `job bulk`: one request, or with `--all` one after another from each answer's cursor, the
/// changed jobs summed.
async fn bulk(
    client: &hourglass_client::Client,
    out: Output,
    args: BulkArgs,
) -> anyhow::Result<()> {
    use hourglass_client::BulkAction;
    let action = match args.action {
        BulkVerb::Pause => BulkAction::Pause,
        BulkVerb::Resume => BulkAction::Resume,
        BulkVerb::Cancel => BulkAction::Cancel,
        BulkVerb::Trigger => BulkAction::Trigger,
    };
    let mut cursor = args.cursor;
    let mut changed = 0;
    loop {
        let mut answer = client
            .bulk_jobs(
                action,
                &args.labels,
                args.job_type.as_deref(),
                cursor.as_deref(),
            )
            .await
            .map_err(failed)?;
        changed += answer.changed;
        match answer.next_cursor.take() {
            Some(next) if args.all => cursor = Some(next),
            next => {
                answer.changed = changed;
                answer.next_cursor = next;
                return out.answer(View::Bulk, &answer);
            }
        }
    }
}

/// How an argument that is an id or a key names a job: an id (any form the API parses as a
/// UUID) as that id, `key:<key>` as the key after the prefix, anything else as the key itself.
/// A key that looks like an id is named with its `key:` prefix.
fn job_ref(arg: &str) -> JobRef {
    if let Some(key) = arg.strip_prefix("key:") {
        return JobRef::key(key);
    }
    match hourglass_core::JobId::parse_str(arg) {
        Ok(id) => JobRef::Id(id),
        Err(_) => JobRef::key(arg),
    }
}

/// Prints the description, then one due time per line (with `--jitter`, the fire time then the
/// due time): the instant in UTC as the API gives it
/// and, for a cron expression, the wall-clock time in its zone beside it, since that is the
/// clock the expression is written for (and where DST shows). That text is the answer on a
/// terminal and in a pipe alike (it always was); only an explicit `--output json` prints the
/// node's JSON instead.
async fn next_fires(
    client: &hourglass_client::Client,
    out: Output,
    args: NextFiresArgs,
) -> anyhow::Result<()> {
    if args.cron.is_none() && args.every.is_none() {
        return Err(usage("give a cron expression or --every"));
    }
    let schedule = ScheduleFlags {
        at: None,
        after: None,
        cron: args.cron.clone(),
        timezone: args.timezone.clone(),
        every: args.every.clone(),
        start: args.start,
        end: args.end,
        max_runs: args.max_runs,
        jitter: args.jitter.clone(),
        calendar: args.calendar.clone(),
        roll: args.roll.clone(),
        anchor: None,
        offset: None,
    }
    .into_schedule()?
    .expect("a cron expression or an interval was given");
    let preview = client
        .preview_schedule_of(schedule, Some(args.count), args.job.as_deref())
        .await
        .map_err(failed)?;
    if out.explicit && out.format == Format::Json {
        return out.json(&preview);
    }
    // Only a cron with --timezone gets the wall-clock column, read with the tz database bundled
    // in this binary as the node reads it. Should this binary's database lack a zone the node
    // knows, the UTC instants alone are still the answer.
    let zone = match (&args.cron, args.timezone.as_deref()) {
        (Some(_), Some(name)) => hourglass_core::cron::time_zone(name).ok(),
        _ => None,
    };
    outln!("{}", preview.description);
    // With jitter or a roll, each line is when the occurrence fires, then its due time (its
    // name).
    let nominal = preview.nominal_times.as_deref().unwrap_or_default();
    for (n, time) in preview.fire_times.iter().enumerate() {
        let due = nominal
            .get(n)
            .filter(|due| *due != time)
            .map(|due| format!("  (due {due})"))
            .unwrap_or_default();
        match &zone {
            Some(zone) => {
                let local = time
                    .parse::<jiff::Timestamp>()
                    .context("fire time is not an instant")?
                    .to_zoned(zone.clone())
                    .strftime("%a %Y-%m-%d %H:%M:%S %Z");
                outln!("{time}  {local}{due}");
            }
            None => outln!("{time}{due}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use hourglass_client::JobRef;

    use super::job_ref;

    #[test]
    fn a_job_argument_that_is_not_an_id_is_sent_as_its_key() {
        let id = "0190f9b4-2f1c-7c3a-8d4e-1b2c3d4e5f60";
        assert_eq!(job_ref(id), JobRef::Id(id.parse().unwrap()));
        assert_eq!(job_ref("nightly-export"), JobRef::key("nightly-export"));
        assert_eq!(job_ref("a/b c%"), JobRef::key("a/b c%"));
        assert_eq!(job_ref("key:0190f9b4"), JobRef::key("0190f9b4"));
        assert_eq!(job_ref(&format!("key:{id}")), JobRef::key(id));
    }
}
