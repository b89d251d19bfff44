//! The client subcommands: failures are one line on stderr (no second copy, no backtrace even
//! with `RUST_BACKTRACE=1`) with an exit code that says what kind of failure it was, as README
//! documents (3 refused, 4 not found, 5 unreachable or unavailable, 2 usage); answers print as
//! tables or as the API's JSON (`--output`); profiles of a client config file; completions.

use std::path::Path;

use serde_json::Value;

use crate::support::{NodeOptions, Nodes};

/// Runs `hourglass ARGS` with a backtrace asked for; answers (exit code, stderr).
fn hourglass(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run hourglass");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_error_line(stderr: &str, starts: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    assert!(lines[0].starts_with(starts), "{stderr:?}");
}

#[tokio::test]
async fn failures_print_one_line_and_exit_with_their_kind() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli")).await;
    let url = format!("http://{}", node.addr);

    let (code, stderr) = hourglass(&[
        "job",
        "get",
        "01a20c9b-fb01-7736-a59e-0a3ac367d4f9",
        "--url",
        &url,
    ]);
    assert_eq!(code, 4, "not found: {stderr}");
    one_error_line(&stderr, "error: http 404 not_found: job not found");

    let (code, stderr) = hourglass(&[
        "job",
        "create",
        "--webhook",
        "http://127.0.0.1:9/hook",
        "--after",
        "soon",
        "--url",
        &url,
    ]);
    assert_eq!(code, 3, "refused: {stderr}");
    one_error_line(&stderr, "error: http 422 invalid_duration: ");
    assert!(stderr.contains("(field schedule.after)"), "{stderr}");

    // Nothing listens on the discard port.
    let (code, stderr) = hourglass(&["job", "list", "--url", "http://127.0.0.1:9"]);
    assert_eq!(code, 5, "unreachable: {stderr}");
    one_error_line(&stderr, "error: cannot reach http://127.0.0.1:9/v1/jobs");

    let (code, _) = hourglass(&["job", "frobnicate"]);
    assert_eq!(code, 2, "usage");
    node.kill().await;
}

