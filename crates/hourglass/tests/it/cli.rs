//! The client subcommands' failures: one line on stderr (no second copy, no backtrace even with
//! `RUST_BACKTRACE=1`), and an exit code that says what kind of failure it was, as README
//! documents: 3 refused, 4 not found, 5 unreachable or unavailable, 2 usage.

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

#[test]
fn completions_are_printed_for_each_shell() {
    let completions = |shell: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .args(["completions", shell])
            .output()
            .expect("run hourglass")
    };
    for shell in ["bash", "zsh", "fish"] {
        let out = completions(shell);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).expect("utf-8");
        // The script completes the subcommands and their flags, at every level.
        for word in ["next-fires", "dead-letters", "max-attempts"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    assert_eq!(completions("tcsh").status.code(), Some(2), "usage");
}
