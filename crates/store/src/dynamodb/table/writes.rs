//! Writes: a conditional update or delete, puts (replacing, or only if new), one transaction,
//! and batched puts and deletes that retry what the service left unprocessed.

use std::time::Duration;

use aws_sdk_dynamodb::types::{TransactWriteItem, WriteRequest};

use super::expr::{Change, WRITE_ID, new_write_id, written_by};
use crate::dynamodb::item::{Item, cancelled_on_condition, condition_failed, unavailable};
use crate::dynamodb::{Inner, RequestCounts};
use crate::{Result, StoreError};

/// Writes in one transaction, at most 100 actions (the service's limit).
pub(in crate::dynamodb) const TRANSACTION_LIMIT: usize = 100;

impl Inner {
    /// A conditional update; `Ok(None)` when its condition failed. Safe to retry: see
    /// [`WRITE_ID`].
    pub(in crate::dynamodb) async fn update(
        &self,
        mut change: Change,
        all_new: bool,
    ) -> Result<Option<Item>> {
        use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
        RequestCounts::count(&self.counts.writes);
        let write_id = new_write_id();
        change.set(WRITE_ID, write_id.clone());
        let condition = change.condition();
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(change.key.clone()))
            .update_expression(change.update_expression())
            .set_condition_expression(condition)
            .set_expression_attribute_names(change.expr.names())
            .set_expression_attribute_values(change.expr.values())
            .return_values(if all_new {
                aws_sdk_dynamodb::types::ReturnValue::AllNew
            } else {
                aws_sdk_dynamodb::types::ReturnValue::None
            })
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send()
            .await;
        match out {
            Ok(out) => Ok(Some(out.attributes.unwrap_or_default())),
            Err(e) if condition_failed(&e) => Ok(match e.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    written_by(failed.item(), &write_id)
                }
                _ => None,
            }),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// A conditional delete; `false` when its condition failed.
    pub(in crate::dynamodb) async fn delete_if(&self, change: Change) -> Result<bool> {
        RequestCounts::count(&self.counts.writes);
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(change.key.clone()))
            .set_condition_expression(change.condition())
            .set_expression_attribute_names(change.expr.names())
            .set_expression_attribute_values(change.expr.values())
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) if condition_failed(&e) => Ok(false),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// A put that replaces any item with its key.
    pub(in crate::dynamodb) async fn put(&self, item: Item) -> Result<()> {
        RequestCounts::count(&self.counts.writes);
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// A put only if no item has its key; `false` when one has. Safe to retry: see
    /// [`WRITE_ID`].
    pub(in crate::dynamodb) async fn put_new(&self, mut item: Item) -> Result<bool> {
        use aws_sdk_dynamodb::operation::put_item::PutItemError;
        RequestCounts::count(&self.counts.writes);
        let write_id = new_write_id();
        item.insert(WRITE_ID.to_owned(), write_id.clone());
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send()
            .await;
        match out {
            Ok(_) => Ok(true),
            Err(e) if condition_failed(&e) => Ok(match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    written_by(failed.item(), &write_id).is_some()
                }
                _ => false,
            }),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// One transaction (at most [`TRANSACTION_LIMIT`] actions). `Ok(Err(failed))` when it was
    /// cancelled because conditions failed: which actions' did.
    pub(in crate::dynamodb) async fn transact(
        &self,
        actions: Vec<TransactWriteItem>,
    ) -> Result<std::result::Result<(), Vec<bool>>> {
        debug_assert!(actions.len() <= TRANSACTION_LIMIT);
        RequestCounts::count(&self.counts.transactions);
        let out = self
            .client
            .transact_write_items()
            .set_transact_items(Some(actions))
            .send()
            .await;
        match out {
            Ok(_) => Ok(Ok(())),
            Err(e) => match cancelled_on_condition(&e) {
                Some(failed) if failed.iter().any(|f| *f) => Ok(Err(failed)),
                _ => Err(unavailable(e)),
            },
        }
    }

    /// Deletes items by key, 25 a request (the service's limit), retrying what the service left
    /// unprocessed. Not atomic.
    pub(in crate::dynamodb) async fn delete_many(&self, keys: Vec<Item>) -> Result<()> {
        let requests = keys
            .into_iter()
            .map(|key| {
                WriteRequest::builder()
                    .delete_request(
                        aws_sdk_dynamodb::types::DeleteRequest::builder()
                            .set_key(Some(key))
                            .build()
                            .expect("delete request"),
                    )
                    .build()
            })
            .collect();
        self.write_many(requests).await
    }

    /// Puts items, replacing any with their keys, 25 a request, retrying what the service left
    /// unprocessed. Not atomic: a failure may leave some written.
    pub(in crate::dynamodb) async fn put_many(&self, items: Vec<Item>) -> Result<()> {
        let requests = items
            .into_iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        aws_sdk_dynamodb::types::PutRequest::builder()
                            .set_item(Some(item))
                            .build()
                            .expect("put request"),
                    )
                    .build()
            })
            .collect();
        self.write_many(requests).await
    }

    async fn write_many(&self, requests: Vec<WriteRequest>) -> Result<()> {
        for chunk in requests.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk.to_vec();
            let mut rounds = 0;
            while !pending.is_empty() {
                rounds += 1;
                if rounds > 8 {
                    return Err(StoreError::Unavailable(
                        "dynamodb: writes left unprocessed after 8 rounds (throttled)".into(),
                    ));
                }
                RequestCounts::count(&self.counts.writes);
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(unavailable)?;
                if let Some(mut left) = out.unprocessed_items
                    && let Some(left) = left.remove(&self.table)
                {
                    pending = left;
                    if !pending.is_empty() {
                        tokio::time::sleep(Duration::from_millis(50 << rounds.min(5))).await;
                    }
                }
            }
        }
        Ok(())
    }
}