/// Every usage error exits 2, as README documents, whether clap or the command itself finds it:
/// a missing or doubled schedule flag, a missing target, a payload that is not JSON, a malformed
/// header or misfire policy, a `--json` body that is not JSON, a bad `--for` of `tick`. Nothing
/// is sent: the URL is the discard port, where nothing listens (that would exit 5).
#[test]
fn usage_errors_exit_2() {
    let hook = "http://127.0.0.1:9/hook";
    let cases: &[&[&str]] = &[
        &["job", "create", "--webhook", hook],
        &[
            "job",
            "create",
            "--webhook",
            hook,
            "--after",
            "1m",
            "--every",
            "1h",
        ],
        &["job", "create", "--after", "1m"],
        &[
            "job",
            "create",
            "--webhook",
            hook,
            "--after",
            "1m",
            "--payload",
            "{nope",
        ],
        &[
            "job",
            "create",
            "--webhook",
            hook,
            "--after",
            "1m",
            "--payload",
            "@/nonexistent/p.json",
        ],
        &[
            "job",
            "create",
            "--webhook",
            hook,
            "--after",
            "1m",
            "--header",
            "no-equals-sign",
        ],
        &[
            "job",
            "create",
            "--webhook",
            hook,
            "--every",
            "1m",
            "--misfire",
            "later:1h",
        ],
        &["job", "create", "--json", "{nope"],
    ];
    for args in cases {
        let mut all = args.to_vec();
        all.extend(["--url", "http://127.0.0.1:9"]);
        let (code, stderr) = hourglass(&all);
        assert_eq!(code, 2, "hourglass {args:?}: {stderr}");
        one_error_line(&stderr, "error: ");
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, stderr) = hourglass(&[
        "tick",
        "--for",
        "soon",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "tick --for soon: {stderr}");
    one_error_line(&stderr, "error: --for");
}

/// What a run of the binary left: exit code, stdout, stderr.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `hourglass ARGS` with `env` set and none of the client's own variables inherited (a
/// developer's HOURGLASS_URL or HOURGLASS_PROFILE must not steer a test). Its stdout is a pipe,
/// so the default output is JSON.
fn run(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"));
    command.args(args);
    for var in [
        "HOURGLASS_URL",
        "HOURGLASS_API_KEY",
        "HOURGLASS_NAMESPACE",
        "HOURGLASS_PROFILE",
        "HOURGLASS_CLIENT_CONFIG",
        "HOURGLASS_OUTPUT",
    ] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    let out = command.output().expect("run hourglass");
    Ran {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a command that must succeed; answers its stdout.
fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let ran = run(args, env);
    assert_eq!(ran.code, 0, "hourglass {args:?}: {}", ran.stderr);
    ran.stdout
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A table line's cells: the text between runs of two or more spaces.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[tokio::test]
async fn answers_print_as_tables_or_as_the_apis_json() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-output")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];

    let created = json(&ok(
        &[
            "job",
            "create",
            "--queue",
            "emails",
            "--after",
            "10m",
            "--key",
            "welcome-ada",
            "--type",
            "email.send",
        ],
        &env,
    ));
    let id = created["id"].as_str().expect("an id").to_string();
    ok(
        &[
            "job",
            "create",
            "--webhook",
            "http://127.0.0.1:9/hook",
            "--every",
            "15m",
        ],
        &env,
    );

    // JSON, the default when stdout is not a terminal, is the API's answer pretty-printed, and
    // --output json (or HOURGLASS_OUTPUT=json) prints exactly the same bytes.
    let default = ok(&["job", "get", "welcome-ada"], &env);
    assert!(default.starts_with("{\n  \""), "pretty JSON: {default}");
    let (status, from_api) = node.api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(json(&default), from_api);
    assert_eq!(
        ok(&["job", "get", "welcome-ada", "--output", "json"], &env),
        default
    );
    let env_json = [
        ("HOURGLASS_URL", url.as_str()),
        ("HOURGLASS_OUTPUT", "json"),
    ];
    assert_eq!(ok(&["job", "get", "welcome-ada"], &env_json), default);
    let list = json(&ok(&["job", "list"], &env));
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(2), "{list}");

    // The job list as a table: headings, then one row per job, by key or by the id's tail.
    let table = ok(&["job", "list", "--output", "table"], &env);
    let rows: Vec<Vec<&str>> = table.lines().map(cells).collect();
    assert_eq!(
        rows[0],
        ["JOB", "TYPE", "STATE", "NEXT DUE", "TARGET"],
        "{table}"
    );
    assert_eq!(rows.len(), 3, "{table}");
    let keyed = rows
        .iter()
        .find(|r| r[0] == "welcome-ada")
        .expect("the keyed job");
    assert_eq!(keyed[1..3], ["email.send", "active"], "{table}");
    assert!(
        keyed[3].contains(" (in 9m ") || keyed[3].ends_with(" (in 10m)"),
        "next due with relative time: {table}"
    );
    assert_eq!(keyed[4], "queue emails", "{table}");
    let other = rows
        .iter()
        .find(|r| r[0] != "welcome-ada" && r[0] != "JOB")
        .unwrap();
    assert!(
        other[0].starts_with('…') && other[0].chars().count() == 13,
        "{table}"
    );
    assert_eq!(other[1], "-", "no type: {table}");
    assert_eq!(other[4], "http://127.0.0.1:9/hook", "{table}");
    // No colour when stdout is not a terminal, even for a forced table.
    assert!(!table.contains('\x1b'), "{table:?}");

    // One job: a key/value view.
    let view = ok(&["job", "get", &id, "--output", "table"], &env);
    for line in [
        format!("id         {id}"),
        "key        welcome-ada".to_string(),
        "state      active".to_string(),
        "target     queue emails".to_string(),
    ] {
        assert!(view.lines().any(|l| l == line), "{line:?} in:\n{view}");
    }

    // Queues and runs have their tables too; an empty list says so.
    let queues = ok(&["queue", "stats", "--output", "table"], &env);
    let rows: Vec<Vec<&str>> = queues.lines().map(cells).collect();
    assert_eq!(
        rows,
        [
            vec![
                "QUEUE",
                "AVAILABLE",
                "IN FLIGHT",
                "SCHEDULED",
                "OLDEST WAITING"
            ],
            vec!["emails", "0", "0", "1", "-"],
        ],
        "{queues}"
    );
    assert_eq!(
        ok(&["job", "runs", &id, "--output", "table"], &env),
        "no runs\n"
    );
    assert_eq!(
        ok(&["dead-letters", "list", "--output", "table"], &env),
        "no dead letters\n"
    );
    let bad = run(&["job", "list", "--output", "yaml"], &env);
    assert_eq!(bad.code, 2, "usage: {}", bad.stderr);
    node.kill().await;
}

fn write_client_config(dir: &Path, text: &str) -> String {
    let path = dir.join("client.toml");
    std::fs::write(&path, text).expect("write the client config");
    path.display().to_string()
}

#[tokio::test]
async fn a_profile_supplies_url_and_namespace_and_flags_override_it() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-profiles")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_client_config(
        dir.path(),
        &format!(
            "[profiles.team-a]\nurl = \"http://{}\"\nnamespace = \"team-a\"\n\n\
             [profiles.nowhere]\nurl = \"http://127.0.0.1:9\"\napi_key = \"hg_do_not_print\"\n",
            node.addr
        ),
    );
    let env = [("HOURGLASS_CLIENT_CONFIG", config.as_str())];
    let create = ["job", "create", "--queue", "q", "--after", "1h"];

    // --profile picks the node and the namespace.
    let job = json(&ok(&[&create[..], &["--profile", "team-a"]].concat(), &env));
    assert_eq!(job["namespace"], "team-a", "{job}");
    // So does HOURGLASS_PROFILE.
    let by_env = [
        ("HOURGLASS_CLIENT_CONFIG", config.as_str()),
        ("HOURGLASS_PROFILE", "team-a"),
    ];
    let listed = json(&ok(&["job", "list"], &by_env));
    assert_eq!(listed["jobs"][0]["id"], job["id"], "{listed}");
    // A flag overrides the profile's value; the profile still supplies the rest (the URL).
    let job = json(&ok(
        &[
            &create[..],
            &["--profile", "team-a", "--namespace", "team-b"],
        ]
        .concat(),
        &env,
    ));
    assert_eq!(job["namespace"], "team-b", "{job}");
    // And so does the flag's environment variable.
    let url = format!("http://{}", node.addr);
    let env_url = [
        ("HOURGLASS_CLIENT_CONFIG", config.as_str()),
        ("HOURGLASS_PROFILE", "nowhere"),
        ("HOURGLASS_URL", url.as_str()),
        ("HOURGLASS_NAMESPACE", "team-a"),
    ];
    let listed = json(&ok(&["job", "list"], &env_url));
    assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(1), "{listed}");

    // The profile's URL is used: nothing listens there, and the key is not printed.
    let ran = run(&["job", "list", "--profile", "nowhere"], &env);
    assert_eq!(ran.code, 5, "unreachable: {}", ran.stderr);
    one_error_line(
        &ran.stderr,
        "error: cannot reach http://127.0.0.1:9/v1/jobs",
    );

    // A profile that is not there, a file that is not there, a broken file: one line, usage.
    let ran = run(&["job", "list", "--profile", "team-c"], &env);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    one_error_line(
        &ran.stderr,
        &format!(
            "error: profile \"team-c\" is not in the client config file {config} (it has nowhere, team-a)"
        ),
    );
    let missing = dir.path().join("missing.toml").display().to_string();
    let ran = run(
        &["job", "list", "--profile", "team-a"],
        &[("HOURGLASS_CLIENT_CONFIG", missing.as_str())],
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    one_error_line(
        &ran.stderr,
        "error: profile \"team-a\": cannot read the client config file",
    );
    let broken = write_client_config(
        dir.path(),
        "[profiles.x]\nurl = \"http://127.0.0.1:9\"\napikey = \"hg_do_not_print\"\n",
    );
    let ran = run(
        &["job", "list", "--profile", "x"],
        &[("HOURGLASS_CLIENT_CONFIG", broken.as_str())],
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    one_error_line(
        &ran.stderr,
        &format!("error: client config file {broken}:3: unknown field `apikey`"),
    );
    assert!(!ran.stderr.contains("hg_do_not_print"), "{}", ran.stderr);
    // Without a profile the file is not read at all, broken or not.
    let ran = run(
        &["job", "list", "--url", &url, "--namespace", "team-a"],
        &[("HOURGLASS_CLIENT_CONFIG", broken.as_str())],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    node.kill().await;
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&["completions", shell], &[]);
        // The script completes the subcommands and their flags, at every level (fish writes a
        // long flag as `-l profile`).
        for word in [
            "next-fires",
            "dead-letters",
            "max-attempts",
            "profile",
            "output",
        ] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    let ran = run(&["completions", "tcsh"], &[]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
}

#[test]
fn help_shows_examples_for_the_main_commands() {
    for args in [
        vec!["--help"],
        vec!["job", "create", "--help"],
        vec!["job", "list", "--help"],
        vec!["queue", "--help"],
        vec!["dead-letters", "--help"],
        vec!["audit", "--help"],
    ] {
        let help = ok(&args, &[]);
        assert!(
            help.contains("\nExamples:\n  hourglass "),
            "{args:?}:\n{help}"
        );
    }
}

/// A reader that stops early (`hourglass … | head`) ends the command quietly with success, not
/// with a panic about a broken pipe. The bash script is about 84 KB, more than a pipe holds, so
/// the command is still writing when the reader goes away.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::io::Read as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["completions", "bash"])
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hourglass");
    let mut first = [0u8; 16];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("the start of the script");
    // The read end is dropped here: the rest of the script meets a closed pipe.
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}, stderr: {stderr}",
        output.status
    );
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
}

