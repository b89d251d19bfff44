//! Records the git commit the binary is built from, for `hourglass --version`: the short hash
//! from `git rev-parse --short HEAD`, or "unknown" when there is no git or no repository (a
//! source tarball, `cargo install` from a copy).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HOURGLASS_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when HEAD moves: a checkout changes HEAD, a commit changes the branch's ref (a
    // loose file, or packed-refs after `git gc`). Paths are absolute, worktrees included.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        if let (Some(common), Some(head_ref)) = (
            git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]),
            git(&["symbolic-ref", "-q", "HEAD"]),
        ) {
            let common = Path::new(&common);
            println!(
                "cargo:rerun-if-changed={}",
                common.join(&head_ref).display()
            );
            println!(
                "cargo:rerun-if-changed={}",
                common.join("packed-refs").display()
            );
        }
    }
}
