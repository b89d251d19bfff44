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
//! **Architecture Invariant:** this crate knows the API only as JSON over HTTP; it depends on no
//! other Hourglass crate, so it can be published and versioned on its own.

mod client;
mod error;
mod types;
pub mod worker;

pub use client::Client;
pub use error::{Error, STALE_RECEIPT};
pub use types::{
    DeadLetter, DeadLetterPage, JobFilter, JobInfo, JobPage, JobRef, JobState, LeaseOptions,
    Message, MessageStatus, Misfire, NewJob, Node, QueueMessage, QueueMessagePage, QueueStats,
    Receipt, ReceiptFailure, ReceiptResults, Retry, Run, RunPage, Schedule, SigningSecret, Target,
};
pub use worker::{HandlerError, HandlerResult, Job, Worker, WorkerBuilder};
