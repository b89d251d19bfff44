//! The `hourglass` binary: `hourglass serve` runs a node; the other subcommands are its client.

/// mimalloc instead of glibc malloc: delivery and request handling allocate many small,
/// short-lived buffers, and glibc's free-list work showed up as a fifth of server CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `print!` through [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*)) };
}

/// `println!` through [`write_stdout`].
macro_rules! outln {
    () => { $crate::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

mod backup;
mod client;
mod config;
mod kms;
mod lambda;
mod listen;
mod profile;
mod table;
mod views;

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "hourglass",
    // `hourglass --version` / `-V`: the release and the commit it was built from (build.rs).
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HOURGLASS_GIT_COMMIT"), ")"),
    about = "Durable job scheduler: fires every occurrence on time, at least once",
    after_help = MAIN_HELP,
)]
struct Cli {
    /// How the client commands print answers: a table, or the API's JSON [default: table when
    /// stdout is a terminal, else json].
    #[arg(long, global = true, env = "HOURGLASS_OUTPUT", value_enum)]
    output: Option<client::Format>,
    #[command(subcommand)]
    command: Command,
}

const MAIN_HELP: &str = "\
Examples:
  hourglass serve                                  a node on http://127.0.0.1:7070
  hourglass listen                                 print the webhooks it delivers to 127.0.0.1:9000
  hourglass job create --webhook http://127.0.0.1:9000/hook --after 5s --payload '{\"n\": 1}'
  hourglass job list --state active
  hourglass job get nightly-export --profile prod --output json

The client commands (job, dead-letters, queue, audit, breakers, connections, nodes,
signing-secret) take --url, --api-key and --namespace (HOURGLASS_URL, HOURGLASS_API_KEY,
HOURGLASS_NAMESPACE), or a --profile of ~/.config/hourglass/client.toml (HOURGLASS_PROFILE,
HOURGLASS_CLIENT_CONFIG).

Exit codes: 0 success, 1 other failure, 2 usage (a bad flag or profile), 3 refused by the node
(4xx), 4 not found, 5 node unreachable or unavailable (5xx).";

