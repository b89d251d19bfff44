//! The binary's integration tests: each one starts real `hourglass serve` processes, because a
//! process boundary is what it is about (SIGKILL, SIGTERM, SIGSTOP, several nodes on one
//! PostgreSQL, the binary's own log output). What needs only a node and HTTP lives in the server
//! crate's API suite (`crates/server/tests/api`).
//!
//! The soaks, whose point is volume or a long outage, are compiled in only with the `soak`
//! feature (`scripts/test --features hourglass/soak`, which CI runs); the default run has a small
//! version of each.

mod support;

mod anchors;
mod backfill;
mod backup;
mod cli;
mod crash;
mod listen;
mod logs;
mod multinode;
mod overlap;
mod pg_outage;
mod sealed;
mod sealed_kms;
mod serverless;
mod targets;
mod tls;
mod upgrade;
mod version;
