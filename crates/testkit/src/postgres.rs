//! PostgreSQL for tests: the server `scripts/with-postgres` provides (its URL in
//! `HOURGLASS_TEST_DATABASE_URL`, whose user may create schemas and databases), with a
//! [`Schema`] or a [`TestDatabase`] of a test's own on it, dropped when the test ends however it
//! ends; and [`Cluster`], a throwaway server of a test's own that it may stop and start.
//!
//! Without the variable a test that needs PostgreSQL panics, never skips: a suite that passes
//! without a database would hide a broken CI set-up.

mod cluster;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

pub use cluster::{Cluster, PG_BINDIR_VAR};

/// The variable `scripts/with-postgres` sets to the URL of a PostgreSQL server.
pub const DATABASE_URL_VAR: &str = "HOURGLASS_TEST_DATABASE_URL";

/// The server's URL from [`DATABASE_URL_VAR`]. Panics, naming how to provide one, when it is not
/// set.
pub fn admin_url() -> String {
    match std::env::var(DATABASE_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{DATABASE_URL_VAR} is not set: these tests need a PostgreSQL server whose user may \
             create schemas and databases. `scripts/test` provides one (the local server on \
             127.0.0.1:5432 or a throwaway cluster), and so does `scripts/with-postgres cargo \
             test ...`; or set it yourself, e.g. \
             {DATABASE_URL_VAR}=postgres://postgres@127.0.0.1:5432/postgres"
        ),
    }
}

/// `url` with its database (the path) replaced by `database`; the query string is kept.
pub fn url_with_database(url: &str, database: &str) -> String {
    let authority_start = url
        .find("://")
        .map(|i| i + 3)
        .unwrap_or_else(|| panic!("not a postgres:// URL: {url}"));
    let rest = &url[authority_start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest[authority_end..]
        .find('?')
        .map(|i| &rest[authority_end + i..])
        .unwrap_or("");
    format!(
        "{}{}/{database}{query}",
        &url[..authority_start],
        &rest[..authority_end]
    )
}

/// Runs SQL statements (no parameters) on `url` over a connection of their own.
pub async fn execute(url: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    let driver = tokio::spawn(connection);
    let result = client.batch_execute(sql).await;
    drop(client);
    let _ = driver.await;
    result
}

/// Runs a query on `url` over a connection of its own and returns its rows; panics on failure.
pub async fn query(url: &str, sql: &str) -> Vec<tokio_postgres::Row> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    let driver = tokio::spawn(connection);
    let rows = client
        .query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("query failed ({e}): {sql}"));
    drop(client);
    let _ = driver.await;
    rows
}

/// A name no other test of any process on the server uses: `hg_<prefix>_<pid>_<ns>_<n>`.
fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .subsec_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("hg_{prefix}_{}_{nanos}_{n}", std::process::id())
}

/// Runs `work` to its end from a `Drop`: drop runs inside the test's runtime, which cannot be
/// blocked on, so on a thread of its own with a runtime of its own, waited for.
fn run_to_end<T: Send + 'static>(
    work: impl Future<Output = T> + Send + 'static,
) -> std::thread::Result<T> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the clean-up")
            .block_on(work)
    })
    .join()
}

/// A schema of its own for one test on the server at [`admin_url`], dropped with everything in
/// it when the test ends. Sessions opened with [`Schema::url`] carry the schema's name as their
/// application name, so the clean-up can end them first.
pub struct Schema {
    admin_url: String,
    name: String,
}

impl Schema {
    /// A schema named `hg_<prefix>_…` (created by whoever first opens a store in it).
    pub fn new(prefix: &str) -> Self {
        Self {
            admin_url: admin_url(),
            name: unique_name(prefix),
        }
    }

    /// The schema's name, for the store's options.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's URL with the schema's name as application name.
    pub fn url(&self) -> String {
        let separator = if self.admin_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!(
            "{}{separator}application_name={}",
            self.admin_url, self.name
        )
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        // A store's pooled connections are driven by the test's runtime, blocked meanwhile, so
        // one may still hold a transaction's row locks (its ROLLBACK unsent): end them rather
        // than wait for the server's idle-in-transaction timeout.
        let dropped = run_to_end(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
            tokio::spawn(connection);
            client
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = $1",
                    &[&name],
                )
                .await?;
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                .await
        });
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}

/// A database created for one test on the server at an admin URL, dropped (with whatever
/// connections killed or paused nodes left behind) when the test ends, however it ends.
pub struct TestDatabase {
    admin_url: String,
    pub name: String,
    pub url: String,
}

impl TestDatabase {
    /// Creates a database named `hg_<prefix>_…`; panics when it cannot.
    pub async fn create(admin_url: &str, prefix: &str) -> Self {
        let name = unique_name(prefix);
        execute(admin_url, &format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("cannot create database {name} on {admin_url}: {e}"));
        let url = url_with_database(admin_url, &name);
        println!("database {name} created");
        Self {
            admin_url: admin_url.to_string(),
            name,
            url,
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let name = &self.name;
        match run_to_end(async move { execute(&admin, &sql).await }) {
            Ok(Ok(())) => println!("database {name} dropped"),
            Ok(Err(e)) => eprintln!("warning: cannot drop database {name}: {e}"),
            Err(_) => eprintln!("warning: dropping database {name} panicked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::url_with_database;

    #[test]
    fn a_url_gets_another_database_and_keeps_its_query() {
        assert_eq!(
            url_with_database("postgres://u@h:5432/postgres?sslmode=disable", "t1"),
            "postgres://u@h:5432/t1?sslmode=disable"
        );
        assert_eq!(
            url_with_database("postgres://u@h:5432", "t1"),
            "postgres://u@h:5432/t1"
        );
        assert_eq!(
            url_with_database("postgres://u@h?x=1", "t1"),
            "postgres://u@h/t1?x=1"
        );
    }
}