/// `hourglass job update` sends every field PATCH /v1/jobs/{id} takes, from the same flags as
/// `job create` (or a body with --json), and prints the updated job; the node keeps what it was
/// not given. With nothing to change it is a usage error.
#[tokio::test]
async fn job_update_changes_every_field_patch_takes() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-update")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    let created = json(&ok(
        &[
            "job",
            "create",
            "--webhook",
            "http://127.0.0.1:9/hook",
            "--after",
            "10m",
            "--key",
            "report",
            "--type",
            "report.v1",
            "--payload",
            "{\"v\": 1}",
        ],
        &env,
    ));
    let id = created["id"].as_str().expect("an id").to_string();

    // Schedule, target (a webhook with its headers, rate limit and batching), payload, type,
    // retry and misfire policy at once, addressed by key.
    let updated = json(&ok(
        &[
            "job",
            "update",
            "report",
            "--cron",
            "0 0 2 * * *",
            "--timezone",
            "Europe/Paris",
            "--max-runs",
            "5",
            "--webhook",
            "http://127.0.0.1:9/v2",
            "--header",
            "x-team=billing",
            "--rate-limit",
            "5",
            "--batch",
            "10",
            "--payload",
            "{\"v\": 2}",
            "--type",
            "report.v2",
            "--max-attempts",
            "7",
            "--initial-backoff",
            "3s",
            "--max-backoff",
            "1m",
            "--misfire",
            "skip",
        ],
        &env,
    ));
    let (status, job) = node.api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(updated, job, "the command prints the updated job");
    assert_eq!(job["key"], "report", "{job}");
    assert_eq!(job["type"], "report.v2", "{job}");
    assert_eq!(job["schedule"]["cron"], "0 0 2 * * *", "{job}");
    assert_eq!(job["schedule"]["timezone"], "Europe/Paris", "{job}");
    assert_eq!(job["schedule"]["max_runs"], 5, "{job}");
    let webhook = &job["target"]["webhook"];
    assert_eq!(webhook["url"], "http://127.0.0.1:9/v2", "{job}");
    assert_eq!(webhook["rate_limit"], 5, "{job}");
    assert_eq!(webhook["batch"]["max_items"], 10, "{job}");
    assert!(
        webhook["headers"].to_string().contains("x-team"),
        "the header is kept (its value may be hidden): {job}"
    );
    assert_eq!(job["payload"], serde_json::json!({"v": 2}), "{job}");
    assert_eq!(job["retry"]["max_attempts"], 7, "{job}");
    assert_eq!(job["retry"]["initial_backoff"], "3s", "{job}");
    assert_eq!(job["retry"]["max_backoff"], "1m", "{job}");
    assert_eq!(job["misfire"], "skip", "{job}");

    // One field at a time: the rest stays. A queue target; `--payload null` clears the payload;
    // a one-off schedule again; and --json for a whole patch body.
    let job = json(&ok(&["job", "update", &id, "--queue", "reports"], &env));
    assert_eq!(job["target"]["queue"], "reports", "{job}");
    assert_eq!(job["type"], "report.v2", "{job}");
    let job = json(&ok(&["job", "update", &id, "--payload", "null"], &env));
    assert_eq!(job["payload"], Value::Null, "{job}");
    assert_eq!(job["schedule"]["cron"], "0 0 2 * * *", "{job}");
    let job = json(&ok(&["job", "update", &id, "--after", "1h"], &env));
    assert!(job["schedule"]["at"].is_string(), "{job}");
    let job = json(&ok(
        &["job", "update", &id, "--json", "{\"type\": \"report.v3\"}"],
        &env,
    ));
    assert_eq!(job["type"], "report.v3", "{job}");
    assert_eq!(job["target"]["queue"], "reports", "{job}");

    let ran = run(&["job", "update", &id], &env);
    assert_eq!(ran.code, 2, "nothing to change: {}", ran.stderr);
    let ran = run(&["job", "update", "no-such-key", "--type", "x"], &env);
    assert_eq!(ran.code, 4, "not found: {}", ran.stderr);
    node.kill().await;
}

