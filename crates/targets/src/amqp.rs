//! AMQP 0-9-1 (RabbitMQ): a persistent message published `mandatory` on a channel in confirm
//! mode, delivered when the broker confirmed it. `message_id` is the delivery id; the
//! occurrence's facts are `hourglass-*` headers; `timestamp` is the due second. A message no queue
//! is bound to receive comes back (basic.return) and counts as a transient failure, not as
//! delivered.
//!
//! One channel per exchange: a publish to an exchange that does not exist makes the broker close
//! its channel, and that must not fail other exchanges' publishes in flight. A closed channel or
//! connection is opened again by the next delivery.

use std::collections::HashMap;
use std::time::Duration;

use hourglass_core::{AmqpTarget, Occurrence};
use hourglass_engine::Verdict;
use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::Mutex;

use crate::envelope::{HEADER_NAMES, Meta, payload};

pub struct Amqp {
    url: String,
    timeout: Duration,
    connection: Mutex<Option<Connection>>,
    channels: Mutex<HashMap<String, Channel>>,
}

impl Amqp {
    pub fn open(url: &str, timeout: Duration) -> Self {
        Self {
            url: url.to_string(),
            timeout,
            connection: Mutex::new(None),
            channels: Mutex::new(HashMap::new()),
        }
    }

    async fn channel(&self, exchange: &str) -> Result<Channel, Verdict> {
        let mut channels = self.channels.lock().await;
        if let Some(channel) = channels.get(exchange)
            && channel.status().connected()
        {
            return Ok(channel.clone());
        }
        let mut connection = self.connection.lock().await;
        if !connection.as_ref().is_some_and(|c| c.status().connected()) {
            let opened = tokio::time::timeout(
                self.timeout,
                Connection::connect(&self.url, ConnectionProperties::default()),
            )
            .await;
            *connection = Some(match opened {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(retry(format!("amqp: cannot connect: {e}"))),
                Err(_) => return Err(retry("amqp: the broker did not answer in time".into())),
            });
            // Channels of a closed connection are closed too.
            channels.clear();
        }
        let Some(conn) = connection.as_ref() else {
            return Err(retry("amqp: not connected".into()));
        };
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| retry(format!("amqp: cannot open a channel: {e}")))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| retry(format!("amqp: cannot turn on publisher confirms: {e}")))?;
        channels.insert(exchange.to_string(), channel.clone());
        Ok(channel)
    }

    pub async fn publish(&self, target: &AmqpTarget, occ: &Occurrence) -> Verdict {
        let channel = match self.channel(&target.exchange).await {
            Ok(c) => c,
            Err(verdict) => return verdict,
        };
        let meta = Meta::of(occ);
        let mut headers = FieldTable::default();
        for (name, value) in meta.pairs(&HEADER_NAMES) {
            headers.insert(
                ShortString::from(name),
                AMQPValue::LongString(LongString::from(value.as_bytes().to_vec())),
            );
        }
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from(meta.delivery_id.clone()))
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(2)
            .with_timestamp(u64::try_from(occ.due.as_second()).unwrap_or_default())
            .with_headers(headers);
        let options = BasicPublishOptions {
            mandatory: true,
            ..BasicPublishOptions::default()
        };
        let sent = async {
            let confirm = channel
                .basic_publish(
                    ShortString::from(target.exchange.as_str()),
                    ShortString::from(target.routing_key.as_str()),
                    options,
                    payload(occ).as_bytes(),
                    properties,
                )
                .await?;
            confirm.await
        };
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(Confirmation::Ack(None))) => Verdict::Delivered,
            Ok(Ok(Confirmation::Ack(Some(_returned)))) => {
                retry("amqp: the broker routed the message to no queue; it came back".into())
            }
            Ok(Ok(Confirmation::Nack(_))) => {
                retry("amqp: the broker refused the message (nack)".into())
            }
            Ok(Ok(Confirmation::NotRequested)) => {
                retry("amqp: the channel was not in confirm mode".into())
            }
            Ok(Err(e)) => {
                self.forget(&target.exchange, &channel).await;
                verdict_of(&target.exchange, &e)
            }
            Err(_) => {
                self.forget(&target.exchange, &channel).await;
                retry("amqp: no confirm within the delivery timeout".into())
            }
        }
    }

    async fn forget(&self, exchange: &str, channel: &Channel) {
        let mut channels = self.channels.lock().await;
        if channels
            .get(exchange)
            .is_some_and(|c| c.id() == channel.id())
        {
            channels.remove(exchange);
        }
    }
}

fn retry(reason: String) -> Verdict {
    Verdict::Retry {
        after: None,
        reason,
    }
}

fn verdict_of(exchange: &str, e: &lapin::Error) -> Verdict {
    let soft = match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(soft) => Some(soft.clone()),
            _ => None,
        },
        _ => None,
    };
    // A missing exchange and one the user may not write read the same, without the broker's
    // text (which names the vhost): a tenant must not learn what exists on the broker.
    match soft {
        Some(AMQPSoftError::NOTFOUND | AMQPSoftError::ACCESSREFUSED) => Verdict::GiveUp {
            reason: format!(
                "amqp: the broker refused the publish to exchange {exchange:?}: it does not exist or the connection's user may not publish to it"
            ),
        },
        Some(AMQPSoftError::CONTENTTOOLARGE) => Verdict::GiveUp {
            reason: "amqp: the message is larger than the broker takes".into(),
        },
        _ => retry(format!("amqp: {e}")),
    }
}
