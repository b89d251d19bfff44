//! `hourglass backup`: a consistent copy of an embedded store, taken while its node runs.
//!
//! The copy is made by a connection of its own, opened read-only on the node's database: in WAL
//! mode a reader in another process is as safe as the node's own readers (SQLite coordinates
//! them through the `-shm` file with its own locks). The directory's `LOCK` is the node's
//! advisory lock against a second *node* (a second writer); a reader does not take it, so a
//! backup never stops or is stopped by the node, and works just as well when no node runs.
//!
//! `VACUUM INTO` writes the copy in one read transaction, so it is the database as of one
//! commit: every job acknowledged before the backup began, none half-written. The WAL is read
//! through, so the copy holds what the `-wal` file holds too (copying `hourglass.db` alone misses
//! everything not yet checkpointed). The copy is written beside the destination under a temporary
//! name, checked (`PRAGMA integrity_check`), switched to a rollback journal so that it is one
//! self-contained file, synced, and only then linked into place.
//!
//! The copy holds every namespace's signing secret in plaintext, so it is created readable by its
//! owner only (0600), and never through a symlink: the temporary file is created exclusively
//! (`O_EXCL`, which refuses an existing name, a dangling symlink included), and the finished copy
//! takes the destination's name by a hard link, which fails when anything has that name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::DB_FILE;
use crate::{Result, StoreError};

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    /// Jobs in the copy, in every state and namespace.
    pub jobs: u64,
    /// The copy's size in bytes.
    pub bytes: u64,
}

/// Copies the embedded store in `data_dir` to the new file `dest`, which a node opens when it is
/// placed in its data directory as `hourglass.db` ([`DB_FILE`]). Refuses to overwrite `dest`.
pub fn backup(data_dir: &Path, dest: &Path) -> Result<BackupSummary> {
    let unavailable = |what: &str, e: &dyn std::fmt::Display| {
        StoreError::Unavailable(format!("backup: {what}: {e}"))
    };
    let source = data_dir.join(DB_FILE);
    if !source.is_file() {
        return Err(StoreError::Unavailable(format!(
            "backup: no store at {} (is --data-dir the node's data directory?)",
            source.display()
        )));
    }
    // `symlink_metadata`, not `exists`: a dangling symlink is something at that name too.
    let exists = || {
        StoreError::Unavailable(format!(
            "backup: {} already exists; give a new file name",
            dest.display()
        ))
    };
    match dest.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Ok(_) => return Err(exists()),
        Err(e) => return Err(unavailable(&format!("cannot check {}", dest.display()), &e)),
    }
    let partial = partial_path(dest)?;
    // Ours, from a backup that was interrupted: VACUUM INTO refuses a file that is not empty.
    match std::fs::remove_file(&partial) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(unavailable(
                &format!("cannot remove {}", partial.display()),
                &e,
            ));
        }
    }
    let written = create_private(&partial)
        .map_err(|e| unavailable(&format!("cannot create {}", partial.display()), &e))
        .and_then(|()| copy(&source, &partial))
        .and_then(|()| finish(&partial));
    let summary = match written {
        Ok(summary) => summary,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    // A hard link never replaces anything at `dest` (a file or a symlink made since the check
    // above), unlike a rename.
    let linked = std::fs::hard_link(&partial, dest);
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists()),
        Err(e) => {
            return Err(unavailable(
                &format!("cannot link the copy to {}", dest.display()),
                &e,
            ));
        }
    }
    // The rename is durable once the directory is synced.
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| unavailable(&format!("cannot sync {}", dir.display()), &e))?;
    Ok(summary)
}

/// Creates `path` empty, exclusively, readable by its owner only; `VACUUM INTO` then writes into
/// it (it takes an empty file) and the copy keeps its mode.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map(drop)
}

/// `dest` with `.partial` appended, in the same directory so that the rename is atomic.
fn partial_path(dest: &Path) -> Result<PathBuf> {
    let Some(name) = dest.file_name() else {
        return Err(StoreError::Unavailable(format!(
            "backup: {} names no file",
            dest.display()
        )));
    };
    let mut name = name.to_owned();
    name.push(".partial");
    Ok(dest.with_file_name(name))
}

