//! A throwaway PostgreSQL cluster of a test's own (initdb on a temporary directory, a free
//! loopback port, trust auth), for what the shared server cannot give: a server the test stops
//! and starts. As root, every PostgreSQL command runs as `postgres` (initdb refuses root).

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Where initdb and pg_ctl live, when they are not found by themselves.
pub const PG_BINDIR_VAR: &str = "HOURGLASS_TEST_PG_BINDIR";

/// A throwaway PostgreSQL cluster (initdb on a temporary directory, a free loopback port, trust
/// auth) that a test may stop and start. Stopped and removed on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    pub port: u16,
    /// initdb refuses to run as root: as root, every PostgreSQL command runs as `postgres`.
    run_as: Option<String>,
}

impl Cluster {
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

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Cluster {
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