/// `hourglass signing-secret --show` prints the namespace's current secret and rotates nothing;
/// `hourglass signing-secret` still rotates it.
#[tokio::test]
async fn signing_secret_show_reads_without_rotating() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-secret")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    let shown = json(&ok(&["signing-secret", "--show"], &env));
    let secret = shown["signing_secret"]
        .as_str()
        .expect("a secret")
        .to_string();
    assert!(secret.starts_with("whsec_"), "{shown}");
    assert_eq!(json(&ok(&["signing-secret", "--show"], &env)), shown);
    let rotated = json(&ok(&["signing-secret"], &env));
    assert_ne!(rotated["signing_secret"], shown["signing_secret"]);
    let again = json(&ok(&["signing-secret", "--show"], &env));
    assert_eq!(again["signing_secret"], rotated["signing_secret"]);
    node.kill().await;
}

/// `hourglass audit` prints the namespace's audit log: the API's answer as JSON (one job's
/// entries with `--job`), or a table that says how to get the next page.
#[tokio::test]
async fn audit_shows_who_changed_what() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-audit")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    let create = ["job", "create", "--queue", "q", "--after", "1h"];
    let id = json(&ok(&create, &env))["id"].as_str().unwrap().to_owned();
    ok(&create, &env);
    ok(&["job", "pause", &id], &env);
    let log = json(&ok(&["audit"], &env));
    let actions: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["pause", "create", "create"], "{log}");
    assert_eq!(log["entries"][0]["key_id"], "open", "{log}");
    let of_job = json(&ok(&["audit", "--job", &id], &env));
    assert_eq!(of_job["entries"].as_array().unwrap().len(), 2, "{of_job}");
    let table = ok(&["audit", "--limit", "1", "--output", "table"], &env);
    let rows: Vec<Vec<&str>> = table.lines().map(cells).collect();
    assert_eq!(
        rows[0],
        ["WHEN", "KEY", "ACTION", "JOBS", "DETAIL"],
        "{table}"
    );
    assert_eq!(rows[1][1..3], ["open", "pause"], "{table}");
    assert!(table.contains("more: --cursor "), "{table}");
    node.kill().await;
}