#[derive(Subcommand)]
enum Command {
    /// Run a node: on the embedded store, or on a PostgreSQL shared by several nodes (--store).
    Serve(config::ServeArgs),
    /// Fire what is due in one window and stop: what the serverless tick function runs.
    ///
    /// With nothing due before the window ends it returns at once. Otherwise it runs the engine
    /// (no API) until nothing more is due in the window or the window ends, then hands back
    /// the claims it did not fire. Takes serve's settings (--store, --config, ...).
    Tick(TickArgs),
    /// Create, inspect and control jobs on a running node.
    Job(client::JobArgs),
    /// List, replay and delete dead letters.
    #[command(after_help = client::DEAD_LETTER_EXAMPLES)]
    DeadLetters(client::DeadLetterArgs),
    /// Lease, ack and nack messages of pull queues by hand, and show queue counts.
    #[command(after_help = client::QUEUE_EXAMPLES)]
    Queue(client::QueueArgs),
    /// Show the namespace's audit log, newest first: who (the API key's id) changed what, when.
    #[command(after_help = client::AUDIT_EXAMPLES)]
    Audit(client::AuditArgs),
    /// List the destinations whose circuit breaker is open on this node.
    Breakers(client::Connection),
    /// List the bus and cloud connections the namespace may use, with this node's publishes.
    Connections(client::Connection),
    /// List the cluster's live nodes: id, version, start, last heartbeat and claims held.
    ///
    /// Every node writes a heartbeat to the store every 5 s and is listed for 15 s after its
    /// latest. Cluster-wide, so it takes an admin API key when the node has keys.
    Nodes(client::Connection),
    /// Show the API key in use: the namespace it acts in, its role and every route it may call.
    Whoami(client::Connection),
    /// Rotate the namespace's webhook signing secret and print it; with --show, print the
    /// current one without rotating it.
    SigningSecret(client::SigningSecretArgs),
    /// Named calendars of excluded days: put, get, list, delete (`schedule.calendar`).
    Calendar(client::CalendarArgs),
    /// Named instants jobs are scheduled relative to: put (create or move), get, list, delete
    /// (`schedule.anchor`).
    Anchor(client::AnchorArgs),
    /// Receive webhooks on 127.0.0.1 and print each delivery (for development).
    Listen(listen::ListenArgs),
    /// Copy a running node's embedded store to a new file, consistently.
    ///
    /// Run it on the node's machine, as the user the node runs as.
    Backup(backup::BackupArgs),
    /// Generate an API key and the SHA-256 hash to put in the config file.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(after_help = COMPLETIONS_HELP)]
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

const COMPLETIONS_HELP: &str = "\
Install:
  bash  hourglass completions bash > ~/.local/share/bash-completion/completions/hourglass
  zsh   hourglass completions zsh > ~/.zfunc/_hourglass   (with fpath+=(~/.zfunc) before compinit)
  fish  hourglass completions fish > ~/.config/fish/completions/hourglass.fish";

#[derive(clap::Args)]
struct TickArgs {
    /// How long the tick may run, e.g. 60s.
    #[arg(long = "for", env = "HOURGLASS_TICK_WINDOW", default_value = "60s")]
    window: String,
    #[command(flatten)]
    serve: config::ServeArgs,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Print a new random API key and the config block that lets it in (only its hash is stored).
    Generate(KeyArgs),
    /// Print a new random secrets key, which seals the store's signing secrets at rest; with
    /// --kms-key-id, a new one wrapped by AWS KMS instead.
    Secrets(SecretsKeyArgs),
}

#[derive(clap::Args)]
struct SecretsKeyArgs {
    /// Have AWS KMS make the key under this KMS key (key id, key ARN, alias/NAME or alias ARN)
    /// and print it wrapped, as base64, for secrets_key_kms or HOURGLASS_SECRETS_KEY_KMS; the key
    /// itself is never shown (GenerateDataKeyWithoutPlaintext, KeySpec AES_256). Region,
    /// endpoint and credentials from the standard AWS chain (AWS_REGION, AWS_PROFILE, ...).
    #[arg(long, value_name = "KEY")]
    kms_key_id: Option<String>,
}

#[derive(clap::Args)]
struct KeyArgs {
    /// What the key may do: admin (everything), writer (jobs), worker (queue leases, acks, nacks,
    /// extends) or reader (reads). README, "Roles".
    #[arg(long, default_value = "admin", value_parser = ["admin", "writer", "worker", "reader"])]
    role: String,
    /// The namespace the key is bound to.
    #[arg(long, default_value = hourglass_server::auth::DEFAULT_NAMESPACE, conflicts_with = "all_namespaces")]
    namespace: String,
    /// A key of every namespace, chosen per request with the hourglass-namespace header.
    #[arg(long)]
    all_namespaces: bool,
}

/// Writes to stdout; a reader that went away (`hourglass job list | head`) ends the process
/// quietly with success, as `cat` does, instead of the panic `println!` raises on a broken pipe.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

fn main() -> std::process::ExitCode {
    if lambda::started_by_lambda() {
        return match tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(lambda::run()))
        {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if JSON_LOGS.get().is_some() {
                // With JSON logs (serve, tick) the failure is a log line too: a collector takes
                // nothing else.
                eprintln!("{}", json_line("ERROR", &format!("error: {e:#}")));
            } else {
                // One line: the cause chain joined, no backtrace whatever RUST_BACKTRACE says.
                eprintln!("error: {e:#}");
            }
            std::process::ExitCode::from(exit_code(&e))
        }
    }
}

/// Set once `serve` or `tick` logs in JSON: from then on the process writes nothing else, on
/// stdout or stderr, not even its last error.
static JSON_LOGS: std::sync::OnceLock<()> = std::sync::OnceLock::new();

