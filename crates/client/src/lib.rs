//! A client for Hourglass: [`Client`], a typed handle on the HTTP API (jobs, pull queues, dead
//! letters), and [`Worker`], a runtime that leases messages from a queue and runs async handlers
//! for them.
//!
//! ```no_run
//! use hourglass_client::{Client, HandlerError, Job, Worker};
//!
//! #[derive(serde::Deserialize)]
//! struct SendEmail {
//!     to: String,
//! }
//!
//! # async fn demo() -> Result<(), hourglass_client::Error> {
//! let client = Client::new("http://127.0.0.1:7070")?;
//! let worker = Worker::builder(client, "emails")
//!     .concurrency(16)
//!     .handle("email.send", |job: Job<SendEmail>| async move {
//!         println!("sending to {}", job.payload.to);
//!         Ok::<(), HandlerError>(())
//!     })
//!     .build()?;
//! worker.run(async { tokio::signal::ctrl_c().await.ok(); }).await
//! # }
//! ```
//!
//! [`Client`] has one method per operation of the API ([`OPERATIONS`] lists them with their
//! routes). The shapes it sends and reads back are the API contract's (`hourglass_api`,
//! re-exported as [`api`]); builders with Rust's types ([`NewJob`], [`Schedule`],
//! [`LeaseOptions`], ...) make the common requests and turn into those shapes.
//!
//! **Architecture Invariant:** this crate knows the API only as JSON over HTTP; of Hourglass it
//! depends on the contract crate `hourglass-api` alone (nothing of the server, engine or store),
//! so it can be published and versioned with the contract.

mod client;
mod error;
mod operations;
mod types;
pub mod worker;

pub use client::Client;
pub use error::{Error, STALE_RECEIPT};
/// The API contract: every request and answer shape, the error body and its codes.
pub use hourglass_api as api;
pub use hourglass_api::Payload;
pub use operations::{OPERATIONS, Operation};
pub use types::{
    BulkAction, Callback, DeadLetter, DeadLetterPage, JobFilter, JobInfo, JobPage, JobRef,
    JobState, LeaseOptions, Message, MessageStatus, Misfire, NewJob, Node, Overlap, QueueMessage,
    QueueMessagePage, QueueStats, Receipt, ReceiptFailure, ReceiptResults, Retry, Run, RunOutcome,
    RunPage, Schedule, SigningSecret, Target,
};
pub use worker::{HandlerError, HandlerResult, Job, Worker, WorkerBuilder};
