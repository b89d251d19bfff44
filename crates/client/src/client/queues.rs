//! The client's pull-queue operations: lease, ack, nack and extend messages, a queue's counts,
//! every queue, a queue's messages.

use std::time::Duration;

use reqwest::Method;

use hourglass_api::{
    AckRequest, ExtendRequest, LeaseRequest, LeaseResult, NackRequest, QueueList, QueueListQuery,
    QueueMessagesQuery,
};

use super::{Client, REQUEST_TIMEOUT, Request};
use crate::error::Error;
use crate::types::{
    LeaseOptions, Message, QueueMessagePage, QueueStats, Receipt, ReceiptResults, millis,
};

impl Client {
    /// `POST /v1/queues/{name}/lease`: leases up to `options.max` messages, long-polling up to
    /// `options.wait` when none is available. An empty list means the wait ran out.
    pub async fn lease(&self, queue: &str, options: &LeaseOptions) -> Result<Vec<Message>, Error> {
        let request = Request::new(Method::POST, &["v1", "queues", queue, "lease"])
            .json(&LeaseRequest::from(options))?
            .timeout(REQUEST_TIMEOUT + options.wait);
        let answer: LeaseResult<'static> = self.send(request).await?;
        Ok(answer.messages)
    }

    /// `POST /v1/queues/{name}/ack`: completes the messages (a recurring job moves to its next
    /// occurrence).
    pub async fn ack(&self, queue: &str, receipts: &[Receipt]) -> Result<ReceiptResults, Error> {
        let body = AckRequest {
            receipts: receipts.to_vec(),
        };
        self.receipts(queue, "ack", &body).await
    }

    /// `POST /v1/queues/{name}/nack`: hands the messages back for another attempt after
    /// `delay`, or after the job's retry backoff when `None`. A message past its job's last
    /// attempt becomes a dead letter.
    pub async fn nack(
        &self,
        queue: &str,
        receipts: &[Receipt],
        delay: Option<Duration>,
    ) -> Result<ReceiptResults, Error> {
        let body = NackRequest {
            receipts: receipts.to_vec(),
            delay_ms: delay.map(millis),
        };
        self.receipts(queue, "nack", &body).await
    }

    /// `POST /v1/queues/{name}/extend`: keeps the messages invisible to other consumers for
    /// `visibility` from now.
    pub async fn extend(
        &self,
        queue: &str,
        receipts: &[Receipt],
        visibility: Duration,
    ) -> Result<ReceiptResults, Error> {
        let body = ExtendRequest {
            receipts: receipts.to_vec(),
            visibility_ms: millis(visibility),
        };
        self.receipts(queue, "extend", &body).await
    }

    async fn receipts(
        &self,
        queue: &str,
        verb: &str,
        body: &impl serde::Serialize,
    ) -> Result<ReceiptResults, Error> {
        self.send(Request::new(Method::POST, &["v1", "queues", queue, verb]).json(body)?)
            .await
    }

    /// `GET /v1/queues/{name}`: one queue's counts (zeros for a queue no job targets).
    pub async fn queue_stats(&self, queue: &str) -> Result<QueueStats, Error> {
        self.get(&["v1", "queues", queue]).await
    }

    /// `GET /v1/queues`: every queue of the namespace, by name: the pages the node answers,
    /// followed.
    pub async fn list_queues(&self) -> Result<Vec<QueueStats>, Error> {
        let mut queues = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let query = QueueListQuery {
                limit: Some(1000),
                cursor: cursor.take(),
            };
            let page: QueueList = self
                .send(Request::new(Method::GET, &["v1", "queues"]).query(&query))
                .await?;
            queues.extend(page.queues);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(queues),
            }
        }
    }

    /// `GET /v1/queues/{name}/messages`: the queue's messages, oldest first, a page at a time:
    /// waiting or leased, each with when it becomes available or when its lease lapses.
    /// `limit` is 1–1,000 (default 100); `cursor` the previous page's `next_cursor`; `payload`
    /// includes each message's payload. Leases nothing.
    pub async fn queue_messages(
        &self,
        queue: &str,
        query: &QueueMessagesQuery,
    ) -> Result<QueueMessagePage, Error> {
        let request = Request::new(Method::GET, &["v1", "queues", queue, "messages"]).query(query);
        self.send(request).await
    }
}
