//! The deterministic simulation: several engines in one process on tokio's paused clock, sharing
//! one in-memory store behind a fault layer, with seeded faults everywhere the engine meets the
//! world — the store (failed writes, writes whose answer is lost, latency), the nodes (a crash
//! that loses all of a node's memory and a restart, a stall past its leases, skewed clocks), the
//! receivers (failing, hanging, answering twice) and API clients whose edits and cancels race the
//! fire path through the `Scheduler`. After each run the invariants of `check.rs` are checked.
//!
//! Every choice the harness makes comes from the seed, and so do the engines' own random draws
//! (`hourglass_engine::random::seed_thread`): on one current-thread runtime in paused time, a seed
//! replays the same run, event for event.
//!
//! `scripts/simulate` drives it through environment variables: `HOURGLASS_SIM_SEEDS` (how many
//! seeds, from `HOURGLASS_SIM_FIRST`, default 1) or `HOURGLASS_SIM_SEED` (one seed, with its
//! timeline printed when it fails). Without them, as part of the workspace's tests, it runs
//! [`DEFAULT_SEEDS`] seeds.
//!
//! Layout: `world.rs` what a run shares (seeded choices, clocks, liveness, the log of what
//! happened), `store.rs` the fault layer, `receiver.rs` the receivers, `scenario.rs` the nodes,
//! clients and faults of one run, `check.rs` the invariants.

#![allow(
    clippy::disallowed_methods,
    reason = "the harness's nodes read tokio's paused clock, which is the simulation's true time"
)]

mod check;
mod receiver;
mod scenario;
mod store;
mod world;

/// Nodes sharing the store.
pub const NODES: usize = 3;
/// The largest clock skew of a node, either way (ms).
pub const MAX_SKEW_MS: i64 = 150;
pub const NAMESPACE: &str = "t";
/// Seeds run by a plain `cargo test`.
const DEFAULT_SEEDS: u64 = 200;

/// The payload version an occurrence carries (`v<n>`; a missing one is version 0).
pub fn version_of(payload: Option<&str>) -> u32 {
    payload
        .and_then(|p| p.strip_prefix('v'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

/// Runs one seed; answers its violations (and, when `timeline`, what happened, to read them by).
fn run_seed(seed: u64, timeline: bool) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    // The engines' own draws (retry jitter, the planner's lead) from the seed as well.
    hourglass_engine::random::seed_thread(Some(seed));
    let mut bad = runtime.block_on(async {
        let (world, store) = scenario::run(seed).await;
        if timeline {
            println!("seed {seed}: {}", check::summary(&world));
        }
        check::invariants(&world, &store).await
    });
    if timeline && !bad.is_empty() {
        bad.push("timeline:".into());
        bad.extend(run_timeline(seed));
    }
    // Dropping the runtime drops every node's tasks, crashed ones included.
    drop(runtime);
    bad
}

/// The harness's actions in seed `seed`'s run (rerun for it).
fn run_timeline(seed: u64) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    hourglass_engine::random::seed_thread(Some(seed));
    runtime.block_on(async {
        let (world, _) = scenario::run(seed).await;
        let log = world.log.lock().unwrap();
        log.timeline.clone()
    })
}

#[test]
fn simulate() {
    let (seeds, one) = match env("HOURGLASS_SIM_SEED") {
        Some(seed) => (seed..=seed, true),
        None => {
            let first = env("HOURGLASS_SIM_FIRST").unwrap_or(1);
            let count = env("HOURGLASS_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
            (first..=first + count.saturating_sub(1), false)
        }
    };
    let (mut runs, mut violations, mut failing) = (0u64, 0usize, Vec::new());
    for seed in seeds {
        let bad = run_seed(seed, one);
        runs += 1;
        if !bad.is_empty() {
            let count = bad.iter().take_while(|l| *l != "timeline:").count();
            violations += count;
            println!("seed {seed}: {count} violations");
            for line in &bad {
                println!("  {line}");
            }
            println!("  rerun: scripts/simulate --seed {seed}");
            failing.push(seed);
        }
    }
    println!("{runs} seeds, {violations} violations");
    assert!(
        failing.is_empty(),
        "{runs} seeds, {violations} violations; failing seeds {failing:?} (rerun one with scripts/simulate --seed N)"
    );
}
