//! The client half of the binary: thin commands over the HTTP API that print its JSON answers.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// Base URL of a node.
    #[arg(
        long,
        env = "HOURGLASS_URL",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    url: String,
    /// API key (sent as a Bearer token).
    #[arg(long, env = "HOURGLASS_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Namespace to act in (admin keys and development mode).
    #[arg(long, env = "HOURGLASS_NAMESPACE", global = true)]
    namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct JobArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: JobCommand,
}

#[derive(Subcommand, Debug)]
enum JobCommand {
    /// Create a job from flags, or from a full JSON body with --json.
    Create(CreateArgs),
    Get {
        id: String,
    },
    List {
        #[arg(long)]
        state: Option<String>,
        #[arg(long = "type")]
        job_type: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        cursor: Option<String>,
    },
    Cancel {
        id: String,
    },
    Pause {
        id: String,
    },
    Resume {
        id: String,
    },
    /// Fire an extra occurrence now.
    Trigger {
        id: String,
    },
    /// Delivery attempts of a job, newest first.
    Runs {
        id: String,
    },
}

#[derive(Args, Debug)]
struct CreateArgs {
    /// The whole request body as JSON (other flags are then ignored).
    #[arg(long)]
    json: Option<String>,
    /// Webhook URL to deliver to.
    #[arg(long)]
    webhook: Option<String>,
    /// One-off at an RFC 3339 instant.
    #[arg(long)]
    at: Option<String>,
    /// One-off after a delay, e.g. 90s.
    #[arg(long)]
    after: Option<String>,
    /// Cron expression (5 fields, or 6 with seconds).
    #[arg(long)]
    cron: Option<String>,
    /// IANA time zone for --cron.
    #[arg(long)]
    timezone: Option<String>,
    /// Fixed interval, e.g. 15m.
    #[arg(long)]
    every: Option<String>,
    /// Payload JSON.
    #[arg(long)]
    payload: Option<String>,
    /// Idempotency key.
    #[arg(long)]
    key: Option<String>,
    #[arg(long = "type")]
    job_type: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeadLetterArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: DeadLetterCommand,
}

#[derive(Subcommand, Debug)]
enum DeadLetterCommand {
    List,
    Replay { id: String },
    Delete { id: String },
}

async fn call(
    conn: &Connection,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let url = format!("{}{}", conn.url.trim_end_matches('/'), path);
    let mut request = client.request(method, &url);
    if let Some(key) = &conn.api_key {
        request = request.bearer_auth(key);
    }
    if let Some(ns) = &conn.namespace {
        request = request.header("hourglass-namespace", ns);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let pretty = serde_json::from_str::<Value>(&text)
        .map(|v| serde_json::to_string_pretty(&v).unwrap_or(text.clone()))
        .unwrap_or(text);
    if status.is_success() {
        if !pretty.is_empty() {
            println!("{pretty}");
        }
        Ok(())
    } else {
        eprintln!("{pretty}");
        bail!("request failed with HTTP {status}")
    }
}

pub async fn job(args: JobArgs) -> anyhow::Result<()> {
    use reqwest::Method;
    let conn = &args.conn;
    match args.command {
        JobCommand::Create(create) => {
            call(conn, Method::POST, "/v1/jobs", Some(create_body(create)?)).await
        }
        JobCommand::Get { id } => call(conn, Method::GET, &format!("/v1/jobs/{id}"), None).await,
        JobCommand::List {
            state,
            job_type,
            limit,
            cursor,
        } => {
            let mut params = Vec::new();
            for (name, value) in [
                ("state", state),
                ("type", job_type),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ] {
                if let Some(v) = value {
                    params.push(format!("{name}={v}"));
                }
            }
            let query = if params.is_empty() {
                String::new()
            } else {
                format!("?{}", params.join("&"))
            };
            call(conn, Method::GET, &format!("/v1/jobs{query}"), None).await
        }
        JobCommand::Cancel { id } => {
            call(conn, Method::DELETE, &format!("/v1/jobs/{id}"), None).await
        }
        JobCommand::Pause { id } => {
            call(conn, Method::POST, &format!("/v1/jobs/{id}/pause"), None).await
        }
        JobCommand::Resume { id } => {
            call(conn, Method::POST, &format!("/v1/jobs/{id}/resume"), None).await
        }
        JobCommand::Trigger { id } => {
            call(conn, Method::POST, &format!("/v1/jobs/{id}/trigger"), None).await
        }
        JobCommand::Runs { id } => {
            call(conn, Method::GET, &format!("/v1/jobs/{id}/runs"), None).await
        }
    }
}

fn create_body(c: CreateArgs) -> anyhow::Result<Value> {
    if let Some(text) = c.json {
        return serde_json::from_str(&text).context("--json is not valid JSON");
    }
    let Some(url) = c.webhook else {
        bail!("give --webhook (the URL to call) or a full body with --json");
    };
    let schedule = match (c.at, c.after, c.cron, c.every) {
        (Some(at), None, None, None) => json!({"at": at}),
        (None, Some(after), None, None) => json!({"after": after}),
        (None, None, Some(cron), None) => {
            json!({"cron": cron, "timezone": c.timezone.unwrap_or_else(|| "UTC".into())})
        }
        (None, None, None, Some(every)) => json!({"every": every}),
        _ => bail!("give exactly one of --at, --after, --cron or --every"),
    };
    let mut body = json!({"schedule": schedule, "target": {"webhook": {"url": url}}});
    if let Some(payload) = c.payload {
        body["payload"] = serde_json::from_str(&payload).context("--payload is not valid JSON")?;
    }
    if let Some(key) = c.key {
        body["key"] = json!(key);
    }
    if let Some(job_type) = c.job_type {
        body["type"] = json!(job_type);
    }
    Ok(body)
}

pub async fn dead_letters(args: DeadLetterArgs) -> anyhow::Result<()> {
    use reqwest::Method;
    let conn = &args.conn;
    match args.command {
        DeadLetterCommand::List => call(conn, Method::GET, "/v1/dead-letters", None).await,
        DeadLetterCommand::Replay { id } => {
            call(
                conn,
                Method::POST,
                &format!("/v1/dead-letters/{id}/replay"),
                None,
            )
            .await
        }
        DeadLetterCommand::Delete { id } => {
            call(
                conn,
                Method::DELETE,
                &format!("/v1/dead-letters/{id}"),
                None,
            )
            .await
        }
    }
}

pub async fn rotate_secret(conn: Connection) -> anyhow::Result<()> {
    call(&conn, reqwest::Method::POST, "/v1/signing-secret", None).await
}