/// `hourglass nodes` lists the live nodes: the API's answer as JSON, or a table.
#[tokio::test]
async fn nodes_lists_the_live_nodes() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-nodes")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    // The node's first heartbeat is written as its engine starts; wait until it shows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let from_api = loop {
        let (status, listed) = node.api.call("GET", "/v1/nodes", None).await;
        assert_eq!(status, 200, "{listed}");
        if listed["nodes"].as_array().is_some_and(|n| n.len() == 1) {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no heartbeat: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let listed = json(&ok(&["nodes"], &env));
    let me = &from_api["nodes"][0];
    assert_eq!(listed["nodes"][0]["id"], me["id"], "{listed}");
    assert_eq!(listed["nodes"][0]["version"], env!("CARGO_PKG_VERSION"));

    let table = ok(&["nodes", "--output", "table"], &env);
    let rows: Vec<Vec<&str>> = table.lines().map(cells).collect();
    assert_eq!(
        rows[0],
        ["NODE", "VERSION", "STARTED", "LAST HEARTBEAT", "CLAIMS"],
        "{table}"
    );
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[1][0], me["id"].as_str().unwrap(), "{table}");
    assert_eq!(rows[1][1], env!("CARGO_PKG_VERSION"), "{table}");
    assert_eq!(rows[1][4], "0", "{table}");
    node.kill().await;
}

