//! A PostgreSQL schema of its own for one test, on the server `scripts/test` provides through
//! `HOURGLASS_TEST_DATABASE_URL`; its nodes run in this process.

use std::path::Path;

use hourglass_server::{NodeConfig, StoreBackend};
use hourglass_store::PostgresOptions;
use tokio_postgres::NoTls;

use super::test_config;

fn database_url() -> String {
    std::env::var("HOURGLASS_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "HOURGLASS_TEST_DATABASE_URL is not set, so the multi-node tests have no database. \
             Run them through `scripts/test`, or `scripts/with-postgres cargo test -p hourglass-server \
             --test api postgres_nodes`, or set HOURGLASS_TEST_DATABASE_URL=postgres://user@host:port/db"
        )
    })
}

/// A schema of its own for one test; its sessions carry its name as application name so the
/// clean-up can end them before dropping it.
pub struct Schema {
    url: String,
    name: String,
}

impl Schema {
    pub fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Self {
            url: database_url(),
            name: format!("hg_nodes_{}_{nanos}", std::process::id()),
        }
    }

    pub fn node_config(&self, data_dir: &Path) -> NodeConfig {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        let mut config = test_config(data_dir);
        config.store = StoreBackend::Postgres(PostgresOptions {
            schema: Some(self.name.clone()),
            pool_size: 4,
            ..PostgresOptions::new(format!(
                "{}{separator}application_name={}",
                self.url, self.name
            ))
        });
        config
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
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
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}
