//! The table itself, and the requests every other module is written in: creating or checking the
//! table at open, expressions with their placeholders, reads (one item, a batch, a query's
//! pages) and writes (a conditional update, a transaction, batched deletes).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, Delete, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    KeysAndAttributes, Projection, ProjectionType, Put, ScalarAttributeType, TableStatus,
    TransactWriteItem, Update, WriteRequest,
};

use super::item::{
    AGE_INDEX, Attrs, DUE_INDEX, Item, NAMESPACE_INDEX, cancelled_on_condition, condition_failed,
    key, n, unavailable,
};
use super::{DynamoOptions, Inner, RequestCounts};
use crate::{Result, StoreError};

pub(super) fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The key attributes of the table and of each index: (index, partition key, sort key).
const KEYS: [(Option<&str>, &str, &str); 4] = [
    (None, "pk", "sk"),
    (Some(DUE_INDEX), "dpk", "dsk"),
    (Some(NAMESPACE_INDEX), "npk", "nsk"),
    (Some(AGE_INDEX), "apk", "ask"),
];

/// What the due index carries besides keys: enough to pick claimable candidates (a live lease is
/// skipped, a queue's type filter applied) without reading the jobs.
const DUE_PROJECTED: [&str; 2] = ["jtype", "lowner"];

fn index_keys(index: Option<&str>) -> (&'static str, &'static str) {
    KEYS.iter()
        .find(|(name, ..)| *name == index)
        .map(|(_, pk, sk)| (*pk, *sk))
        .expect("a known index")
}

fn schema(pk: &str, sk: &str) -> Vec<KeySchemaElement> {
    let element = |name: &str, kind| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .expect("key schema element")
    };
    vec![element(pk, KeyType::Hash), element(sk, KeyType::Range)]
}

/// Creates the table when it is missing, checks its keys and indexes when it is there, and
/// answers the shard count the table was created with.
pub(super) async fn prepare(client: &Client, options: &DynamoOptions) -> Result<u32> {
    let table = &options.table;
    let described = client.describe_table().table_name(table).send().await;
    match described {
        Ok(out) => check(out.table(), table)?,
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            create(client, table).await?
        }
        Err(e) => return Err(unavailable(e)),
    }
    // The shard count is the table's, not each node's: claims must read every shard writers use.
    let meta = key("meta".into(), "meta");
    let mut item = meta.clone();
    item.insert("shards".into(), n(i64::from(options.shards)));
    let put = client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    if let Err(e) = put
        && !condition_failed(&e)
    {
        return Err(unavailable(e));
    }
    let stored = client
        .get_item()
        .table_name(table)
        .set_key(Some(meta))
        .consistent_read(true)
        .send()
        .await
        .map_err(unavailable)?;
    let shards = stored
        .item()
        .ok_or_else(|| StoreError::Corrupt("the table's settings item is missing".into()))?
        .clone()
        .num("shards")?;
    let shards = u32::try_from(shards)
        .ok()
        .filter(|s| (1..=super::MAX_SHARDS).contains(s))
        .ok_or_else(|| StoreError::Corrupt(format!("the table's shard count is {shards}")))?;
    if shards != options.shards {
        tracing::info!(
            table,
            shards,
            asked = options.shards,
            "the table keeps the shard count it was created with"
        );
    }
    Ok(shards)
}

fn check(
    description: Option<&aws_sdk_dynamodb::types::TableDescription>,
    table: &str,
) -> Result<()> {
    let Some(description) = description else {
        return Err(StoreError::Unavailable(format!(
            "DynamoDB described no table {table}"
        )));
    };
    let wrong = |what: String| {
        StoreError::Unavailable(format!(
            "table {table} is not an Hourglass table: {what} (create it with the deployment \
             template, or let `hourglass serve` create it under a new name)"
        ))
    };
    let names = |elements: &[KeySchemaElement]| {
        elements
            .iter()
            .map(|e| e.attribute_name().to_owned())
            .collect::<Vec<_>>()
    };
    if names(description.key_schema()) != ["pk", "sk"] {
        return Err(wrong("its key is not (pk, sk)".into()));
    }
    for (index, pk, sk) in KEYS
        .iter()
        .filter_map(|(i, pk, sk)| Some((i.as_ref()?, pk, sk)))
    {
        let found = description
            .global_secondary_indexes()
            .iter()
            .find(|g| g.index_name() == Some(index));
        match found {
            Some(g) if names(g.key_schema()) == [*pk, *sk] => {}
            Some(_) => return Err(wrong(format!("index {index} is not keyed by ({pk}, {sk})"))),
            None => return Err(wrong(format!("it has no index {index}"))),
        }
    }
    Ok(())
}