/// A line for a person with text logs; with JSON logs the same text as the message of a line
/// shaped like the log's events. Written whatever `HOURGLASS_LOG` filters, like the text line.
fn say(json: bool, text: std::fmt::Arguments<'_>) {
    if json {
        outln!("{}", json_line("INFO", &text.to_string()));
    } else {
        outln!("{text}");
    }
}

/// One line in the shape of the JSON log's events: timestamp, level, `fields.message`, target.
fn json_line(level: &str, message: &str) -> String {
    serde_json::json!({
        "timestamp": jiff::Timestamp::now().to_string(),
        "level": level,
        "fields": {"message": message},
        "target": "hourglass",
    })
    .to_string()
}

/// The exit code of `serve` and `tick` when their configuration cannot work (sysexits'
/// `EX_CONFIG`): the same start would fail the same way, so the systemd unit does not restart
/// on it (`RestartPreventExitStatus`), where a store that is down (exit 1) is retried.
const EX_CONFIG: u8 = 78;

/// Marks an error in the node's settings (flags, environment, config file): exit [`EX_CONFIG`].
#[derive(Debug)]
struct Misconfigured;

impl std::fmt::Display for Misconfigured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid configuration")
    }
}

/// A settings error marked [`Misconfigured`], unless AWS KMS could not be asked for the secrets
/// key: a later start may find it (exit 1, restarted).
fn misconfigured(e: anyhow::Error) -> anyhow::Error {
    if e.downcast_ref::<config::KmsUnavailable>().is_some() {
        e
    } else {
        e.context(Misconfigured)
    }
}

/// Marks an error as a usage error: `main` exits 2 on it, as README documents.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    profile::Usage(message.into()).into()
}

