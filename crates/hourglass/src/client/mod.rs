//! The client half of the binary: thin commands over the HTTP API that print its answers, as
//! JSON or as tables (`--output`). Every command calls the node through the typed client
//! (`hourglass-client`), with the API contract's request shapes: one HTTP stack.
//!
//! This file holds how a command reaches a node (flags over a profile, the client, its
//! refusals); `output.rs` how answers are printed; one file per command group: `jobs.rs` (with
//! `job_fields.rs`, a job's fields as flags), `queues.rs`, `dead_letters.rs`, `audit.rs` (the
//! audit log), and `node.rs` (the signing secret, breakers, connections and nodes).

mod audit;
mod dead_letters;
mod job_fields;
mod jobs;
mod node;
mod output;
mod queues;

use clap::Args;

pub use self::audit::{AUDIT_EXAMPLES, AuditArgs, audit};
pub use self::dead_letters::{DEAD_LETTER_EXAMPLES, DeadLetterArgs, dead_letters};
pub use self::jobs::{JobArgs, job};
pub use self::node::{
    AnchorArgs, CalendarArgs, SigningSecretArgs, anchor, breakers, calendar, connections, nodes,
    signing_secret, whoami,
};
pub use self::output::{Format, Output};
pub use self::queues::{QUEUE_EXAMPLES, QueueArgs, queue};

/// How to reach a node: flags or environment variables, over a profile of the client config file
/// (`--profile`), over the defaults.
#[derive(Args, Clone)]
pub struct Connection {
    /// Base URL of the node [default: the profile's, else http://127.0.0.1:7070].
    #[arg(long, env = "HOURGLASS_URL", global = true)]
    url: Option<String>,
    /// API key, sent as a Bearer token [default: the profile's].
    #[arg(long, env = "HOURGLASS_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Namespace to act in, for admin keys and development mode [default: the profile's, else
    /// the key's own].
    #[arg(long, env = "HOURGLASS_NAMESPACE", global = true)]
    namespace: Option<String>,
    /// Take the URL, API key and namespace from this profile of the client config file
    /// (~/.config/hourglass/client.toml, or HOURGLASS_CLIENT_CONFIG); flags and environment
    /// variables override its values.
    #[arg(long, env = "HOURGLASS_PROFILE", global = true)]
    profile: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("namespace", &self.namespace)
            .field("profile", &self.profile)
            .finish()
    }
}

const DEFAULT_URL: &str = "http://127.0.0.1:7070";

/// A node to talk to, as the flags, the environment and the profile settled it.
pub struct Endpoint {
    url: String,
    api_key: Option<String>,
    namespace: Option<String>,
}

impl Connection {
    /// Each of URL, key and namespace from its flag or environment variable, else from the
    /// profile (when one is named), else the default. A profile that cannot be read or is not
    /// in the file fails with a [`crate::profile::Usage`] error.
    pub fn resolve(&self) -> anyhow::Result<Endpoint> {
        let profile = match &self.profile {
            Some(name) => crate::profile::load(name)?,
            None => crate::profile::Profile::default(),
        };
        Ok(Endpoint {
            url: self
                .url
                .clone()
                .or(profile.url)
                .unwrap_or_else(|| DEFAULT_URL.to_string()),
            api_key: self.api_key.clone().or(profile.api_key),
            namespace: self.namespace.clone().or(profile.namespace),
        })
    }
}

impl Endpoint {
    /// The typed client from `hourglass-client`, which every command calls the node through.
    fn api_client(&self) -> anyhow::Result<hourglass_client::Client> {
        let mut client = hourglass_client::Client::new(&self.url)?;
        if let Some(key) = &self.api_key {
            client = client.api_key(key);
        }
        if let Some(ns) = &self.namespace {
            client = client.namespace(ns);
        }
        Ok(client)
    }
}

/// A refusal from the node, as the CLI reports it: one line with the status, the stable code,
/// the message and the field. `main` picks the exit code from the status.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    code: Option<String>,
    message: String,
    field: Option<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http {}", self.status)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(field) = &self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

/// The node could not be reached at all: the URL, and why.
#[derive(Debug)]
pub struct Unreachable {
    url: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach {}", self.url)
    }
}

impl std::error::Error for Unreachable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// A failure of the typed client as the CLI reports it: a refusal ([`Refused`]: status, code,
/// message, field) or an unreachable node ([`Unreachable`]); anything else (an answer that does
/// not read, a bad URL or key) as the client words it.
fn failed(e: hourglass_client::Error) -> anyhow::Error {
    use hourglass_client::Error;
    match e {
        Error::Api {
            status,
            code,
            message,
            field,
            ..
        } => Refused {
            status,
            code: Some(code),
            message,
            field,
        }
        .into(),
        // An answer without the API's error body, e.g. from a proxy in front of the node.
        Error::Http { status, url, .. } => Refused {
            status,
            code: None,
            message: format!("from {url}"),
            field: None,
        }
        .into(),
        Error::Transport { url, source } => Unreachable {
            url,
            source: Box::new(source),
        }
        .into(),
        other => other.into(),
    }
}
