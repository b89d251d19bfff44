//! Where deliveries are written down as they arrive: the webhook receiver records each request,
//! the queue workers each leased batch. The scenarios read the same record whatever the target.

use std::sync::{Arc, Mutex, MutexGuard};

use super::accounting::Receipt;

/// A shared, growable list of receipts. Cheap to clone (the clones share the list).
#[derive(Clone, Default)]
pub struct Recorder {
    receipts: Arc<Mutex<Vec<Receipt>>>,
}

impl Recorder {
    pub fn new(capacity: usize) -> Self {
        Self {
            receipts: Arc::new(Mutex::new(Vec::with_capacity(capacity))),
        }
    }

    pub fn push(&self, receipt: Receipt) {
        self.lock().push(receipt);
    }

    /// Records a batch under one lock (a leased batch is received at one instant).
    pub fn extend(&self, receipts: impl IntoIterator<Item = Receipt>) {
        self.lock().extend(receipts);
    }

    /// Receipts recorded (and not taken) so far.
    pub fn recorded(&self) -> usize {
        self.lock().len()
    }

    /// Makes room for `additional` more receipts up front, so the hot path never reallocates.
    pub fn reserve(&self, additional: usize) {
        self.lock().reserve(additional);
    }

    /// A copy of the receipts so far.
    pub fn snapshot(&self) -> Vec<Receipt> {
        self.lock().clone()
    }

    /// The receipts so far, leaving an empty vector of the same capacity in their place.
    pub fn take(&self) -> Vec<Receipt> {
        let mut receipts = self.lock();
        let capacity = receipts.capacity();
        std::mem::replace(&mut *receipts, Vec::with_capacity(capacity))
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Receipt>> {
        self.receipts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
