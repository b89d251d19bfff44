//! A PostgreSQL schema of its own for one test (the testkit's, on the server `scripts/test`
//! provides through `HOURGLASS_TEST_DATABASE_URL`); its nodes run in this process.

use std::path::Path;

use hourglass_server::{NodeConfig, StoreBackend};
use hourglass_store::PostgresOptions;

use super::test_config;

/// A schema dropped when the test ends; its nodes' sessions carry its name as application name,
/// so the clean-up can end them first.
pub struct Schema(hourglass_testkit::postgres::Schema);

impl Schema {
    pub fn new() -> Self {
        Self(hourglass_testkit::postgres::Schema::new("nodes"))
    }

    pub fn node_config(&self, data_dir: &Path) -> NodeConfig {
        let mut config = test_config(data_dir);
        config.store = StoreBackend::Postgres(PostgresOptions {
            schema: Some(self.0.name().to_string()),
            pool_size: 4,
            ..PostgresOptions::new(self.0.url())
        });
        config
    }
}
