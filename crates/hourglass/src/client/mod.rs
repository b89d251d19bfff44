//! The client half of the binary: thin commands over the HTTP API that print its answers, as
//! JSON or as tables (`--output`).
//!
//! This file holds how a command reaches a node (flags over a profile, the request and its
//! refusals); `output.rs` how answers are printed; one file per command group: `jobs.rs` (with
//! `job_fields.rs`, a job's fields as flags), `queues.rs`, `dead_letters.rs`, and `node.rs` (the
//! signing secret, breakers, connections and nodes).

mod dead_letters;
mod job_fields;
mod jobs;
mod node;
mod output;
mod queues;

use clap::Args;
use serde_json::Value;

use crate::views::View;

pub use self::dead_letters::{DEAD_LETTER_EXAMPLES, DeadLetterArgs, dead_letters};
pub use self::jobs::{JobArgs, job};
pub use self::node::{SigningSecretArgs, breakers, connections, nodes, signing_secret};
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
    /// The typed client from `hourglass-client`, for the commands built on it.
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

/// Sends a request and prints its answer.
async fn call(
    conn: &Endpoint,
    out: Output,
    view: View,
    method: reqwest::Method,
    path: String,
    body: Option<Value>,
) -> anyhow::Result<()> {
    let text = send(conn, method, &path, body).await?;
    out.body(view, &text);
    Ok(())
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

impl Refused {
    /// From an error answer: the API's `{"error": {...}}` body, or whatever a proxy sent.
    fn from_answer(status: u16, text: &str) -> Self {
        let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let error = &body["error"];
        let text_of = |v: &Value| v.as_str().map(str::to_owned);
        match text_of(&error["code"]) {
            Some(code) => Refused {
                status,
                code: Some(code),
                message: text_of(&error["message"]).unwrap_or_default(),
                field: text_of(&error["field"]),
            },
            None => Refused {
                status,
                code: None,
                message: text.trim().chars().take(200).collect(),
                field: None,
            },
        }
    }
}

/// The node could not be reached at all: the URL, and why.
#[derive(Debug)]
pub struct Unreachable {
    url: String,
    source: reqwest::Error,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot reach {}", self.url)
    }
}

impl std::error::Error for Unreachable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Sends a request and returns the body of a successful answer; an error answer fails the
/// command with a [`Refused`].
async fn send(
    conn: &Endpoint,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!("{}{}", conn.url.trim_end_matches('/'), path);
    let writes = matches!(
        method,
        reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
    );
    let mut request = client.request(method, &url);
    if let Some(key) = &conn.api_key {
        request = request.bearer_auth(key);
    }
    if let Some(ns) = &conn.namespace {
        request = request.header("hourglass-namespace", ns);
    }
    match body {
        Some(body) => request = request.json(&body),
        // The node wants the JSON type on every write, also without a body (pause, trigger,
        // signing-secret).
        None if writes => request = request.header("content-type", "application/json"),
        None => {}
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(source) => return Err(Unreachable { url, source }.into()),
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() {
        Ok(text)
    } else {
        Err(Refused::from_answer(status.as_u16(), &text).into())
    }
}