async fn create(client: &Client, table: &str) -> Result<()> {
    let mut definitions = Vec::new();
    let mut indexes = Vec::new();
    for (index, pk, sk) in KEYS {
        for name in [pk, sk] {
            definitions.push(
                AttributeDefinition::builder()
                    .attribute_name(name)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .expect("attribute definition"),
            );
        }
        let Some(index) = index else { continue };
        let projection = if index == DUE_INDEX {
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .set_non_key_attributes(Some(DUE_PROJECTED.map(String::from).to_vec()))
                .build()
        } else {
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build()
        };
        indexes.push(
            GlobalSecondaryIndex::builder()
                .index_name(index)
                .set_key_schema(Some(schema(pk, sk)))
                .projection(projection)
                .build()
                .expect("index definition"),
        );
    }
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(schema("pk", "sk")))
        .set_global_secondary_indexes(Some(indexes))
        .send()
        .await;
    match created {
        Ok(_) => tracing::info!(table, "created the DynamoDB table (on-demand capacity)"),
        // Another node created it meanwhile.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(e) => return Err(unavailable(e)),
    }
    // A new table (with its indexes) takes a while to become usable on AWS.
    let started = Instant::now();
    loop {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(unavailable)?;
        let active = out.table().is_some_and(|t| {
            t.table_status() == Some(&TableStatus::Active)
                && t.global_secondary_indexes().iter().all(|g| {
                    g.index_status() == Some(&aws_sdk_dynamodb::types::IndexStatus::Active)
                })
        });
        if active {
            return check(out.table(), table);
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Err(StoreError::Unavailable(format!(
                "table {table} is not active five minutes after its creation"
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Placeholders for an expression's attribute names and values. Every name goes through a
/// placeholder, so no attribute ever collides with DynamoDB's reserved words.
#[derive(Default)]
pub(super) struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
}

impl Expr {
    pub(super) fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    pub(super) fn value(&mut self, value: aws_sdk_dynamodb::types::AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

/// The attribute a single conditional write (an update, a put-if-absent) stamps on its item: a
/// random id of that write. The SDK retries a request whose answer was lost (a dropped
/// connection, an attempt timeout) although the first attempt may have been applied; the retry
/// then fails its condition against the item the first attempt wrote. Asked for the item on a
/// failed condition, the write finds its own id there and knows it was applied: a claim is
/// handed out instead of left leased and unreported, a completion reports applied instead of a
/// stale lease, a create succeeds instead of finding its own id taken. (Transactions need no
/// stamp: the SDK gives each a client request token, which makes DynamoDB apply a retried one
/// once and answer it as the first.)
pub(super) const WRITE_ID: &str = "wid";

fn new_write_id() -> aws_sdk_dynamodb::types::AttributeValue {
    n(rand::random::<i64>())
}

/// The item a failed condition returned, when `write_id` wrote it.
fn written_by(
    item: Option<&Item>,
    write_id: &aws_sdk_dynamodb::types::AttributeValue,
) -> Option<Item> {
    item.filter(|item| item.get(WRITE_ID) == Some(write_id))
        .cloned()
}

/// A conditional update of one item, as a request or as a transaction's action.
pub(super) struct Change {
    pub(super) key: Item,
    expr: Expr,
    set: Vec<String>,
    remove: Vec<String>,
    conditions: Vec<String>,
}

impl Change {
    pub(super) fn new(key: Item) -> Self {
        Self {
            key,
            expr: Expr::default(),
            set: Vec::new(),
            remove: Vec::new(),
            conditions: Vec::new(),
        }
    }

    pub(super) fn set(&mut self, attr: &str, value: aws_sdk_dynamodb::types::AttributeValue) {
        let (name, value) = (self.expr.name(attr), self.expr.value(value));
        self.set.push(format!("{name} = {value}"));
    }

    /// `attr` set to `value` when present, removed when not.
    pub(super) fn set_or_remove(
        &mut self,
        attr: &str,
        value: Option<aws_sdk_dynamodb::types::AttributeValue>,
    ) {
        match value {
            Some(value) => self.set(attr, value),
            None => self.remove(attr),
        }
    }

    pub(super) fn add(&mut self, attr: &str, delta: i64) {
        let (name, value) = (self.expr.name(attr), self.expr.value(n(delta)));
        self.set.push(format!("{name} = {name} + {value}"));
    }

    /// `attr` takes `from`'s value as it was before this update.
    pub(super) fn copy(&mut self, attr: &str, from: &str) {
        let (name, from) = (self.expr.name(attr), self.expr.name(from));
        self.set.push(format!("{name} = {from}"));
    }

    pub(super) fn remove(&mut self, attr: &str) {
        let name = self.expr.name(attr);
        self.remove.push(name);
    }

    /// Adds a condition written with `#attr` for each attribute and `{}` for each value, in order.
    pub(super) fn when(
        &mut self,
        template: &str,
        attrs: &[&str],
        values: Vec<aws_sdk_dynamodb::types::AttributeValue>,
    ) {
        let mut text = template.to_owned();
        for attr in attrs {
            self.expr.name(attr);
        }
        for value in values {
            let placeholder = self.expr.value(value);
            text = text.replacen("{}", &placeholder, 1);
        }
        self.conditions.push(format!("({text})"));
    }

    fn update_expression(&self) -> String {
        let mut text = String::new();
        if !self.set.is_empty() {
            text.push_str("SET ");
            text.push_str(&self.set.join(", "));
        }
        if !self.remove.is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str("REMOVE ");
            text.push_str(&self.remove.join(", "));
        }
        text
    }

    fn condition(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// As a transaction's delete of the item, under this change's conditions (its updates are
    /// ignored).
    pub(super) fn into_delete(self, table: &str) -> TransactWriteItem {
        let delete = Delete::builder()
            .table_name(table)
            .set_key(Some(self.key.clone()))
            .set_condition_expression(self.condition())
            .set_expression_attribute_names(self.expr.names())
            .set_expression_attribute_values(self.expr.values())
            .build()
            .expect("delete action");
        TransactWriteItem::builder().delete(delete).build()
    }

    pub(super) fn into_action(self, table: &str) -> TransactWriteItem {
        let update = Update::builder()
            .table_name(table)
            .set_key(Some(self.key.clone()))
            .update_expression(self.update_expression())
            .set_condition_expression(self.condition())
            .set_expression_attribute_names(self.expr.names())
            .set_expression_attribute_values(self.expr.values())
            .build()
            .expect("update action");
        TransactWriteItem::builder().update(update).build()
    }
}

/// A put as a transaction's action, only if no item has its key yet.
pub(super) fn put_new(table: &str, item: Item) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .build()
        .expect("put action");
    TransactWriteItem::builder().put(put).build()
}

/// A put as a transaction's action, replacing whatever has its key.
pub(super) fn put(table: &str, item: Item) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .build()
        .expect("put action");
    TransactWriteItem::builder().put(put).build()
}

/// A delete as a transaction's action; with `owner`, only if the item's `job` attribute is it.
pub(super) fn delete(table: &str, key: Item, owner: Option<&str>) -> TransactWriteItem {
    let mut delete = Delete::builder().table_name(table).set_key(Some(key));
    if let Some(owner) = owner {
        delete = delete
            .condition_expression("#job = :job")
            .expression_attribute_names("#job", "job")
            .expression_attribute_values(":job", super::item::s(owner));
    }
    TransactWriteItem::builder()
        .delete(delete.build().expect("delete action"))
        .build()
}

/// One Query: a partition of the table or of an index, optionally only sort keys below or above
/// a bound, in either order, up to `limit` items over as many pages as that takes.
pub(super) struct Query {
    pub(super) index: Option<&'static str>,
    pub(super) partition: String,
    pub(super) range: Range,
    pub(super) forward: bool,
    pub(super) limit: usize,
}

pub(super) enum Range {
    All,
    /// Sort keys strictly below this.
    Below(String),
    /// Sort keys strictly above this.
    Above(String),
}

impl Query {
    pub(super) fn new(index: Option<&'static str>, partition: String) -> Self {
        Self {
            index,
            partition,
            range: Range::All,
            forward: true,
            limit: usize::MAX,
        }
    }

    pub(super) fn below(mut self, bound: String) -> Self {
        self.range = Range::Below(bound);
        self
    }

    pub(super) fn above(mut self, bound: String) -> Self {
        self.range = Range::Above(bound);
        self
    }

    pub(super) fn backward(mut self) -> Self {
        self.forward = false;
        self
    }

    pub(super) fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// The sort key's attribute name in what this query returns.
    pub(super) fn sort_key(&self) -> &'static str {
        index_keys(self.index).1
    }
}

/// Writes in one transaction, at most 100 actions (the service's limit).
pub(super) const TRANSACTION_LIMIT: usize = 100;
/// Bytes of items in one transaction ([`item_bytes`](super::item::item_bytes)), kept well under
/// the service's 4 MB: the estimate leaves out the update expressions and conditions.
pub(super) const TRANSACTION_BYTES: usize = 3 << 20;

impl Inner {
    /// One item by key, strongly consistent.
    pub(super) async fn get(&self, key: Item) -> Result<Option<Item>> {
        RequestCounts::count(&self.counts.reads);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }

    /// Items by key, strongly consistent, in no particular order; missing ones are left out.
    pub(super) async fn get_many(&self, keys: Vec<Item>) -> Result<Vec<Item>> {
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            let mut rounds = 0;
            while !pending.is_empty() {
                rounds += 1;
                if rounds > 8 {
                    return Err(StoreError::Unavailable(
                        "dynamodb: reads left unprocessed after 8 rounds (throttled)".into(),
                    ));
                }
                RequestCounts::count(&self.counts.reads);
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(true)
                    .build()
                    .expect("keys");
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(unavailable)?;
                if let Some(mut responses) = out.responses
                    && let Some(items) = responses.remove(&self.table)
                {
                    found.extend(items);
                }
                if let Some(mut left) = out.unprocessed_keys
                    && let Some(left) = left.remove(&self.table)
                {
                    pending = left.keys;
                    if !pending.is_empty() {
                        tokio::time::sleep(Duration::from_millis(50 << rounds.min(5))).await;
                    }
                }
            }
        }
        Ok(found)
    }

    /// A query's items, page after page, up to its limit.
    pub(super) async fn query(&self, query: &Query) -> Result<Vec<Item>> {
        let (pk, sk) = index_keys(query.index);
        let mut expr = Expr::default();
        let mut condition = format!(
            "{} = {}",
            expr.name(pk),
            expr.value(super::item::s(query.partition.clone()))
        );
        match &query.range {
            Range::All => {}
            Range::Below(bound) => {
                let (name, value) = (expr.name(sk), expr.value(super::item::s(bound.clone())));
                condition.push_str(&format!(" AND {name} < {value}"));
            }
            Range::Above(bound) => {
                let (name, value) = (expr.name(sk), expr.value(super::item::s(bound.clone())));
                condition.push_str(&format!(" AND {name} > {value}"));
            }
        }
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.queries);
            let page = (query.limit - items.len()).min(1000) as i32;
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(query.index.map(str::to_owned))
                .key_condition_expression(&condition)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .scan_index_forward(query.forward)
                .consistent_read(query.index.is_none())
                .limit(page)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() || items.len() >= query.limit {
                return Ok(items);
            }
        }
    }

    /// The same query on every shard's partition, merged in sort-key order (ascending or as the
    /// query says), up to the query's limit.
    pub(super) async fn query_shards(
        &self,
        partition: impl Fn(u32) -> String,
        template: impl Fn(String) -> Query,
    ) -> Result<Vec<Item>> {
        let queries: Vec<Query> = (0..self.shards).map(|s| template(partition(s))).collect();
        let (limit, forward, sort_key) = match queries.first() {
            Some(q) => (q.limit, q.forward, q.sort_key()),
            None => return Ok(Vec::new()),
        };
        let pages =
            futures_util::future::try_join_all(queries.iter().map(|q| self.query(q))).await?;
        let mut merged: Vec<(String, Item)> = Vec::new();
        for item in pages.into_iter().flatten() {
            let sort = item.str(sort_key)?.to_owned();
            merged.push((sort, item));
        }
        merged.sort_by(|a, b| {
            if forward {
                a.0.cmp(&b.0)
            } else {
                b.0.cmp(&a.0)
            }
        });
        merged.truncate(limit);
        Ok(merged.into_iter().map(|(_, item)| item).collect())
    }

    /// A conditional update; `Ok(None)` when its condition failed. Safe to retry: see
    /// [`WRITE_ID`].
    pub(super) async fn update(&self, mut change: Change, all_new: bool) -> Result<Option<Item>> {
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

    /// A put that replaces any item with its key.
    pub(super) async fn put(&self, item: Item) -> Result<()> {
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
    pub(super) async fn put_new(&self, mut item: Item) -> Result<bool> {
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
    pub(super) async fn transact(
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
    /// unprocessed. Not atomic: used for history and retention only.
    pub(super) async fn delete_many(&self, keys: Vec<Item>) -> Result<()> {
        for chunk in keys.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|key| {
                    WriteRequest::builder()
                        .delete_request(
                            aws_sdk_dynamodb::types::DeleteRequest::builder()
                                .set_key(Some(key.clone()))
                                .build()
                                .expect("delete request"),
                        )
                        .build()
                })
                .collect();
            let mut rounds = 0;
            while !pending.is_empty() {
                rounds += 1;
                if rounds > 8 {
                    return Err(StoreError::Unavailable(
                        "dynamodb: deletes left unprocessed after 8 rounds (throttled)".into(),
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

    /// Every item whose partition key starts with `prefix`, reading only `attrs` (a full scan:
    /// for what DynamoDB cannot index, see the module's opening comment).
    pub(super) async fn scan(&self, prefix: &str, attrs: &[&str]) -> Result<Vec<Item>> {
        let mut expr = Expr::default();
        let filter = format!(
            "begins_with({}, {})",
            expr.name("pk"),
            expr.value(super::item::s(prefix))
        );
        let projection = attrs
            .iter()
            .map(|a| expr.name(a))
            .collect::<Vec<_>>()
            .join(", ");
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.scans);
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(&filter)
                .projection_expression(&projection)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(items);
            }
        }
    }
}
