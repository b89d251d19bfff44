//! Failpoints: named places between two writes where a test makes the store's process "die" —
//! stop there, answering no one — to show what a crash landing exactly there leaves behind. The
//! engine's simulation (`crates/engine/tests/simulate/`) crashes nodes between store calls; a
//! crash *inside* a backend's call (after its commit, before its answer) is what these reach.
//!
//! Compiled in only for this crate's unit tests (`cfg(test)`): elsewhere [`Failpoints`] holds
//! nothing and [`Failpoints::hit`] is a constant `false`, so no build that ships carries one.
//! Failpoints are per store instance, so tests running side by side never trip each other's.

/// The SQLite writer thread dies with its group's transaction open: nothing committed, no one
/// answered.
#[cfg_attr(not(test), allow(dead_code, reason = "armed only by the unit tests"))]
pub(crate) const SQLITE_BEFORE_COMMIT: &str = "sqlite.writer.before_commit";
/// The SQLite writer thread dies right after its group's commit, before answering anyone.
#[cfg_attr(not(test), allow(dead_code, reason = "armed only by the unit tests"))]
pub(crate) const SQLITE_AFTER_COMMIT: &str = "sqlite.writer.after_commit";

/// A PostgreSQL create dies with its transaction open: its connection closes (the server rolls
/// the transaction back), and no one is answered.
#[cfg_attr(not(test), allow(dead_code, reason = "armed only by the unit tests"))]
pub(crate) const POSTGRES_CREATE_BEFORE_COMMIT: &str = "postgres.create.before_commit";
/// A PostgreSQL create dies right after its commit, before answering.
#[cfg_attr(not(test), allow(dead_code, reason = "armed only by the unit tests"))]
pub(crate) const POSTGRES_CREATE_AFTER_COMMIT: &str = "postgres.create.after_commit";

/// The failpoints armed on one store.
#[derive(Debug, Default)]
pub(crate) struct Failpoints {
    #[cfg(test)]
    armed: std::sync::Mutex<Vec<&'static str>>,
}

impl Failpoints {
    /// Arms `name`: the next time the code passes it, [`Failpoints::hit`] answers true (once).
    #[cfg(test)]
    pub(crate) fn arm(&self, name: &'static str) {
        self.armed.lock().unwrap().push(name);
    }

    /// Whether the code passing failpoint `name` must crash there; disarms it.
    #[inline]
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "used only by backends with failpoints")
    )]
    pub(crate) fn hit(&self, name: &'static str) -> bool {
        #[cfg(test)]
        {
            let mut armed = self.armed.lock().unwrap();
            if let Some(i) = armed.iter().position(|armed| *armed == name) {
                armed.remove(i);
                return true;
            }
        }
        let _ = name;
        false
    }
}
