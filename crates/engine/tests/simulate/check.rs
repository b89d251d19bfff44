//! The invariants checked after each run, against what receivers saw, what clients were told and
//! what the store holds at the end:
//!
//! 1. **Never early**: every send happens when the sending node's clock has reached the due time
//!    (and, in true time, no earlier than the due time less the largest clock skew).
//! 2. **At least once**: every job whose create was acknowledged, and that no client tried to
//!    cancel, was sent at least once.
//! 3. **Fenced**: nothing is sent after a cancel the store acknowledged, and no older version of
//!    a job's payload is sent after an edit the store acknowledged (but by an occurrence an
//!    `allow` job handed off before: an edit does not reach those, a cancel does).
//! 4. **Attempts never decrease** among one occurrence's sends (of one payload version).
//! 5. **History matches the receivers**: every run the store recorded is a send the receiver
//!    saw, with the answer its outcome says; every dead letter is a send answered with a
//!    failure; an occurrence has at most one final run (delivered or dead-lettered); a failed job
//!    has its dead letter.
//! 6. **One lease at a time**: the store grants a claim of a job only once every earlier claim
//!    of it has ended (settled or handed back), been fenced by an edit or a transition, or seen
//!    its lease run out — within the two nodes' clock skews, since a lease is written on one
//!    node's clock and judged on another's.

use std::collections::{BTreeMap, HashMap, HashSet};

use hourglass_core::{JobId, JobState};
use hourglass_store::{JobQuery, MemoryStore, RunOutcome, Store};

use crate::NAMESPACE;
use crate::world::{Answer, BASE_MS, LeaseEvent, World};

/// An instant as the timeline shows it: ms since the run began (true time).
fn rel(ms: i64) -> String {
    format!("t+{}", ms - BASE_MS)
}

pub async fn invariants(world: &World, store: &MemoryStore) -> Vec<String> {
    // What the store holds at the end, read before the log is locked.
    let query = JobQuery {
        namespace: Some(NAMESPACE.into()),
        limit: 100_000,
        ..JobQuery::default()
    };
    let jobs = store.list_jobs(query).await.expect("memory store");
    let letters = store
        .dead_letters(Some(NAMESPACE), None, 100_000)
        .await
        .expect("memory store");
    let mut runs_of = HashMap::new();
    for job in &jobs {
        let runs = store
            .runs(Some(NAMESPACE), job.id, None, 100_000)
            .await
            .expect("memory store");
        runs_of.insert(job.id, runs);
    }
    let log = world.log.lock().unwrap();
    let mut bad = Vec::new();
    let sends = &log.sends;

    for s in sends {
        if s.node_ms < s.due_ms {
            bad.push(format!(
                "early: job {} due {} sent by node {} at its {} (attempt {})",
                s.job_id,
                rel(s.due_ms),
                s.node,
                rel(s.node_ms),
                s.attempt
            ));
        }
        if s.true_ms < s.due_ms - crate::MAX_SKEW_MS {
            bad.push(format!(
                "early beyond skew: job {} due {} sent at true {}",
                s.job_id,
                rel(s.due_ms),
                rel(s.true_ms)
            ));
        }
    }

    let mut sent: HashMap<JobId, Vec<usize>> = HashMap::new();
    for (i, s) in sends.iter().enumerate() {
        sent.entry(s.job_id).or_default().push(i);
    }
    for (id, facts) in &log.jobs {
        let mine = sent.get(id).map(Vec::as_slice).unwrap_or_default();
        if facts.create_acked_ms.is_some() && !facts.cancel_tried && mine.is_empty() {
            bad.push(format!("lost: job {id} was acknowledged and never sent"));
        }
        for &i in mine {
            let s = &sends[i];
            if let Some(at) = facts.cancel_acked_ms
                && s.true_ms > at
            {
                bad.push(format!(
                    "sent after cancel: job {id} cancel acknowledged at {}, node {} sent attempt {} at {}",
                    rel(at), s.node, s.attempt, rel(s.true_ms)
                ));
            }
            for &(version, at) in &facts.edits_acked {
                // An edit does not reach an occurrence an `allow` job already handed off
                // (README, Overlap and backfill); a cancel does, and is checked above.
                if s.true_ms > at && s.version < version && !s.handed_off {
                    bad.push(format!(
                        "sent after edit: job {id} v{version} acknowledged at {}, node {} sent v{} at {}",
                        rel(at), s.node, s.version, rel(s.true_ms)
                    ));
                }
            }
        }
    }

    let mut last_attempt: HashMap<(JobId, i64, u32), (u32, i64)> = HashMap::new();
    let mut by_time: Vec<usize> = (0..sends.len()).collect();
    by_time.sort_by_key(|&i| (sends[i].true_ms, i));
    for i in by_time {
        let s = &sends[i];
        let key = (s.job_id, s.due_ms, s.version);
        if let Some(&(before, at)) = last_attempt.get(&key)
            && s.attempt < before
        {
            bad.push(format!(
                "attempts went back: job {} due {} attempt {before} sent at {}, then attempt {} by node {} at {}",
                s.job_id, rel(s.due_ms), rel(at), s.attempt, s.node, rel(s.true_ms)
            ));
        }
        last_attempt.insert(key, (s.attempt, s.true_ms));
    }

    bad.extend(exclusive_leases(&log.leases));

    // What receivers answered, by (job, due, attempt).
    let mut answers: HashMap<(JobId, i64, u32), HashSet<Answer>> = HashMap::new();
    for s in sends {
        answers
            .entry((s.job_id, s.due_ms, s.attempt))
            .or_default()
            .insert(s.answer);
    }
    let mut lettered: HashSet<JobId> = HashSet::new();
    for letter in &letters {
        lettered.insert(letter.job_id);
        let seen = answers.get(&(letter.job_id, letter.due.as_millisecond(), letter.attempts));
        if !seen.is_some_and(|a| a.contains(&Answer::Fail) || a.contains(&Answer::Gone)) {
            bad.push(format!(
                "dead letter without a failed send: job {} due {} attempts {} (receivers saw {seen:?})",
                letter.job_id,
                rel(letter.due.as_millisecond()),
                letter.attempts
            ));
        }
    }
    for job in &jobs {
        // A job delivering an `allow` job's occurrence letters it under that job.
        let letters_under = job.spec.occurrence_of.map_or(job.id, |of| of.job_id);
        if job.state == JobState::Failed && !lettered.contains(&letters_under) {
            bad.push(format!("failed without a dead letter: job {}", job.id));
        }
        let runs = runs_of.remove(&job.id).unwrap_or_default();
        let mut finals: BTreeMap<i64, u32> = BTreeMap::new();
        for run in runs {
            let due = run.due.as_millisecond();
            let fits: &[Answer] = match run.outcome {
                RunOutcome::Delivered => &[Answer::Ok],
                RunOutcome::Retry => &[Answer::Fail],
                RunOutcome::DeadLetter => &[Answer::Fail, Answer::Gone],
                RunOutcome::Skipped => continue,
            };
            if matches!(run.outcome, RunOutcome::Delivered | RunOutcome::DeadLetter) {
                *finals.entry(due).or_default() += 1;
            }
            let seen = answers.get(&(job.id, due, run.attempt));
            if !seen.is_some_and(|a| fits.iter().any(|f| a.contains(f))) {
                bad.push(format!(
                    "run without its send: job {} due {} attempt {} recorded {:?}, receivers saw {seen:?}",
                    job.id, rel(due), run.attempt, run.outcome
                ));
            }
        }
        for (due, count) in finals {
            if count > 1 {
                bad.push(format!(
                    "occurrence ended {count} times: job {} due {}",
                    job.id,
                    rel(due)
                ));
            }
        }
    }
    bad
}

