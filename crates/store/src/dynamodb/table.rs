//! The table itself, and the requests every other module is written in: creating or checking the
//! table at open, expressions with their placeholders, reads (one item, a batch, a query's
//! pages) and writes (a conditional update, a transaction, batched deletes).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, Delete, KeySchemaElement, KeyType, KeysAndAttributes, Put,
    ScalarAttributeType, TableStatus, TimeToLiveSpecification, TransactWriteItem, Update,
    WriteRequest,
};

use super::item::{Attrs, Item, cancelled_on_condition, condition_failed, key, n, unavailable};
use super::{DynamoOptions, Inner, RequestCounts};
use crate::{Result, StoreError};

pub(super) fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The layout of items this version reads and writes, kept in the table's settings item. Layout
/// 1 (until November 2026) indexed jobs with three global secondary indexes; layout 2 keeps its
/// time index and namespace lists in items of the table (`entry.rs`, `jobs.rs`).
pub(super) const LAYOUT: i64 = 2;

/// The attribute DynamoDB's time to live reads: items carrying it are deleted, for free, some
/// time after that instant (seconds since the epoch).
pub(super) const TTL: &str = "ttl";

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
    item.insert("layout".into(), n(LAYOUT));
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
    let settings = stored
        .item()
        .ok_or_else(|| StoreError::Corrupt("the table's settings item is missing".into()))?
        .clone();
    let layout = settings.opt_num("layout")?.unwrap_or(1);
    if layout != LAYOUT {
        return Err(StoreError::Unavailable(format!(
            "table {table} holds Hourglass's layout {layout}, and this version reads and writes \
             layout {LAYOUT} (no secondary indexes; due entries and namespace lists in the \
             table): point HOURGLASS_STORE at a new table name, or delete this one"
        )));
    }
    let shards = settings.num("shards")?;
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
    if let Some(index) = description.global_secondary_indexes().first() {
        let name = index.index_name().unwrap_or_default();
        return Err(StoreError::Unavailable(format!(
            "table {table} has the secondary index {name:?}: it was made for Hourglass's layout \
             1, and this version reads and writes layout {LAYOUT}, which has none (point \
             HOURGLASS_STORE at a new table name, or delete this one)"
        )));
    }
    Ok(())
}

async fn create(client: &Client, table: &str) -> Result<()> {
    let definitions = ["pk", "sk"]
        .map(|name| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute definition")
        })
        .to_vec();
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(schema("pk", "sk")))
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
    // A new table takes a while to become usable on AWS.
    let started = Instant::now();
    loop {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(unavailable)?;
        let active = out
            .table()
            .is_some_and(|t| t.table_status() == Some(&TableStatus::Active));
        if active {
            check(out.table(), table)?;
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Err(StoreError::Unavailable(format!(
                "table {table} is not active five minutes after its creation"
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Retention is DynamoDB's time to live on `ttl`: deletes that cost nothing.
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(TTL)
        .enabled(true)
        .build()
        .expect("time to live");
    let enabled = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await;
    match enabled {
        Ok(_) => Ok(()),
        // Another node enabled it meanwhile.
        Err(e) if format!("{e:?}").contains("already enabled") => Ok(()),
        Err(e) => Err(unavailable(e)),
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

    /// Appends `values` (a list) to the list `attr`, made empty first when missing: concurrent
    /// appends all land, with no condition to conflict on.
    pub(super) fn append(&mut self, attr: &str, values: aws_sdk_dynamodb::types::AttributeValue) {
        let name = self.expr.name(attr);
        let empty = self
            .expr
            .value(aws_sdk_dynamodb::types::AttributeValue::L(Vec::new()));
        let values = self.expr.value(values);
        self.set.push(format!(
            "{name} = list_append(if_not_exists({name}, {empty}), {values})"
        ));
    }

    /// Adds one to the number `attr`, counted from zero when missing.
    pub(super) fn bump(&mut self, attr: &str) {
        let (name, zero, one) = (
            self.expr.name(attr),
            self.expr.value(n(0)),
            self.expr.value(n(1)),
        );
        self.set
            .push(format!("{name} = if_not_exists({name}, {zero}) + {one}"));
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

/// One Query: a partition of the table, optionally only sort keys below or above a bound or
/// with a prefix, in either order, up to `limit` items over as many pages as that takes.
pub(super) struct Query {
    pub(super) partition: String,
    pub(super) range: Range,
    pub(super) forward: bool,
    pub(super) limit: usize,
    /// Strongly consistent (a read unit a started 4 KB) unless asked otherwise (half that).
    pub(super) consistent: bool,
}

pub(super) enum Range {
    All,
    /// Sort keys strictly below this.
    Below(String),
    /// Sort keys strictly above this.
    Above(String),
    /// Sort keys starting with this.
    Prefix(String),
}

impl Query {
    pub(super) fn new(partition: String) -> Self {
        Self {
            partition,
            range: Range::All,
            forward: true,
            limit: usize::MAX,
            consistent: true,
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

    pub(super) fn prefix(mut self, prefix: String) -> Self {
        self.range = Range::Prefix(prefix);
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

    pub(super) fn eventually_consistent(mut self) -> Self {
        self.consistent = false;
        self
    }
}

/// Writes in one transaction, at most 100 actions (the service's limit).
pub(super) const TRANSACTION_LIMIT: usize = 100;

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
        self.get_many_as(keys, true).await
    }

    /// Items by key, in no particular order; missing ones are left out. Eventually consistent
    /// reads cost half, and may miss a write of the last second.
    pub(super) async fn get_many_as(&self, keys: Vec<Item>, consistent: bool) -> Result<Vec<Item>> {
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
                    .consistent_read(consistent)
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
        self.query_while(query, |_| true).await
    }

    /// A query's items in order, page after page, up to its limit or until `more` answers
    /// false for an item (that item is the last one returned).
    pub(super) async fn query_while(
        &self,
        query: &Query,
        mut more: impl FnMut(&Item) -> bool,
    ) -> Result<Vec<Item>> {
        let (pk, sk) = ("pk", "sk");
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
            Range::Prefix(prefix) => {
                let (name, value) = (expr.name(sk), expr.value(super::item::s(prefix.clone())));
                condition.push_str(&format!(" AND begins_with({name}, {value})"));
            }
        }
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.queries);
            let page = (query.limit - items.len()).clamp(1, 100) as i32;
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(&condition)
                .set_expression_attribute_names(expr.names())
                .set_expression_attribute_values(expr.values())
                .scan_index_forward(query.forward)
                .consistent_read(query.consistent)
                .limit(page)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            for item in out.items.unwrap_or_default() {
                let go_on = more(&item);
                items.push(item);
                if !go_on {
                    return Ok(items);
                }
            }
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
            Some(q) => (q.limit, q.forward, "sk"),
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

    /// A conditional delete; `false` when its condition failed.
    pub(super) async fn delete_if(&self, change: Change) -> Result<bool> {
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
    /// unprocessed. Not atomic.
    pub(super) async fn delete_many(&self, keys: Vec<Item>) -> Result<()> {
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
    pub(super) async fn put_many(&self, items: Vec<Item>) -> Result<()> {
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

    /// Every item whose partition key starts with `prefix`, reading only `attrs` (all when
    /// empty; a full scan:
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
        let projection = (!projection.is_empty()).then_some(projection);
        let mut items = Vec::new();
        let mut start = None;
        loop {
            RequestCounts::count(&self.counts.scans);
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(&filter)
                .set_projection_expression(projection.clone())
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
