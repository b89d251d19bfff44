//! Redis Streams: `XADD stream * payload <json> delivery_id ... job_id ... job_type ... due_at ...
//! attempt ...`, delivered once Redis answered the entry's id. Redis has no server-side
//! deduplication: consumers deduplicate by the `delivery_id` field. Concurrent deliveries share
//! one multiplexed connection, which pipelines their commands and reconnects by itself.

use std::time::Duration;

use hourglass_core::{Occurrence, RedisStreamTarget};
use hourglass_engine::Verdict;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::envelope::{FIELD_NAMES, Meta, payload};

pub struct Redis {
    client: redis::Client,
    timeout: Duration,
    /// Opened on first use (a server down at start only fails deliveries, transiently).
    connection: OnceCell<ConnectionManager>,
}

impl Redis {
    pub fn open(url: &str, timeout: Duration) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        Ok(Self {
            client,
            timeout,
            connection: OnceCell::new(),
        })
    }

    async fn connection(&self) -> Result<ConnectionManager, redis::RedisError> {
        self.connection
            .get_or_try_init(|| {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.timeout.min(Duration::from_secs(5))))
                    .set_response_timeout(Some(self.timeout))
                    .set_number_of_retries(1);
                self.client.get_connection_manager_with_config(config)
            })
            .await
            .cloned()
    }

    pub async fn publish(&self, target: &RedisStreamTarget, occ: &Occurrence) -> Verdict {
        let mut connection = match self.connection().await {
            Ok(c) => c,
            Err(e) => return verdict_of(&e),
        };
        let meta = Meta::of(occ);
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&target.stream)
            .arg("*")
            .arg("payload")
            .arg(payload(occ));
        for (name, value) in meta.pairs(&FIELD_NAMES) {
            cmd.arg(name).arg(value);
        }
        match cmd.query_async::<String>(&mut connection).await {
            Ok(_id) => Verdict::Delivered,
            Err(e) => verdict_of(&e),
        }
    }
}

fn verdict_of(e: &redis::RedisError) -> Verdict {
    // A key of another type (WRONGTYPE) or a command the user may not run (NOPERM) will not
    // change by retrying; an unreachable server, a timeout, OOM, LOADING, a failover or a full
    // client table will. The two permanent ones read the same, without Redis's text: a tenant
    // must not learn from a run that a key of another application exists.
    let permanent = e
        .code()
        .is_some_and(|code| matches!(code, "WRONGTYPE" | "NOPERM"));
    if permanent {
        Verdict::GiveUp {
            reason: "redis refused the entry: the key holds something other than a stream, or the connection's user may not write it".into(),
        }
    } else {
        let reason = format!("redis: {e}");
        Verdict::Retry {
            after: None,
            reason,
        }
    }
}
