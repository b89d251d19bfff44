//! PostgreSQL for the tests: a fresh database per test on the server `scripts/test` provides,
//! or a throwaway cluster of the test's own that it may stop and start.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::tail;

/// The variable `scripts/test` sets to a PostgreSQL URL whose user may create databases.
pub const DATABASE_URL_VAR: &str = "HOURGLASS_TEST_DATABASE_URL";
/// Where initdb and pg_ctl live, when they are not found by themselves.
pub const PG_BINDIR_VAR: &str = "HOURGLASS_TEST_PG_BINDIR";

/// The admin URL from the environment. Panics, never skips: a suite that silently passes
/// without a database would hide a broken CI set-up.
pub fn admin_url() -> String {
    match std::env::var(DATABASE_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!(
            "{DATABASE_URL_VAR} is not set: these tests need a PostgreSQL server whose user may \
             create databases. `scripts/test` provides one (the local server on 127.0.0.1:5432 or \
             a throwaway cluster); or set it yourself, e.g. \
             {DATABASE_URL_VAR}=postgres://postgres@127.0.0.1:5432/postgres"
        ),
    }
}

/// `url` with its database (the path) replaced by `database`; the query string is kept.
pub fn url_with_database(url: &str, database: &str) -> String {
    let authority_start = url
        .find("://")
        .map(|i| i + 3)
        .unwrap_or_else(|| panic!("{DATABASE_URL_VAR} is not a postgres:// URL: {url}"));
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

/// Runs one SQL statement (no parameters) on `url` over a connection of its own.
pub async fn execute(url: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(connection);
    let result = client.batch_execute(sql).await;
    drop(client);
    let _ = driver.await;
    result
}

/// Runs a query on `url` over a connection of its own and returns its rows.
pub async fn query(url: &str, sql: &str) -> Vec<tokio_postgres::Row> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
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

/// A database created for one test on the server at `admin_url`, dropped (with whatever
/// connections killed or paused nodes left behind) when the test ends, however it ends.
pub struct TestDatabase {
    admin_url: String,
    pub name: String,
    pub url: String,
}

impl TestDatabase {
    pub async fn create(admin_url: &str, prefix: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("hourglass_{prefix}_{}_{nanos}", std::process::id());
        execute(admin_url, &format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| {
                panic!("cannot create database {name} through {DATABASE_URL_VAR}: {e}")
            });
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
        // Drop runs inside the test's runtime, which cannot be blocked on: drop the database from
        // a thread with a runtime of its own, and wait for it.
        let admin = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime for the drop")
                .block_on(execute(&admin, &sql))
        })
        .join();
        match dropped {
            Ok(Ok(())) => println!("database {name} dropped"),
            Ok(Err(e)) => eprintln!("warning: cannot drop database {name}: {e}"),
            Err(_) => eprintln!("warning: dropping database {name} panicked"),
        }
    }
}

/// A throwaway PostgreSQL cluster (initdb on a temporary directory, a free loopback port, trust
/// auth) that a test may stop and start. Stopped and removed on drop.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    pub port: u16,
    /// initdb refuses to run as root: as root, every PostgreSQL command runs as `postgres`.
    run_as: Option<String>,
}

impl PgCluster {
    /// Creates and starts the cluster. Panics (loudly, with what to install) when initdb is
    /// nowhere to be found.
    pub fn start() -> Self {
        let bindir = pg_bindir();
        let dir = tempfile::Builder::new()
            .prefix("hourglass-pg-")
            .tempdir()
            .expect("temp dir for the cluster");
        let run_as = is_root().then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            run_checked(
                std::process::Command::new("chown")
                    .arg("-R")
                    .arg(format!("{user}:"))
                    .arg(dir.path()),
                "chown the cluster directory",
            );
        }
        let port = free_port();
        let cluster = Self {
            dir,
            bindir,
            port,
            run_as,
        };
        let data = cluster.data_dir();
        run_checked(
            cluster.pg_command("initdb").arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        );
        cluster.start_again();
        cluster
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// The URL of `database` on this cluster.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn pg_command(&self, program: &str) -> std::process::Command {
        let path = self.bindir.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => std::process::Command::new(path),
        };
        command.stdin(Stdio::null());
        command
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub fn start_again(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories={} -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        run_checked(
            self.pg_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .arg("-l")
                .arg(self.log_path())
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            "pg_ctl start",
        );
    }

    /// `pg_ctl stop -m fast`: disconnects every client, then shuts down cleanly.
    pub fn stop_fast(&self) {
        run_checked(
            self.pg_command("pg_ctl")
                .arg("-D")
                .arg(self.data_dir())
                .args(["-w", "-t", "60", "-m", "fast", "stop"]),
            "pg_ctl stop",
        );
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path(), lines)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let status = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-w", "-t", "30", "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // pg_ctl fails when the test had stopped the cluster already; that is fine.
        if std::thread::panicking() {
            eprintln!("----- postgres log (tail) -----\n{}", self.log_tail(30));
        }
        drop(status);
    }
}

fn run_checked(command: &mut std::process::Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory holding initdb and pg_ctl: `HOURGLASS_TEST_PG_BINDIR`, else `pg_config
/// --bindir`, else the newest /usr/lib/postgresql/<version>/bin (Debian keeps them off PATH).
fn pg_bindir() -> PathBuf {
    let has_initdb = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(dir) = std::env::var(PG_BINDIR_VAR) {
        let dir = PathBuf::from(dir);
        assert!(
            has_initdb(&dir),
            "{PG_BINDIR_VAR}={} holds no initdb and pg_ctl",
            dir.display()
        );
        return dir;
    }
    if let Ok(out) = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_initdb(&dir) {
            return dir;
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_initdb(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "initdb and pg_ctl not found: install PostgreSQL's server package (Debian: \
             postgresql) or set {PG_BINDIR_VAR}; `scripts/test` installs it when missing"
        )
    })
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}
