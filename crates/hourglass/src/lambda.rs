//! The serverless functions: the same binary, started by AWS Lambda as `bootstrap` with no
//! arguments. The function's `Handler` setting (Lambda passes it as `_HANDLER`) picks the role:
//!
//! - `api`: the node's HTTP API on the store ([`hourglass_server::ApiOnly`]: the same routes,
//!   auth and validation as `hourglass serve`, no engine), behind API Gateway's HTTP API or a
//!   function URL. When a request makes something due before the next scheduled tick, the
//!   function invokes the tick function asynchronously before it answers (a frozen function
//!   would send it late), at most once per [`WAKE_SPACING`].
//! - `tick`: [`hourglass_server::tick`] for `HOURGLASS_TICK_WINDOW`, cut short so that the
//!   shutdown (handing back unfired claims) ends before the invocation's deadline.
//!
//! Settings are `hourglass serve`'s environment variables (`HOURGLASS_STORE`, ...), and the
//! config file's content in `HOURGLASS_CONFIG_TOML` (API keys, connections, quotas), written to
//! /tmp at start (the only writable place in a function).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use hourglass_core::{Clock, SystemClock};
use jiff::Timestamp;
use lambda_http::lambda_runtime::{self, LambdaEvent};
use serde_json::{Value, json};

use crate::config;

/// Whether this process was started by Lambda as a function's bootstrap.
pub fn started_by_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() && std::env::args_os().len() == 1
}

/// A job due sooner than this from now makes the API function start a tick: the scheduled tick
/// comes every minute.
const TICK_PERIOD: Duration = Duration::from_secs(60);
/// The API function starts a tick at most this often: a running tick takes what became due
/// meanwhile (its poller re-reads the due index every second).
pub const WAKE_SPACING: Duration = Duration::from_secs(10);
/// What a tick leaves before its invocation's deadline for the shutdown to finish.
const DEADLINE_MARGIN: Duration = Duration::from_secs(15);

#[derive(Parser)]
struct FunctionSettings {
    #[command(flatten)]
    serve: config::ServeArgs,
}

fn settings() -> anyhow::Result<config::Settings> {
    let mut args = vec!["bootstrap".to_owned()];
    if let Ok(toml) = std::env::var("HOURGLASS_CONFIG_TOML") {
        let path = std::env::temp_dir().join("hourglass.toml");
        std::fs::write(&path, toml).context("cannot write HOURGLASS_CONFIG_TOML to /tmp")?;
        args.extend(["--config".to_owned(), path.display().to_string()]);
    }
    let parsed = FunctionSettings::try_parse_from(args).context("function settings")?;
    config::resolve(parsed.serve)
}

pub async fn run() -> anyhow::Result<()> {
    let handler = std::env::var("_HANDLER").unwrap_or_default();
    let settings = settings()?;
    crate::init_logging(&config::LogFormat::Json);
    match handler.as_str() {
        "api" => api(settings).await,
        "tick" => tick(settings).await,
        other => bail!("unknown handler {other:?}: set the function's Handler to api or tick"),
    }
}

/// Starts ticks for the API function: collects what its requests made due, and invokes the
/// tick function once the request is answered... before the answer leaves the function.
struct TickStarter {
    clock: Arc<dyn Clock>,
    /// The earliest due time heard since the last flush.
    pending: Mutex<Option<Timestamp>>,
    last_start: Mutex<Option<tokio::time::Instant>>,
    lambda: Option<(aws_sdk_lambda::Client, String)>,
}

impl hourglass_engine::DueHook for TickStarter {
    fn due(&self, at: Timestamp) {
        if at >= self.clock.now() + TICK_PERIOD {
            return;
        }
        if let Ok(mut pending) = self.pending.lock() {
            *pending = Some(pending.map_or(at, |p| p.min(at)));
        }
    }
}