/// Issue 37: `--jitter` reaches the job, `job get` shows its next fire time beside its due
/// time, and `job next-fires --jitter --job ID` prints each fire time with its due time, the
/// job's own (the preview agrees with the job).
#[tokio::test]
async fn jitter_shows_fire_and_due_times() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-jitter")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    let created = json(&ok(
        &[
            "job",
            "create",
            "--queue",
            "q",
            "--every",
            "1h",
            "--start",
            "2030-01-01T00:00:00Z",
            "--jitter",
            "10m",
        ],
        &env,
    ));
    assert_eq!(created["schedule"]["jitter"], "10m", "{created}");
    let id = created["id"].as_str().expect("an id");
    let fire = created["next_fire_at"]
        .as_str()
        .expect("a fire time")
        .to_string();
    let view = ok(&["job", "get", id, "--output", "table"], &env);
    assert!(view.contains("next fire"), "{view}");
    assert!(view.contains("jitter 10m"), "{view}");
    let fires = ok(
        &[
            "job",
            "next-fires",
            "--every",
            "1h",
            "--start",
            "2030-01-01T00:00:00Z",
            "--jitter",
            "10m",
            "--job",
            id,
            "-n",
            "2",
        ],
        &env,
    );
    let lines: Vec<&str> = fires.lines().collect();
    assert_eq!(lines.len(), 3, "{fires}");
    assert_eq!(
        lines[1],
        format!("{fire}  (due 2030-01-01T00:00:00.000Z)"),
        "{fires}"
    );
    assert!(
        lines[2].ends_with("(due 2030-01-01T01:00:00.000Z)"),
        "{fires}"
    );
}

/// Issue 37: `job next-fires --calendar --roll` previews a calendar of the namespace: an
/// occurrence rolled off an excluded day prints when it fires beside its due time, and one the
/// calendar leaves alone prints its time only.
#[tokio::test]
async fn next_fires_shows_a_calendar_roll() {
    let nodes = Nodes::default();
    let node = nodes.start(&NodeOptions::embedded("cli-calendar")).await;
    let url = format!("http://{}", node.addr);
    let env = [("HOURGLASS_URL", url.as_str())];
    ok(
        &[
            "calendar",
            "put",
            "business",
            "--timezone",
            "Europe/Berlin",
            "--weekday",
            "SAT",
            "--weekday",
            "SUN",
        ],
        &env,
    );
    // The 5th at 09:00 Berlin: 5 January 2030 is a Saturday, 5 February a Tuesday.
    let fires = ok(
        &[
            "job",
            "next-fires",
            "0 0 9 5 * *",
            "--timezone",
            "Europe/Berlin",
            "--start",
            "2030-01-01T00:00:00Z",
            "--calendar",
            "business",
            "--roll",
            "previous",
            "-n",
            "2",
        ],
        &env,
    );
    let lines: Vec<&str> = fires.lines().collect();
    assert_eq!(lines.len(), 3, "{fires}");
    assert!(
        lines[1].starts_with("2030-01-04T08:00:00.000Z  Fri 2030-01-04 09:00:00"),
        "{fires}"
    );
    assert!(
        lines[1].ends_with("(due 2030-01-05T08:00:00.000Z)"),
        "{fires}"
    );
    assert!(
        lines[2].starts_with("2030-02-05T08:00:00.000Z  Tue 2030-02-05 09:00:00"),
        "{fires}"
    );
    assert!(!lines[2].contains("(due"), "{fires}");
}
