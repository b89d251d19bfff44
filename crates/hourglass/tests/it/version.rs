//! `hourglass --version` and `-V`: the release and the commit the binary was built from.

#[test]
fn version_names_the_release_and_the_commit() {
    for flag in ["--version", "-V"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg(flag)
            .output()
            .expect("run hourglass");
        assert!(out.status.success(), "{flag}: {out:?}");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let want = format!("hourglass {} (commit ", env!("CARGO_PKG_VERSION"));
        assert!(text.starts_with(&want), "{flag}: {text:?}");
        // A short hash when built in a git checkout, "unknown" otherwise.
        let commit = text
            .trim_end()
            .trim_start_matches(&want)
            .trim_end_matches(')');
        assert!(
            commit == "unknown"
                || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
            "{flag}: {text:?}"
        );
    }
}