/// One read transaction over the node's database, written to `partial`.
fn copy(source: &Path, partial: &Path) -> Result<()> {
    let fail = |e: rusqlite::Error| StoreError::Unavailable(format!("backup: {e}"));
    let target = partial.to_str().ok_or_else(|| {
        StoreError::Unavailable(format!(
            "backup: {} is not valid UTF-8, which SQLite needs",
            partial.display()
        ))
    })?;
    // Read-only: this connection never writes, checkpoints or truncates the node's files.
    let conn = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(fail)?;
    // A checkpoint or a WAL restart by the node can hold the read lock back for a moment.
    conn.busy_timeout(Duration::from_secs(10)).map_err(fail)?;
    conn.execute("VACUUM INTO ?1", [target]).map_err(fail)?;
    Ok(())
}

/// Checks the copy, makes it one self-contained file, syncs it, and counts what it holds.
fn finish(partial: &Path) -> Result<BackupSummary> {
    let fail =
        |e: rusqlite::Error| StoreError::Unavailable(format!("backup: checking the copy: {e}"));
    let conn = Connection::open(partial).map_err(fail)?;
    // The copy keeps the source's WAL flag; a rollback journal leaves no `-wal` beside it. A
    // node switches its database back to WAL when it opens it.
    conn.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
        .map_err(fail)?;
    let verdict: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(fail)?;
    if verdict != "ok" {
        return Err(StoreError::Corrupt(format!(
            "backup: the copy fails its integrity check: {verdict}"
        )));
    }
    let jobs: i64 = conn
        .query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))
        .map_err(fail)?;
    drop(conn);
    let file = std::fs::File::open(partial)
        .map_err(|e| StoreError::Unavailable(format!("backup: {e}")))?;
    file.sync_all()
        .map_err(|e| StoreError::Unavailable(format!("backup: cannot sync the copy: {e}")))?;
    let bytes = file
        .metadata()
        .map_err(|e| StoreError::Unavailable(format!("backup: {e}")))?
        .len();
    Ok(BackupSummary {
        jobs: u64::try_from(jobs).unwrap_or(0),
        bytes,
    })
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::sqlite::SqliteStore;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    /// Issue 39, defect 15: the data directory was created 0755, `hourglass.db` 0644 and the
    /// backup 0644, though each holds (or lets read) every namespace's signing secret; a dangling
    /// symlink at the backup's path was replaced although the path "must not exist".
    #[test]
    fn the_store_and_its_backup_are_private_and_a_symlink_is_never_replaced() {
        let root = tempfile::tempdir().unwrap();
        // Whatever the umask, what is created is the owner's only.
        let data = root.path().join("nested").join("data");
        let store = SqliteStore::open(&data).unwrap();
        drop(store);
        assert_eq!(mode(&data), 0o700, "data dir");
        assert_eq!(mode(&root.path().join("nested")), 0o700, "its parent");
        assert_eq!(mode(&data.join(DB_FILE)), 0o600, "hourglass.db");

        let dest = root.path().join("copy.db");
        backup(&data, &dest).unwrap();
        assert_eq!(mode(&dest), 0o600, "backup");
        assert!(!root.path().join("copy.db.partial").exists());
        // The copy opens as a store.
        let restored = root.path().join("restored");
        std::fs::create_dir(&restored).unwrap();
        std::fs::copy(&dest, restored.join(DB_FILE)).unwrap();
        drop(SqliteStore::open(&restored).unwrap());

        // A dangling symlink at the path: refused, and neither it nor its target touched.
        let target = root.path().join("elsewhere.db");
        let link = root.path().join("link.db");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = backup(&data, &link).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert!(!target.exists(), "the symlink was followed");
        assert_eq!(std::fs::read_link(&link).unwrap(), target);
        // An existing file is refused as before.
        let err = backup(&data, &dest).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
    }
}
