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
//! /tmp at start (the only writable place in a function). A secrets key wrapped by AWS KMS
//! (`HOURGLASS_SECRETS_KEY_KMS`) is unwrapped once per execution environment, at its cold start,
//! with the function's role.

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

async fn settings() -> anyhow::Result<config::Settings> {
    let mut args = vec!["bootstrap".to_owned()];
    if let Ok(toml) = std::env::var("HOURGLASS_CONFIG_TOML") {
        let path = std::env::temp_dir().join("hourglass.toml");
        std::fs::write(&path, toml).context("cannot write HOURGLASS_CONFIG_TOML to /tmp")?;
        args.extend(["--config".to_owned(), path.display().to_string()]);
    }
    let parsed = FunctionSettings::try_parse_from(args).context("function settings")?;
    config::resolve(parsed.serve).await
}

pub async fn run() -> anyhow::Result<()> {
    let handler = std::env::var("_HANDLER").unwrap_or_default();
    let settings = settings().await?;
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

/// How long a tick invocation runs: `window`, cut so that [`DEADLINE_MARGIN`] is left before
/// the invocation's deadline (`deadline_ms`, Unix milliseconds, from the Runtime API's
/// `Lambda-Runtime-Deadline-Ms`).
///
/// A deadline that had already passed when the invocation arrived is not one Lambda sets (it
/// ends an invocation at its deadline, so none arrives after it): local Runtime API emulators
/// send a placeholder instead (`cargo lambda watch` sends 600,000, ten minutes after the epoch).
/// The window then stands alone; the emulator's own timeout bounds the invocation.
fn tick_window(window: Duration, deadline_ms: u64, now_ms: i64) -> Duration {
    match i64::try_from(deadline_ms) {
        Ok(deadline) if deadline <= now_ms => window,
        Ok(deadline) => {
            let left = Duration::from_millis(deadline.abs_diff(now_ms));
            window.min(left.saturating_sub(DEADLINE_MARGIN))
        }
        // Past i64 milliseconds (292 million years): no limit worth the name.
        Err(_) => window,
    }
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
            let deadline_ms = event.context.deadline;
            let now_ms = SystemClock.now().as_millisecond();
            let window = tick_window(window, deadline_ms, now_ms);
            if i64::try_from(deadline_ms).is_ok_and(|deadline| deadline <= now_ms) {
                tracing::warn!(
                    deadline_ms,
                    "the invocation's deadline had passed when it arrived, which Lambda never \
                     does (a local Runtime API emulator's placeholder?): running the whole window"
                );
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_000_000_000;
    const WINDOW: Duration = Duration::from_secs(60);

    fn at(offset: Duration) -> u64 {
        u64::try_from(NOW).unwrap() + u64::try_from(offset.as_millis()).unwrap()
    }

    #[test]
    fn a_tick_keeps_its_window_when_the_deadline_leaves_room_for_it_and_the_margin() {
        // The template's function: a 90 s timeout for a 60 s window.
        let window = tick_window(WINDOW, at(Duration::from_secs(90)), NOW);
        assert_eq!(window, WINDOW);
    }

    #[test]
    fn a_tick_is_cut_short_to_end_the_margin_before_a_near_deadline() {
        let window = tick_window(WINDOW, at(Duration::from_millis(40_500)), NOW);
        assert_eq!(window, Duration::from_millis(40_500) - DEADLINE_MARGIN);
    }

    #[test]
    fn a_tick_with_less_than_the_margin_left_does_not_start_its_window() {
        let window = tick_window(WINDOW, at(DEADLINE_MARGIN - Duration::from_millis(1)), NOW);
        assert_eq!(window, Duration::ZERO);
        let window = tick_window(WINDOW, at(DEADLINE_MARGIN), NOW);
        assert_eq!(window, Duration::ZERO);
    }

    #[test]
    fn a_deadline_already_past_on_arrival_is_a_placeholder_and_the_window_stands_alone() {
        // cargo lambda watch's fixed Lambda-Runtime-Deadline-Ms.
        assert_eq!(tick_window(WINDOW, 600_000, NOW), WINDOW);
        assert_eq!(tick_window(WINDOW, at(Duration::ZERO), NOW), WINDOW);
        assert_eq!(tick_window(WINDOW, 0, NOW), WINDOW);
        assert_eq!(tick_window(WINDOW, u64::MAX, NOW), WINDOW);
    }
}