impl TickStarter {
    async fn flush(&self) {
        let Some(at) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
            return;
        };
        let Some((client, function)) = &self.lambda else {
            tracing::warn!(%at, "a job is due before the next tick and HOURGLASS_TICK_FUNCTION is not set");
            return;
        };
        {
            let Ok(mut last) = self.last_start.lock() else {
                return;
            };
            if last.is_some_and(|l| l.elapsed() < WAKE_SPACING) {
                return;
            }
            *last = Some(tokio::time::Instant::now());
        }
        let invoked = client
            .invoke()
            .function_name(function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
            .payload(aws_sdk_lambda::primitives::Blob::new(
                json!({"trigger": "api", "due": at.to_string()}).to_string(),
            ))
            .send()
            .await;
        match invoked {
            Ok(_) => tracing::info!(%at, "started a tick"),
            Err(e) => tracing::warn!(
                error = %aws_sdk_lambda::error::DisplayErrorContext(&e),
                "cannot start a tick; the scheduled one will fire the job late"
            ),
        }
    }
}

async fn api(settings: config::Settings) -> anyhow::Result<()> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let lambda = match std::env::var("HOURGLASS_TICK_FUNCTION") {
        Ok(function) if !function.is_empty() => {
            let connection: hourglass_targets::ConnectionConfig =
                serde_json::from_value(json!({"kind": "lambda"}))
                    .context("the tick function's client")?;
            let sdk = hourglass_targets::sdk_config(&connection, Duration::from_secs(3)).await;
            Some((aws_sdk_lambda::Client::new(&sdk), function))
        }
        _ => None,
    };
    let starter = Arc::new(TickStarter {
        clock: clock.clone(),
        pending: Mutex::new(None),
        last_start: Mutex::new(None),
        lambda,
    });
    let api = hourglass_server::ApiOnly::start(settings.node, clock, starter.clone())
        .await
        .context("cannot start the API")?;
    let router = api.router.clone().layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let starter = starter.clone();
            async move {
                let response = next.run(request).await;
                starter.flush().await;
                response
            }
        },
    ));
    let served = lambda_http::run(router).await;
    api.shutdown().await;
    served.map_err(|e| anyhow::anyhow!("lambda runtime: {e}"))
}

async fn tick(settings: config::Settings) -> anyhow::Result<()> {
    let window = std::env::var("HOURGLASS_TICK_WINDOW")
        .ok()
        .map(|w| hourglass_core::duration::parse_duration(&w, "HOURGLASS_TICK_WINDOW"))
        .transpose()
        .map_err(|e| anyhow::anyhow!("HOURGLASS_TICK_WINDOW: {}", e.message))?
        .unwrap_or(Duration::from_secs(60));
    let node = settings.node;
    let handler = lambda_runtime::service_fn(move |event: LambdaEvent<Value>| {
        let node = node.clone();
        async move {
            // The window, cut to what the invocation has left.
            let left = event
                .context
                .deadline()
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .ok()
                .and_then(|deadline| {
                    let now = SystemClock.now().as_millisecond();
                    let left = deadline.as_millis() as i64 - now;
                    Duration::from_millis(left.max(0) as u64).checked_sub(DEADLINE_MARGIN)
                })
                .unwrap_or(Duration::ZERO);
            let window = window.min(left);
            // Lambda ends an invocation by its deadline, which the window already respects.
            let outcome =
                hourglass_server::tick(node, Arc::new(SystemClock), window, std::future::pending())
                    .await
                    .map_err(|e| lambda_runtime::Error::from(e.to_string()))?;
            Ok::<_, lambda_runtime::Error>(match outcome {
                hourglass_server::TickOutcome::Idle => json!({"outcome": "idle"}),
                hourglass_server::TickOutcome::Ran(ran) => {
                    json!({"outcome": "ran", "seconds": ran.as_secs_f64()})
                }
                hourglass_server::TickOutcome::Stopped(ran) => {
                    json!({"outcome": "stopped", "seconds": ran.as_secs_f64()})
                }
            })
        }
    });
    lambda_runtime::run(handler)
        .await
        .map_err(|e| anyhow::anyhow!("lambda runtime: {e}"))
}
