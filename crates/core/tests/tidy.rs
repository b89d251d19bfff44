//! The workspace's tidiness rules, checked over every `crates/*/src/**/*.rs` file:
//!
//! - every source file opens with a `//!` module doc saying what it holds;
//! - no source file is over 800 lines, except test files (under a `tests/` directory or named
//!   `tests.rs`) and the files on [`OVER_LIMIT`], which may not grow.
//!
//! A failure names every file that breaks a rule, and how.

use std::path::{Path, PathBuf};

/// Lines a source file may have.
const MAX_LINES: usize = 800;

/// Files over [`MAX_LINES`] still waiting for their split (issue 35, step 7), each with its line
/// count when it was listed as its cap: it may shrink, not grow. When a file is split below the
/// limit, its entry goes (the test fails on an entry that is no longer needed); no entry is ever
/// added.
const OVER_LIMIT: &[(&str, usize)] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace directory")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Every `crates/*/src/**/*.rs` file of the workspace, as paths relative to it with `/`.
fn source_files(root: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let crates = std::fs::read_dir(root.join("crates")).expect("the crates directory");
    for krate in crates {
        let src = krate.expect("a directory entry").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(root).expect("under the workspace");
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            (name, path)
        })
        .collect();
    named.sort();
    named
}

/// Test code, which the size rule leaves alone: a file under a `tests/` directory, or one
/// named `tests.rs`.
fn is_test_file(name: &str) -> bool {
    name.split('/').any(|part| part == "tests") || name.ends_with("/tests.rs")
}

/// What is wrong with one file, if anything, given its name relative to the workspace, its text,
/// and the files allowed over the limit with their caps.
fn problems(name: &str, text: &str, over_limit: &[(&str, usize)]) -> Vec<String> {
    let mut found = Vec::new();
    let opening = text.lines().find(|line| !line.trim().is_empty());
    if !opening.is_some_and(|line| line.starts_with("//!")) {
        found.push(format!(
            "{name}: does not open with a `//!` module doc saying what it holds"
        ));
    }
    let lines = text.lines().count();
    if !is_test_file(name) {
        match over_limit.iter().find(|(listed, _)| *listed == name) {
            Some((_, cap)) if lines > *cap => found.push(format!(
                "{name}: {lines} lines, over the {cap} it was allowed when it was listed in \
                 OVER_LIMIT; split it, or at least do not grow it"
            )),
            Some(_) => {}
            None if lines > MAX_LINES => found.push(format!(
                "{name}: {lines} lines, over the {MAX_LINES} a source file may have; split it \
                 by concern"
            )),
            None => {}
        }
    }
    found
}

#[test]
fn every_source_file_opens_with_a_module_doc_and_stays_under_the_size_limit() {
    let root = workspace();
    let files = source_files(&root);
    assert!(
        files
            .iter()
            .any(|(name, _)| name == "crates/core/src/lib.rs"),
        "the walk found no crates/core/src/lib.rs under {}",
        root.display()
    );
    let mut failures = Vec::new();
    for (name, path) in &files {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        failures.extend(problems(name, &text, OVER_LIMIT));
    }
    // An entry the list no longer needs: the file is gone or back under the limit.
    for (listed, _) in OVER_LIMIT {
        let lines = files
            .iter()
            .find(|(name, _)| name == listed)
            .map(|(_, path)| {
                std::fs::read_to_string(path)
                    .map(|text| text.lines().count())
                    .unwrap_or(0)
            });
        match lines {
            None => failures.push(format!(
                "{listed}: listed in OVER_LIMIT but not found; remove its entry"
            )),
            Some(lines) if lines <= MAX_LINES => failures.push(format!(
                "{listed}: {lines} lines, under the limit now; remove its entry from OVER_LIMIT"
            )),
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} source files break the tidiness rules:\n  {}",
        failures.len(),
        files.len(),
        failures.join("\n  ")
    );
}

#[test]
fn the_rules_name_what_they_refuse() {
    let check = |name: &str, text: &str| problems(name, text, &[("crates/x/src/big.rs", 900)]);
    let lines = |n: usize| format!("//! A doc.\n{}", "fn f() {}\n".repeat(n - 1));
    assert!(check("crates/x/src/a.rs", "//! A doc.\nfn f() {}\n").is_empty());
    assert!(check("crates/x/src/a.rs", "\n//! After a blank line.\n").is_empty());
    let undocumented = check("crates/x/src/a.rs", "// A plain comment.\nfn f() {}\n");
    assert_eq!(undocumented.len(), 1);
    assert!(undocumented[0].starts_with("crates/x/src/a.rs: does not open"));
    assert_eq!(
        check("crates/x/src/a.rs", "").len(),
        1,
        "an empty file has no doc"
    );
    assert!(check("crates/x/src/a.rs", &lines(MAX_LINES)).is_empty());
    let too_long = check("crates/x/src/a.rs", &lines(MAX_LINES + 1));
    assert_eq!(too_long.len(), 1);
    assert!(too_long[0].contains("801 lines"), "{too_long:?}");
    // Tests may be as long as they need.
    assert!(check("crates/x/src/a/tests.rs", &lines(2000)).is_empty());
    assert!(check("crates/x/src/tests/a.rs", &lines(2000)).is_empty());
    // A listed file may stay as it was listed, or shrink, but not grow.
    assert!(check("crates/x/src/big.rs", &lines(900)).is_empty());
    let grown = check("crates/x/src/big.rs", &lines(901));
    assert_eq!(grown.len(), 1);
    assert!(grown[0].contains("OVER_LIMIT"), "{grown:?}");
}
