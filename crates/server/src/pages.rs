//! Pages bounded in bytes as well as in items. A listing of 1,000 jobs with 256 KiB payloads
//! would be a 250 MB answer, held whole while it is written; so a page is encoded item by item
//! and stops once it passes `max_answer_bytes`, with a cursor after its last item, and the store
//! is read in chunks no larger than what the page still has room for, counting every record at
//! its largest possible size. An answer thus holds at most about the budget plus one item,
//! whatever the items weigh and whatever `limit` asked for.

use std::future::Future;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;

/// One page's items, already encoded and joined by commas.
pub(crate) struct Page<K> {
    items: Vec<u8>,
    /// Where the next page starts: `None` when the listing is known to be exhausted.
    pub next: Option<K>,
}

/// How a page is read and written.
pub(crate) struct Paging {
    /// The encoded size past which a page stops.
    pub budget: usize,
    /// The most one record can weigh, in memory and encoded: chunks are sized by it.
    pub worst_item: usize,
    /// The most items a page holds (the request's `limit`).
    pub limit: usize,
}

impl Paging {
    /// How many records the next read may ask for, with `used` bytes already encoded and `count`
    /// items written: the room left at the worst size a record, at least one (a page always
    /// makes progress, so a single item larger than the budget still gets a page of its own).
    fn chunk(&self, used: usize, count: usize) -> usize {
        let room = self.budget.saturating_sub(used) / self.worst_item.max(1);
        room.max(1).min(self.limit - count)
    }

    /// Reads and encodes one page. `read(after, n)` answers up to `n` records after `after`, in
    /// listing order, fewer only at the listing's end; `key` names a record as a cursor; `write`
    /// encodes a record and answers false when the record is not shown (it still moves the
    /// cursor).
    pub(crate) async fn read<R, K, Fut>(
        &self,
        mut after: Option<K>,
        mut read: impl FnMut(Option<K>, usize) -> Fut,
        key: impl Fn(&R) -> K,
        mut write: impl FnMut(&R, &mut Vec<u8>) -> bool,
    ) -> Result<Page<K>, ApiError>
    where
        K: Clone,
        Fut: Future<Output = Result<Vec<R>, ApiError>>,
    {
        let mut items = Vec::new();
        let mut count = 0;
        loop {
            let want = self.chunk(items.len(), count);
            let records = read(after.clone(), want).await?;
            let got = records.len();
            for record in &records {
                let mark = items.len();
                if !items.is_empty() {
                    items.push(b',');
                }
                if !write(record, &mut items) {
                    items.truncate(mark);
                }
                count += 1;
                after = Some(key(record));
                if items.len() >= self.budget && count < self.limit {
                    // Cut here: the rest of this chunk is read again by the next page.
                    return Ok(Page { items, next: after });
                }
            }
            if count >= self.limit {
                return Ok(Page { items, next: after });
            }
            if got < want {
                return Ok(Page { items, next: None });
            }
        }
    }
}

impl<K: Serialize> Page<K> {
    /// `{"<name>": [items], "next_cursor": next}`.
    pub(crate) fn answer(self, name: &str, cursor: impl Fn(&K) -> String) -> Response {
        let next = self.next.as_ref().map(cursor);
        let mut body = Vec::with_capacity(self.items.len() + name.len() + 96);
        body.extend_from_slice(b"{\"");
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(b"\":[");
        body.extend_from_slice(&self.items);
        body.extend_from_slice(b"],\"next_cursor\":");
        // A string or null always encodes.
        serde_json::to_writer(&mut body, &next).expect("a cursor encodes");
        body.push(b'}');
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// Appends `value`'s JSON to `buf`; the API's output types always encode.
pub(crate) fn push_json(buf: &mut Vec<u8>, value: &impl Serialize) -> bool {
    serde_json::to_writer(buf, value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paging(budget: usize, worst_item: usize, limit: usize) -> Paging {
        Paging {
            budget,
            worst_item,
            limit,
        }
    }

    /// Reads from `items` (sizes in bytes), recording the chunk sizes asked for.
    async fn run(p: &Paging, items: &[usize], after: Option<usize>) -> (Page<usize>, Vec<usize>) {
        let asked = std::cell::RefCell::new(Vec::new());
        let page = p
            .read(
                after,
                |after, n| {
                    asked.borrow_mut().push(n);
                    let start = after.map_or(0, |a| a + 1);
                    let chunk: Vec<usize> = (start..items.len()).take(n).collect();
                    async move { Ok(chunk) }
                },
                |i| *i,
                |i, buf| {
                    buf.extend(std::iter::repeat_n(b'x', items[*i]));
                    true
                },
            )
            .await
            .unwrap_or_else(|_| panic!("reads succeed"));
        (page, asked.into_inner())
    }

    #[tokio::test]
    async fn a_page_stops_once_it_passes_the_budget_and_continues_after_its_last_item() {
        let p = paging(1000, 400, 100);
        let items = [300; 10];
        let (page, asked) = run(&p, &items, None).await;
        // 300, 601, 902, 1203: the fourth item passes the budget.
        assert_eq!(page.next, Some(3));
        assert_eq!(page.items.len(), 1203);
        // Never asked for more than the room left at the worst size.
        assert_eq!(asked, vec![2, 1, 1]);
        let (page, _) = run(&p, &items, Some(3)).await;
        assert_eq!(page.next, Some(7));
    }

    #[tokio::test]
    async fn small_items_fill_the_limit_and_an_exhausted_listing_has_no_cursor() {
        let p = paging(1000, 10, 5);
        let (page, asked) = run(&p, &[1; 20], None).await;
        assert_eq!(page.next, Some(4));
        assert_eq!(asked, vec![5]);
        let (page, _) = run(&p, &[1; 3], None).await;
        assert_eq!(page.next, None);
        assert_eq!(page.items, b"x,x,x");
    }

    #[tokio::test]
    async fn an_item_larger_than_the_budget_gets_a_page_of_its_own() {
        let p = paging(100, 100, 10);
        let (page, asked) = run(&p, &[500, 500], None).await;
        assert_eq!(page.next, Some(0));
        assert_eq!(page.items.len(), 500);
        assert_eq!(asked, vec![1]);
    }
}
