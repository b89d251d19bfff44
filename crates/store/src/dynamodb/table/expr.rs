//! Expressions with their placeholders, a conditional update of one item (`Change`) with the
//! write id that makes a retried one safe, and the puts and deletes a transaction is made of.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem, Update};

use crate::dynamodb::item::{self, Item, n};

/// Placeholders for an expression's attribute names and values. Every name goes through a
/// placeholder, so no attribute ever collides with DynamoDB's reserved words.
#[derive(Default)]
pub(in crate::dynamodb) struct Expr {
    names: HashMap<String, String>,
    values: HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
}

impl Expr {
    pub(in crate::dynamodb) fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#{attr}");
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    pub(in crate::dynamodb) fn value(
        &mut self,
        value: aws_sdk_dynamodb::types::AttributeValue,
    ) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    pub(super) fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    pub(super) fn values(
        &self,
    ) -> Option<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
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
pub(in crate::dynamodb) const WRITE_ID: &str = "wid";

pub(super) fn new_write_id() -> aws_sdk_dynamodb::types::AttributeValue {
    n(rand::random::<i64>())
}

/// The item a failed condition returned, when `write_id` wrote it.
pub(super) fn written_by(
    item: Option<&Item>,
    write_id: &aws_sdk_dynamodb::types::AttributeValue,
) -> Option<Item> {
    item.filter(|item| item.get(WRITE_ID) == Some(write_id))
        .cloned()
}

/// A conditional update of one item, as a request or as a transaction's action.
pub(in crate::dynamodb) struct Change {
    pub(in crate::dynamodb) key: Item,
    pub(super) expr: Expr,
    set: Vec<String>,
    remove: Vec<String>,
    conditions: Vec<String>,
}

impl Change {
    pub(in crate::dynamodb) fn new(key: Item) -> Self {
        Self {
            key,
            expr: Expr::default(),
            set: Vec::new(),
            remove: Vec::new(),
            conditions: Vec::new(),
        }
    }

    pub(in crate::dynamodb) fn set(
        &mut self,
        attr: &str,
        value: aws_sdk_dynamodb::types::AttributeValue,
    ) {
        let (name, value) = (self.expr.name(attr), self.expr.value(value));
        self.set.push(format!("{name} = {value}"));
    }

    /// `attr` set to `value` when present, removed when not.
    pub(in crate::dynamodb) fn set_or_remove(
        &mut self,
        attr: &str,
        value: Option<aws_sdk_dynamodb::types::AttributeValue>,
    ) {
        match value {
            Some(value) => self.set(attr, value),
            None => self.remove(attr),
        }
    }

    pub(in crate::dynamodb) fn add(&mut self, attr: &str, delta: i64) {
        let (name, value) = (self.expr.name(attr), self.expr.value(n(delta)));
        self.set.push(format!("{name} = {name} + {value}"));
    }

    /// Appends `values` (a list) to the list `attr`, made empty first when missing: concurrent
    /// appends all land, with no condition to conflict on.
    pub(in crate::dynamodb) fn append(
        &mut self,
        attr: &str,
        values: aws_sdk_dynamodb::types::AttributeValue,
    ) {
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
    pub(in crate::dynamodb) fn bump(&mut self, attr: &str) {
        let (name, zero, one) = (
            self.expr.name(attr),
            self.expr.value(n(0)),
            self.expr.value(n(1)),
        );
        self.set
            .push(format!("{name} = if_not_exists({name}, {zero}) + {one}"));
    }

    /// Adds `delta` to the number `attr`, counted from zero when missing.
    pub(in crate::dynamodb) fn bump_by(&mut self, attr: &str, delta: i64) {
        let (name, zero, delta) = (
            self.expr.name(attr),
            self.expr.value(n(0)),
            self.expr.value(n(delta)),
        );
        self.set
            .push(format!("{name} = if_not_exists({name}, {zero}) + {delta}"));
    }

    pub(in crate::dynamodb) fn remove(&mut self, attr: &str) {
        let name = self.expr.name(attr);
        self.remove.push(name);
    }

    /// Adds a condition written with `#attr` for each attribute and `{}` for each value, in order.
    pub(in crate::dynamodb) fn when(
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

    pub(super) fn update_expression(&self) -> String {
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

    pub(super) fn condition(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// As a transaction's delete of the item, under this change's conditions (its updates are
    /// ignored).
    pub(in crate::dynamodb) fn into_delete(self, table: &str) -> TransactWriteItem {
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

    pub(in crate::dynamodb) fn into_action(self, table: &str) -> TransactWriteItem {
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
pub(in crate::dynamodb) fn put_new(table: &str, item: Item) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .build()
        .expect("put action");
    TransactWriteItem::builder().put(put).build()
}

/// A put as a transaction's action, replacing whatever has its key.
pub(in crate::dynamodb) fn put(table: &str, item: Item) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .build()
        .expect("put action");
    TransactWriteItem::builder().put(put).build()
}

/// A delete as a transaction's action; with `owner`, only if the item's `job` attribute is it.
pub(in crate::dynamodb) fn delete(
    table: &str,
    key: Item,
    owner: Option<&str>,
) -> TransactWriteItem {
    let mut delete = Delete::builder().table_name(table).set_key(Some(key));
    if let Some(owner) = owner {
        delete = delete
            .condition_expression("#job = :job")
            .expression_attribute_names("#job", "job")
            .expression_attribute_values(":job", item::s(owner));
    }
    TransactWriteItem::builder()
        .delete(delete.build().expect("delete action"))
        .build()
}