/// Exit codes, as README documents them: 0 success, 1 any other failure, 2 usage (clap's own,
/// and a profile that cannot be used), 3 the node refused the request (4xx), 4 not found (404),
/// 5 the node is unreachable or unavailable (5xx, a connection that failed); `serve` and `tick`
/// 78 for a configuration that cannot work.
fn exit_code(e: &anyhow::Error) -> u8 {
    let by_status = |status: u16| match status {
        404 => 4,
        500.. => 5,
        _ => 3,
    };
    // A context, which anyhow finds on the error itself (not among the chain's causes).
    if e.downcast_ref::<Misconfigured>().is_some() {
        return EX_CONFIG;
    }
    for cause in e.chain() {
        if matches!(
            cause.downcast_ref::<hourglass_server::StartError>(),
            Some(hourglass_server::StartError::Config(_))
        ) {
            return EX_CONFIG;
        }
        if cause.downcast_ref::<profile::Usage>().is_some() {
            return 2;
        }
        if let Some(refused) = cause.downcast_ref::<client::Refused>() {
            return by_status(refused.status);
        }
        if cause.downcast_ref::<client::Unreachable>().is_some() {
            return 5;
        }
        if let Some(err) = cause.downcast_ref::<hourglass_client::Error>() {
            return match err {
                hourglass_client::Error::Api { status, .. }
                | hourglass_client::Error::Http { status, .. } => by_status(*status),
                hourglass_client::Error::Transport { .. } => 5,
                _ => 1,
            };
        }
    }
    1
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let out = client::Output::new(cli.output);
    match cli.command {
        Command::Serve(args) => runtime.block_on(serve(args)),
        Command::Tick(args) => runtime.block_on(tick(args)),
        Command::Job(args) => runtime.block_on(client::job(args, out)),
        Command::DeadLetters(args) => runtime.block_on(client::dead_letters(args, out)),
        Command::Queue(args) => runtime.block_on(client::queue(args, out)),
        Command::Breakers(conn) => runtime.block_on(client::breakers(conn, out)),
        Command::Connections(conn) => runtime.block_on(client::connections(conn, out)),
        Command::Nodes(conn) => runtime.block_on(client::nodes(conn, out)),
        Command::Whoami(conn) => runtime.block_on(client::whoami(conn, out)),
        Command::Audit(args) => runtime.block_on(client::audit(args, out)),
        Command::SigningSecret(args) => runtime.block_on(client::signing_secret(args, out)),
        Command::Calendar(args) => runtime.block_on(client::calendar(args, out)),
        Command::Anchor(args) => runtime.block_on(client::anchor(args, out)),
        Command::Listen(args) => runtime.block_on(listen::run(args)),
        Command::Backup(args) => backup::run(args),
        Command::Key {
            command: KeyCommand::Generate(args),
        } => {
            if !args.all_namespaces && !hourglass_server::auth::valid_namespace(&args.namespace) {
                return Err(usage(format!(
                    "--namespace: {}",
                    hourglass_server::auth::NAMESPACE_RULE
                )));
            }
            let key = hourglass_server::auth::generate_key();
            let hash = hourglass_server::auth::hash_key(&key);
            outln!("key:    {key}");
            outln!("sha256: {hash}");
            outln!("role:   {}", args.role);
            outln!();
            outln!("Add to the config file (the key itself is not stored anywhere):");
            outln!("[[api_keys]]");
            if args.all_namespaces {
                outln!("all_namespaces = true");
            } else {
                outln!("namespace = \"{}\"", args.namespace);
            }
            outln!("sha256 = \"{hash}\"");
            outln!("role = \"{}\"", args.role);
            Ok(())
        }
        Command::Key {
            command:
                KeyCommand::Secrets(SecretsKeyArgs {
                    kms_key_id: Some(key_id),
                }),
        } => {
            let wrapped = runtime
                .block_on(kms::new_data_key(&key_id))
                .with_context(|| format!("--kms-key-id {key_id}"))?;
            outln!("{wrapped}");
            eprintln!(
                "A secrets key wrapped by AWS KMS key {key_id}: give it as secrets_key_kms = \"...\" \
                 in the config file, or in HOURGLASS_SECRETS_KEY_KMS. The node has KMS unwrap it \
                 at start (kms:Decrypt on that key); without the KMS key it cannot read the \
                 signing secrets it seals."
            );
            Ok(())
        }
        Command::Key {
            command: KeyCommand::Secrets(SecretsKeyArgs { kms_key_id: None }),
        } => {
            let key = hourglass_engine::sealing::SecretsKey::generate();
            outln!("{key}");
            eprintln!(
                "Keep it in a file only the node reads (secrets_key_file = \"...\" in the config \
                 file), or in HOURGLASS_SECRETS_KEY. Without it the node cannot read the \
                 signing secrets it seals: back it up apart from the store."
            );
            Ok(())
        }
        Command::Completions { shell } => {
            let mut command = Cli::command();
            // Into memory first: clap_complete panics when stdout is a closed pipe.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "hourglass", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(())
        }
    }
}

async fn serve(args: config::ServeArgs) -> anyhow::Result<()> {
    // A flag or variable asking for JSON logs holds already for a settings error.
    if args.log_format() == Some(config::LogFormat::Json) {
        init_logging(&config::LogFormat::Json);
    }
    let settings = config::resolve(args).await.map_err(misconfigured)?;
    init_logging(&settings.log_format);
    let json = matches!(settings.log_format, config::LogFormat::Json);
    let node = hourglass_server::Node::start(settings.node, Arc::new(hourglass_core::SystemClock))
        .await
        .context("cannot start the node")?;
    // Tests and scripts read the address from this first line: keep its text. With JSON logs it
    // is the message of the first event (every line is then a JSON object, for log collectors).
    say(
        json,
        format_args!("hourglass listening on http://{}", node.addr()),
    );
    say(json, format_args!("dashboard: http://{}/", node.addr()));
    if let Some(metrics) = node.metrics_addr() {
        say(
            json,
            format_args!("hourglass serving metrics on http://{metrics}/metrics"),
        );
    }
    let failed = node.failed();
    tokio::select! {
        _ = shutdown_signal() => {
            tracing::info!("shutdown requested; draining");
            node.shutdown().await;
            Ok(())
        }
        _ = failed => {
            // `/readyz` already answers 503. Keep answering it for a moment so that a load
            // balancer or orchestrator sees why, then drain what can be drained and exit
            // non-zero: the supervisor's restart is the recovery.
            tracing::error!(
                exit_in_s = FAILED_EXIT_AFTER.as_secs(),
                "the engine died; exiting so that the node is restarted"
            );
            tokio::time::sleep(FAILED_EXIT_AFTER).await;
            if tokio::time::timeout(FAILED_SHUTDOWN_LIMIT, node.shutdown()).await.is_err() {
                tracing::error!("shutdown after the engine died did not finish in time");
            }
            anyhow::bail!("the engine died (a pipeline stage panicked); see the log above")
        }
    }
}

