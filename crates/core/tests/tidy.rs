//! The workspace's tidiness rules, checked over every `crates/*/src/**/*.rs` file:
//!
//! - every source file opens with a `//!` module doc saying what it holds;
//! - no source file is over 800 lines, except test files (under a `tests/` directory or named
//!   `tests.rs`) and the files on [`OVER_LIMIT`], which may not grow;
//! - no two top-level modules of a crate reach each other, directly or around a loop: a crate's
//!   modules form layers, each a leaf or reading only the ones below it. A module is a file
//!   `src/x.rs` or a directory `src/x/` (with what is under it); it reaches another where its
//!   code (not its comments) names `crate::other` or `crate::{other::…}`. Paths through the
//!   crate root's re-exports are not followed.
//!
//! A failure names every file that breaks a rule, and how.

use std::collections::{BTreeMap, BTreeSet};
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

/// A top-level module reaching another: `from` names `crate::to` at `place` (file:line).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    place: String,
}

/// The crate and top-level module a source file belongs to (`crates/server/src/api/others.rs` is
/// `("server", "api")`); `None` for the crate root (`lib.rs`, `main.rs`), which declares the
/// modules and reaches them all.
fn crate_and_module(name: &str) -> Option<(&str, &str)> {
    let mut parts = name.split('/');
    let (Some("crates"), Some(krate), Some("src"), Some(first)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    match first {
        "lib.rs" | "main.rs" => None,
        file => Some((krate, file.strip_suffix(".rs").unwrap_or(file))),
    }
}

/// The first identifier of `text`, if it starts with one.
fn leading_ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The modules a file's code names through `crate::`, each with the line it is named on.
/// Comment lines are skipped; a group `crate::{a::X, b, c::{…}}` names `a`, `b` and `c`.
fn named_modules(text: &str) -> Vec<(String, usize)> {
    // The code, with whole-line comments blanked, so that a group may span lines.
    let code: String = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                "\n".to_string()
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at + "crate::".len();
        from = start;
        let rest = &code[start..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split on commas outside nested braces.
            let mut depth = 0usize;
            let mut item_start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push((group[item_start..i].trim().to_string(), start));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push((group[item_start..i].trim().to_string(), start));
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push((rest.to_string(), start));
        }
    }
    found
        .into_iter()
        .map(|(item, at)| (leading_ident(&item).to_string(), line_of(at)))
        .filter(|(ident, _)| !ident.is_empty())
        .collect()
}

/// Every edge between two top-level modules of the same crate, from the workspace's sources
/// (`(name, text)` pairs), by crate.
fn module_edges<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, BTreeSet<Edge>> {
    let sources: Vec<(&str, &str)> = sources.into_iter().collect();
    let mut modules: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, _) in &sources {
        if let Some((krate, module)) = crate_and_module(name) {
            modules.entry(krate).or_default().insert(module);
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<Edge>> = BTreeMap::new();
    for (name, text) in &sources {
        let Some((krate, module)) = crate_and_module(name) else {
            continue;
        };
        for (to, line) in named_modules(text) {
            if to != module && modules[krate].contains(to.as_str()) {
                edges.entry(krate.to_string()).or_default().insert(Edge {
                    from: module.to_string(),
                    to,
                    place: format!("{name}:{line}"),
                });
            }
        }
    }
    edges
}

/// The loops among a crate's modules: each strongly connected set of two or more modules, with
/// the edges that hold it together.
fn cycles(edges: &BTreeSet<Edge>) -> Vec<Vec<&Edge>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for edge in edges {
        next.entry(&edge.from).or_default().insert(&edge.to);
    }
    // Two modules share a loop when each reaches the other.
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(module) = stack.pop() {
            for &to in next.get(module).into_iter().flatten() {
                if seen.insert(to) {
                    stack.push(to);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> =
        next.keys().map(|&module| (module, reach(module))).collect();
    let mut placed = BTreeSet::new();
    let mut loops = Vec::new();
    for (&module, its) in &reached {
        if placed.contains(module) || !its.contains(module) {
            continue;
        }
        let members: BTreeSet<&str> = its
            .iter()
            .copied()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(module)))
            .collect();
        placed.extend(members.iter().copied());
        loops.push(
            edges
                .iter()
                .filter(|e| members.contains(e.from.as_str()) && members.contains(e.to.as_str()))
                .collect(),
        );
    }
    loops
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = workspace();
    let sources: Vec<(String, String)> = source_files(&root)
        .into_iter()
        .map(|(name, path)| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, text)
        })
        .collect();
    let edges = module_edges(sources.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    assert!(
        edges.get("server").is_some_and(|e| !e.is_empty()),
        "found no edges between the server's modules: the scan is broken"
    );
    let mut failures = Vec::new();
    for (krate, edges) in &edges {
        for cycle in cycles(edges) {
            let lines: Vec<String> = cycle
                .iter()
                .map(|e| format!("{} -> {} ({})", e.from, e.to, e.place))
                .collect();
            failures.push(format!("crate {krate}:\n    {}", lines.join("\n    ")));
        }
    }
    assert!(
        failures.is_empty(),
        "modules that reach each other (move what both need into a module of its own, or \
         move one into the other):\n  {}",
        failures.join("\n  ")
    );
}

#[test]
fn the_cycle_check_finds_loops_and_only_loops() {
    let files = [
        (
            "crates/x/src/lib.rs",
            "//! Root.\nmod a;\nmod b;\nuse crate::a::A;\n",
        ),
        ("crates/x/src/a.rs", "//! A.\nuse crate::{b::B, c};\n"),
        (
            "crates/x/src/b/mod.rs",
            "//! B.\n// use crate::a; in a comment\n",
        ),
        (
            "crates/x/src/b/deep.rs",
            "//! Deep.\nfn f() { crate::c::go(); }\n",
        ),
        (
            "crates/x/src/c.rs",
            "//! C.\nuse crate::{\n    Root,\n    d::{D, E},\n};\n",
        ),
        ("crates/x/src/d.rs", "//! D, a leaf.\n"),
        (
            "crates/y/src/d.rs",
            "//! Another crate's d.\nuse crate::e;\n",
        ),
    ];
    let edges = module_edges(files);
    let x: Vec<(&str, &str)> = edges["x"]
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    // The root, comments, items of the root and other crates' modules make no edge.
    assert_eq!(x, [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")]);
    assert_eq!(
        edges["x"].first().map(|e| e.place.as_str()),
        Some("crates/x/src/a.rs:2")
    );
    assert!(cycles(&edges["x"]).is_empty(), "layers are no loop");
    assert!(!edges.contains_key("y"), "y has no module e");

    let mut looped = files.to_vec();
    looped[5] = (
        "crates/x/src/d.rs",
        "//! D reaches back.\nuse crate::b::deep;\n",
    );
    let edges = module_edges(looped);
    let found = cycles(&edges["x"]);
    assert_eq!(found.len(), 1, "{found:?}");
    let members: Vec<(&str, &str)> = found[0]
        .iter()
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    assert_eq!(members, [("b", "c"), ("c", "d"), ("d", "b")]);
}
