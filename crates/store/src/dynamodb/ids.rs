//! Job ids packed for the items that list many of them (due entries, and through them every
//! lease and delete of an entry), where each byte is paid for at every write of the item.
//!
//! Ids are written in id order, each as a head byte and the bytes it does not share with the id
//! before it: the head's low four bits count the shared leading bytes (at most 15, so at least
//! one byte follows), and its high four are left to the caller for flags. The ids of one create request are made together, and version 7 ids (what the API
//! makes: a millisecond timestamp, then a counter that the same millisecond increments, then
//! random bytes) made in one millisecond share 10 or 11 of their 16 bytes with the one before:
//! about 6 bytes an id instead of 16. Any ids round-trip; unrelated ones cost a byte more each.
//!
//! Numbers beside them are LEB128 varints, signed ones zigzagged first.

use hourglass_core::JobId;

use crate::{Result, StoreError};

/// The head bits a caller may use for flags of its own.
pub(super) const FLAGS: u8 = 0xf0;
const SHARED: u8 = 0x0f;

/// Writes ids (each with its head flags) in the order given, which should be id order.
#[derive(Default)]
pub(super) struct Writer {
    pub(super) bytes: Vec<u8>,
    previous: Option<[u8; 16]>,
}

impl Writer {
    pub(super) fn with_capacity(ids: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(ids * 8),
            previous: None,
        }
    }

    /// Writes `id` with `flags` (bits of [`FLAGS`]) in its head.
    pub(super) fn id(&mut self, id: JobId, flags: u8) {
        let bytes = *id.as_bytes();
        let shared = self.previous.map_or(0, |previous| {
            previous
                .iter()
                .zip(&bytes)
                .take_while(|(a, b)| a == b)
                .count()
                .min(SHARED as usize)
        });
        self.bytes.push(shared as u8 | (flags & FLAGS));
        self.bytes.extend_from_slice(&bytes[shared..]);
        self.previous = Some(bytes);
    }

    pub(super) fn unsigned(&mut self, mut value: u64) {
        loop {
            let low = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }

    pub(super) fn signed(&mut self, value: i64) {
        self.unsigned(((value << 1) ^ (value >> 63)) as u64);
    }

    /// An optional text: 0 for none, else its length plus one, then its bytes.
    pub(super) fn text(&mut self, text: Option<&str>) {
        match text {
            None => self.unsigned(0),
            Some(text) => {
                self.unsigned(text.len() as u64 + 1);
                self.bytes.extend_from_slice(text.as_bytes());
            }
        }
    }
}

/// Reads what a [`Writer`] wrote; anything cut short or malformed is corrupt data.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    previous: Option<[u8; 16]>,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// `what` names the attribute in errors.
    pub(super) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self {
            bytes,
            at: 0,
            previous: None,
            what,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn corrupt(&self) -> StoreError {
        StoreError::Corrupt(format!("{} cut short or malformed", self.what))
    }

    fn byte(&mut self) -> Result<u8> {
        let byte = *self.bytes.get(self.at).ok_or_else(|| self.corrupt())?;
        self.at += 1;
        Ok(byte)
    }

    /// The next id and its head flags.
    pub(super) fn id(&mut self) -> Result<(JobId, u8)> {
        let head = self.byte()?;
        let shared = usize::from(head & SHARED);
        let mut bytes = match (self.previous, shared) {
            (_, 0) => [0u8; 16],
            (Some(previous), _) => previous,
            (None, _) => return Err(self.corrupt()),
        };
        let rest = self
            .bytes
            .get(self.at..self.at + (16 - shared))
            .ok_or_else(|| self.corrupt())?;
        bytes[shared..].copy_from_slice(rest);
        self.at += 16 - shared;
        self.previous = Some(bytes);
        Ok((JobId::from_bytes(bytes), head & FLAGS))
    }

    pub(super) fn unsigned(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.corrupt())
    }

    pub(super) fn signed(&mut self) -> Result<i64> {
        let value = self.unsigned()?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    pub(super) fn text(&mut self) -> Result<Option<String>> {
        let len = match self.unsigned()? {
            0 => return Ok(None),
            len => usize::try_from(len - 1).map_err(|_| self.corrupt())?,
        };
        let end = self.at.checked_add(len).ok_or_else(|| self.corrupt())?;
        let bytes = self.bytes.get(self.at..end).ok_or_else(|| self.corrupt())?;
        let text = std::str::from_utf8(bytes).map_err(|_| self.corrupt())?;
        self.at = end;
        Ok(Some(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_numbers_round_trip() {
        let mut ids: Vec<JobId> = (0..50).map(|_| uuid::Uuid::now_v7()).collect();
        ids.push(uuid::Uuid::nil());
        ids.push(uuid::Uuid::max());
        ids.push(uuid::Uuid::from_u128(1));
        ids.sort();
        let numbers = [0, 1, -1, 63, -64, 64, 999, i64::MAX, i64::MIN];
        let mut writer = Writer::default();
        for (i, id) in ids.iter().enumerate() {
            writer.id(*id, if i % 3 == 0 { 0x50 } else { 0 });
            writer.signed(numbers[i % numbers.len()]);
            writer.unsigned(u64::MAX >> (i % 64));
            writer.text((i % 2 == 0).then_some("é text"));
        }
        let mut reader = Reader::new(&writer.bytes, "test");
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                reader.id().unwrap(),
                (*id, if i % 3 == 0 { 0x50 } else { 0 })
            );
            assert_eq!(reader.signed().unwrap(), numbers[i % numbers.len()]);
            assert_eq!(reader.unsigned().unwrap(), u64::MAX >> (i % 64));
            assert_eq!(
                reader.text().unwrap().as_deref(),
                (i % 2 == 0).then_some("é text")
            );
        }
        assert!(reader.done());
    }

    #[test]
    fn ids_made_together_cost_a_few_bytes_each() {
        let mut ids: Vec<JobId> = (0..100).map(|_| uuid::Uuid::now_v7()).collect();
        ids.sort();
        let mut writer = Writer::default();
        for id in ids {
            writer.id(id, 0);
        }
        // 16 for the first; the others share at least their millisecond (6 bytes) with it.
        assert!(writer.bytes.len() <= 17 + 99 * 11, "{}", writer.bytes.len());
    }

    #[test]
    fn what_is_cut_short_or_malformed_is_corrupt_not_a_panic() {
        let mut writer = Writer::default();
        writer.id(uuid::Uuid::now_v7(), 0);
        writer.id(uuid::Uuid::now_v7(), 0x80);
        writer.unsigned(300);
        writer.text(Some("text"));
        let bytes = writer.bytes;
        for cut in 0..bytes.len() {
            let mut reader = Reader::new(&bytes[..cut], "test");
            let read = reader
                .id()
                .and_then(|_| reader.id())
                .and_then(|_| reader.unsigned())
                .and_then(|_| reader.text());
            assert!(read.is_err(), "cut at {cut}");
        }
        // A first id that claims to share bytes; a text that is not UTF-8.
        assert!(Reader::new(&[0x03; 14], "test").id().is_err());
        assert!(Reader::new(&[0x02, 0xff], "test").text().is_err());
        // A varint longer than 64 bits.
        assert!(Reader::new(&[0xff; 11], "test").unsigned().is_err());
    }
}