async fn tick(args: TickArgs) -> anyhow::Result<()> {
    if args.serve.log_format() == Some(config::LogFormat::Json) {
        init_logging(&config::LogFormat::Json);
    }
    let window = hourglass_core::duration::parse_duration(&args.window, "for")
        .map_err(|e| usage(format!("--for: {}", e.message)))?;
    let settings = config::resolve(args.serve).await.map_err(misconfigured)?;
    init_logging(&settings.log_format);
    let json = matches!(settings.log_format, config::LogFormat::Json);
    // SIGTERM or Ctrl-C ends the tick as its window's end would: what is in flight is
    // delivered, the other claims are handed back for the next tick.
    let outcome = hourglass_server::tick(
        settings.node,
        Arc::new(hourglass_core::SystemClock),
        window,
        shutdown_signal(),
    )
    .await
    .context("cannot run the tick")?;
    match outcome {
        hourglass_server::TickOutcome::Idle => say(
            json,
            format_args!("tick: nothing due in the next {window:?}"),
        ),
        hourglass_server::TickOutcome::Ran(ran) => {
            say(json, format_args!("tick: ran for {ran:.1?}"))
        }
        hourglass_server::TickOutcome::Stopped(ran) => say(
            json,
            format_args!("tick: stopped by a signal after {ran:.1?}"),
        ),
    }
    Ok(())
}

/// How long a node whose engine died keeps answering `/readyz` with 503 before it exits.
const FAILED_EXIT_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
/// How long the drain after an engine death may take before the process exits anyway.
const FAILED_SHUTDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Installs the log subscriber, once: a second call (after an early one for a JSON flag) keeps
/// the first.
fn init_logging(format: &config::LogFormat) {
    if JSON_LOGS.get().is_some() {
        return;
    }
    let filter =
        EnvFilter::try_from_env("HOURGLASS_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: log files and collectors get plain text.
    let ansi = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    match format {
        config::LogFormat::Json => {
            builder.json().init();
            let _ = JSON_LOGS.set(());
        }
        config::LogFormat::Text => builder.init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("can install a SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand and every argument, at every level, says what it is for in `--help`.
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let help = arg.get_help().or(arg.get_long_help());
                if !arg.is_hide_set() && help.is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                let sub_path = format!("{path} {}", sub.get_name());
                let about = sub.get_about().or(sub.get_long_about());
                if about.is_none_or(|a| a.to_string().trim().is_empty()) {
                    missing.push(sub_path.clone());
                }
                walk(sub, &sub_path, missing);
            }
        }
        let mut command = Cli::command();
        // Built, as `--help` shows it: global arguments copied down, help flags added.
        command.build();
        let mut missing = Vec::new();
        walk(&command, "hourglass", &mut missing);
        assert!(missing.is_empty(), "without help: {missing:#?}");
        // The walk saw the tree (and not, say, an empty command).
        assert!(command.find_subcommand("job").is_some());
    }
}