/// Invariant 6 over the store's claim events in commit order.
fn exclusive_leases(events: &[LeaseEvent]) -> Vec<String> {
    // Each job's live claims: token -> (node, lease end).
    let mut live: HashMap<JobId, BTreeMap<i64, (usize, i64)>> = HashMap::new();
    let mut bad = Vec::new();
    for event in events {
        match *event {
            LeaseEvent::Granted {
                node,
                job,
                token,
                at,
                until,
            } => {
                let claims = live.entry(job).or_default();
                for (&held, &(holder, end)) in claims.range(..token) {
                    if end > at + 2 * crate::MAX_SKEW_MS {
                        bad.push(format!(
                            "two leases at once: job {job} claimed by node {node} at {} (token \
                             {token}) while node {holder}'s claim (token {held}) held it until {}",
                            rel(at),
                            rel(end)
                        ));
                    }
                }
                claims.insert(token, (node, until));
            }
            LeaseEvent::Renewed { job, token, until } => {
                if let Some(claim) = live.get_mut(&job).and_then(|c| c.get_mut(&token)) {
                    claim.1 = until;
                }
            }
            LeaseEvent::Ended { job, token } => {
                if let Some(claims) = live.get_mut(&job) {
                    claims.remove(&token);
                }
            }
            LeaseEvent::Fenced { job } => {
                live.remove(&job);
            }
        }
    }
    bad
}

/// One line on what a run did, to see that its faults and races happened.
pub fn summary(world: &World) -> String {
    let log = world.log.lock().unwrap();
    let jobs = log.jobs.values();
    let acked = jobs.clone().filter(|f| f.create_acked_ms.is_some()).count();
    let cancels = jobs.clone().filter(|f| f.cancel_acked_ms.is_some()).count();
    let edits: usize = jobs.map(|f| f.edits_acked.len()).sum();
    let count = |word: &str| log.timeline.iter().filter(|l| l.contains(word)).count();
    let answered = |a: Answer| log.sends.iter().filter(|s| s.answer == a).count();
    // A digest of every send (what, by whom, when): equal digests, the same run.
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    for s in &log.sends {
        std::hash::Hash::hash(
            &(s.node, s.job_id, s.due_ms, s.attempt, s.true_ms),
            &mut digest,
        );
    }
    format!(
        "{} jobs created ({acked} acknowledged), {cancels} cancels and {edits} edits acknowledged, \
         {} sends ({} failed, {} gone), {} crashes, {} stalls; sends digest {:016x}",
        log.jobs.len(),
        log.sends.len(),
        answered(Answer::Fail),
        answered(Answer::Gone),
        count("crashes"),
        count("stalls"),
        std::hash::Hasher::finish(&digest),
    )
}
