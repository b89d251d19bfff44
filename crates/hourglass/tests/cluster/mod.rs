//! Harness for the tests that run several `hourglass serve` processes on PostgreSQL: a fresh
//! database per test (or a throwaway cluster the test may stop), node processes it can SIGKILL,
//! SIGSTOP and SIGCONT, a webhook receiver cheap enough for tens of thousands of deliveries, and
//! the accounting that holds what arrived against what was acknowledged.
#![allow(
    dead_code,
    reason = "the multi-node and the outage test use different parts of the harness"
)]

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// The variable `scripts/test` sets to a PostgreSQL URL whose user may create databases.
pub const DATABASE_URL_VAR: &str = "HOURGLASS_TEST_DATABASE_URL";
/// Where initdb and pg_ctl live, when they are not found by themselves.
pub const PG_BINDIR_VAR: &str = "HOURGLASS_TEST_PG_BINDIR";

const READY_LINE: &str = "hourglass listening on http://";
/// How long a node may take to print its listening line (it runs migrations first).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

pub fn rfc3339_ms(ms: i64) -> String {
    format!(
        "{:.3}",
        jiff::Timestamp::from_millisecond(ms).expect("valid instant")
    )
}

pub fn instant_ms(value: &Value) -> i64 {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected an instant, got {value}"))
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{value} is not an instant: {e}"))
        .as_millisecond()
}

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

pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The node processes of one test and their logs (stdout and stderr, one file per process),
/// printed if the test panics.
pub struct Nodes {
    dir: tempfile::TempDir,
    logs: Mutex<Vec<PathBuf>>,
}

/// How to start a node.
#[derive(Clone)]
pub struct NodeOptions {
    pub store: String,
    /// `--lease-ttl`, e.g. "3s".
    pub lease_ttl: String,
    /// The test's name for the node, in its log file's name and in messages. (The node names
    /// its lease owner itself: host, pid and a random part.)
    pub name: String,
}

impl Default for Nodes {
    fn default() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            logs: Mutex::default(),
        }
    }
}

impl Nodes {
    /// Starts `hourglass serve --store ...` on a fresh loopback port and waits until it listens
    /// and answers /healthz.
    pub async fn start(&self, opts: &NodeOptions) -> NodeProc {
        let log = {
            let mut logs = self.logs.lock().unwrap();
            let log = self
                .dir
                .path()
                .join(format!("{}-{}.log", opts.name, logs.len() + 1));
            logs.push(log.clone());
            log
        };
        // A node on PostgreSQL keeps nothing locally; its working directory is a scratch one so
        // that nothing lands in the source tree whatever it writes.
        let cwd = self.dir.path().join(&opts.name);
        std::fs::create_dir_all(&cwd).expect("node working dir");
        let stderr = std::fs::File::create(&log).expect("node log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg("serve")
            .args(["--store", &opts.store])
            .args(["--listen", "127.0.0.1:0"])
            .args(["--lease-ttl", &opts.lease_ttl])
            .args(["--allow-targets", "127.0.0.0/8"])
            .current_dir(&cwd)
            .env("HOURGLASS_LOG", "warn")
            .env("NO_COLOR", "1")
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_STORE")
            .env_remove("HOURGLASS_LOG_FORMAT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn hourglass serve");
        let pid = child.id().expect("a running child has a pid");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        // The node logs at warn level: few lines, so plain blocking appends are fine here.
        let mut out_log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open node log for stdout");
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("read node stdout") {
                if let Some(addr) = line.strip_prefix(READY_LINE) {
                    return Some(addr.trim().parse::<SocketAddr>().expect("listen address"));
                }
                let _ = writeln!(out_log, "{line}");
            }
            None
        })
        .await;
        let addr = match ready {
            Ok(Some(addr)) => addr,
            Ok(None) => {
                let status = child.wait().await.expect("wait for node");
                panic!(
                    "node {} exited ({status}) before listening; log:\n{}",
                    opts.name,
                    tail(&log, 40)
                );
            }
            Err(_) => panic!(
                "node {} did not report listening within {READY_TIMEOUT:?}; log:\n{}",
                opts.name,
                tail(&log, 40)
            ),
        };
        // Keep draining stdout (where the node logs) into the log file, so that the node never
        // blocks on a full pipe.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = writeln!(out_log, "{line}");
            }
        });
        // reqwest is built without a default TLS provider; the binary installs ring, so do we.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let api = Api::new(addr);
        let (status, body) = api.call("GET", "/healthz", None).await;
        assert_eq!(status, 200, "healthz of {} after start: {body}", opts.name);
        NodeProc {
            name: opts.name.clone(),
            child,
            pid,
            api,
            log,
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for log in self.logs.lock().unwrap().iter() {
                eprintln!(
                    "----- {} (tail) -----\n{}",
                    log.file_name().unwrap().to_string_lossy(),
                    tail(log, 40)
                );
            }
        }
    }
}

/// One `hourglass serve` process; SIGKILLed if dropped.
pub struct NodeProc {
    pub name: String,
    child: Child,
    pub pid: u32,
    pub api: Api,
    pub log: PathBuf,
}

impl NodeProc {
    fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal} {} failed: {sent}", self.pid);
    }

    /// SIGSTOP: the process stays alive and keeps its connections, but does nothing at all.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after a pause.
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// SIGKILL, then reap.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        self.child.wait().await.expect("reap killed node");
    }

    /// SIGTERM, then wait for the drain to end the process.
    pub async fn terminate(mut self, timeout: Duration) -> ExitStatus {
        self.signal("TERM");
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.expect("wait for node"),
            Err(_) => panic!(
                "node {} did not exit within {timeout:?} of SIGTERM",
                self.name
            ),
        }
    }

    /// The log's warning and error lines (the node logs at warn level): how many, and the first
    /// few, for the test's summary.
    pub fn warnings(&self, first: usize) -> (usize, Vec<String>) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked"))
            .map(str::to_string)
            .collect();
        let count = lines.len();
        (count, lines.into_iter().take(first).collect())
    }

    /// The exit status if the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll node")
    }

    /// The node's Prometheus text.
    pub async fn metrics(&self) -> Metrics {
        let (status, body) = self.api.call("GET", "/metrics", None).await;
        assert_eq!(status, 200, "metrics of {}", self.name);
        Metrics(body.as_str().unwrap_or_default().to_string())
    }
}

/// A scrape of /metrics.
#[derive(Clone, Default)]
pub struct Metrics(pub String);

impl Metrics {
    /// The sum over the series of `name` whose labels include every `key="value"` of `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                let (metric, label_text) = match series.split_once('{') {
                    Some((metric, rest)) => (metric, rest.trim_end_matches('}')),
                    None => (series, ""),
                };
                if metric != name {
                    return None;
                }
                let matches = labels
                    .iter()
                    .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
                matches.then(|| value.parse::<f64>().ok()).flatten()
            })
            .sum()
    }

    /// Webhook deliveries this node recorded as delivered.
    pub fn delivered(&self) -> f64 {
        self.sum(
            "hourglass_deliveries_total",
            &[("target", "webhook"), ("outcome", "delivered")],
        )
    }

    pub fn stale_completions(&self) -> f64 {
        self.sum("hourglass_stale_completions_total", &[])
    }

    /// Claims the renewer found taken over or fenced before the node finished them.
    pub fn lost_leases(&self) -> f64 {
        self.sum("hourglass_lost_leases_total", &[])
    }

    pub fn store_errors(&self) -> f64 {
        self.sum("hourglass_store_errors_total", &[])
    }
}

/// A JSON client for one node, with a request timeout so that a wedged node fails the test
/// instead of hanging it.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
}

/// An answer: status, the headers a test looks at, and the JSON body (a string if not JSON).
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
        }
    }

    /// Sends a request; a transport error is an error, not a panic (a node may be down).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, reqwest::Error> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    /// Sends a request that must reach the node; returns status and body.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let answer = self
            .send(method, path, body.as_ref())
            .await
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.base));
        (answer.status, answer.body)
    }
}

/// One webhook delivery as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub webhook_id: String,
    pub job_id: String,
    pub due_ms: i64,
    pub received_ms: i64,
    /// `n` of the payload `{"n": n}`, if it has one.
    pub n: Option<u64>,
}

/// A webhook receiver on loopback that answers 204 to everything and records each delivery.
/// Unlike the shared harness's receiver it does no per-request scan, so it keeps up with
/// thousands of deliveries a second.
#[derive(Clone, Default)]
pub struct Hooks {
    inner: Arc<HooksInner>,
}

#[derive(Default)]
struct HooksInner {
    seen: Mutex<Vec<Hook>>,
    count: AtomicUsize,
    /// Woken on every delivery, for waiters on a count.
    arrived: Notify,
}

impl Hooks {
    pub async fn start() -> (Hooks, String) {
        let hooks = Hooks::default();
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(hooks.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (hooks, format!("http://{addr}/hook"))
    }

    pub fn count(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    pub fn snapshot(&self) -> Vec<Hook> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// Waits until at least `n` deliveries arrived; false after `timeout`.
    pub async fn wait_count(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.arrived.notified();
            if self.count() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.count() >= n;
            }
        }
    }
}

async fn receive(
    State(hooks): State<Hooks>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let received_ms = now_ms();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let due_ms = header("hourglass-due-at")
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or(i64::MIN);
    let n = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["n"].as_u64());
    let hook = Hook {
        webhook_id: header("webhook-id"),
        job_id: header("hourglass-job-id"),
        due_ms,
        received_ms,
        n,
    };
    hooks.inner.seen.lock().unwrap().push(hook);
    hooks.inner.count.fetch_add(1, Ordering::AcqRel);
    hooks.inner.arrived.notify_waiters();
    StatusCode::NO_CONTENT
}

/// What the test knows about an acknowledged job.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    pub due_ms: i64,
    pub n: u64,
}

/// Acknowledged jobs by id, and the payload numbers of creates that were answered with an error
/// (their jobs may or may not exist: a commit can succeed just as its answer is lost).
#[derive(Default)]
pub struct Ledger {
    pub jobs: HashMap<String, Expected>,
    pub unacknowledged: BTreeSet<u64>,
    next_n: u64,
}

/// The jobs of one batch create as the test planned them: (payload number, due ms).
pub type Planned = Vec<(u64, i64)>;

/// The body of a batch create of one-off webhook jobs, one per due time, and their numbers.
pub fn batch_body(ledger: &mut Ledger, url: &str, dues: &[i64]) -> (Value, Planned) {
    let planned: Planned = dues
        .iter()
        .map(|&due| {
            ledger.next_n += 1;
            (ledger.next_n, due)
        })
        .collect();
    let jobs: Vec<Value> = planned
        .iter()
        .map(|(n, due)| {
            json!({
                "type": "cluster.test",
                "schedule": {"at": rfc3339_ms(*due)},
                "target": {"webhook": {"url": url}},
                "payload": {"n": n},
            })
        })
        .collect();
    (json!({"jobs": jobs}), planned)
}

impl Ledger {
    /// Records the jobs of an acknowledged batch create, checking what the node answered.
    pub fn acknowledge(&mut self, planned: &[(u64, i64)], body: &Value) {
        let created = body["jobs"]
            .as_array()
            .unwrap_or_else(|| panic!("batch answer without jobs: {body}"));
        assert_eq!(created.len(), planned.len(), "batch answer: {body}");
        for (job, &(n, due_ms)) in created.iter().zip(planned) {
            let id = job["id"].as_str().expect("job id").to_string();
            assert_eq!(
                instant_ms(&job["next_due_at"]),
                due_ms,
                "next_due_at of a new job is its `at`: {job}"
            );
            let previous = self.jobs.insert(id.clone(), Expected { due_ms, n });
            assert!(previous.is_none(), "job id {id} handed out twice");
        }
    }

    pub fn refused(&mut self, planned: &[(u64, i64)]) {
        self.unacknowledged.extend(planned.iter().map(|(n, _)| *n));
    }

    pub fn last_due_ms(&self) -> i64 {
        self.jobs.values().map(|e| e.due_ms).max().unwrap_or(0)
    }

    /// Whether every acknowledged job has at least one delivery.
    pub fn all_delivered(&self, hooks: &[Hook]) -> bool {
        if hooks.len() < self.jobs.len() {
            return false;
        }
        let seen: std::collections::HashSet<&str> =
            hooks.iter().map(|h| h.job_id.as_str()).collect();
        self.jobs.keys().all(|id| seen.contains(id.as_str()))
    }
}

/// Deliveries held against the ledger.
#[derive(Default)]
pub struct Accounting {
    /// Acknowledged jobs never delivered.
    pub missing: Vec<String>,
    /// Deliveries of jobs the test never had acknowledged and whose payload is no refused create.
    pub unknown: Vec<String>,
    /// Deliveries of refused creates whose commit went through after all.
    pub refused_but_delivered: usize,
    pub early: Vec<String>,
    /// Jobs delivered under more than one delivery id.
    pub mixed_ids: Vec<String>,
    /// Deliveries whose due header or payload is not the job's.
    pub wrong: Vec<String>,
    /// Jobs delivered more than once, and the extra deliveries.
    pub duplicated_jobs: Vec<String>,
    pub extra_deliveries: usize,
    /// Per acknowledged job: (due ms, first receive ms).
    pub first: HashMap<String, (i64, i64)>,
    /// Receive times (ms) of every delivery after a job's first.
    pub redelivered_ms: Vec<i64>,
}

pub fn account(ledger: &Ledger, hooks: &[Hook]) -> Accounting {
    let mut acc = Accounting::default();
    let mut by_job: HashMap<&str, Vec<&Hook>> = HashMap::new();
    for h in hooks {
        by_job.entry(h.job_id.as_str()).or_default().push(h);
    }
    for (id, expected) in &ledger.jobs {
        if !by_job.contains_key(id.as_str()) {
            acc.missing
                .push(format!("{id} due {}", rfc3339_ms(expected.due_ms)));
        }
    }
    for (id, list) in &by_job {
        let ids: BTreeSet<&str> = list.iter().map(|h| h.webhook_id.as_str()).collect();
        if ids.len() != 1 {
            acc.mixed_ids.push(format!("{id}: {ids:?}"));
        }
        if list.len() > 1 {
            acc.duplicated_jobs.push(id.to_string());
            acc.extra_deliveries += list.len() - 1;
        }
        for h in list {
            if h.received_ms < h.due_ms {
                acc.early.push(format!(
                    "{id}: received {} ms before its due {}",
                    h.due_ms - h.received_ms,
                    rfc3339_ms(h.due_ms)
                ));
            }
        }
        match ledger.jobs.get(*id) {
            Some(expected) => {
                for h in list {
                    if h.due_ms != expected.due_ms || h.n != Some(expected.n) {
                        acc.wrong.push(format!(
                            "{id}: due {} n {:?}, expected due {} n {}",
                            rfc3339_ms(h.due_ms),
                            h.n,
                            rfc3339_ms(expected.due_ms),
                            expected.n
                        ));
                    }
                }
                let mut times: Vec<i64> = list.iter().map(|h| h.received_ms).collect();
                times.sort_unstable();
                acc.first
                    .insert(id.to_string(), (expected.due_ms, times[0]));
                acc.redelivered_ms.extend(&times[1..]);
            }
            None => {
                if list[0]
                    .n
                    .is_some_and(|n| ledger.unacknowledged.contains(&n))
                {
                    acc.refused_but_delivered += 1;
                } else {
                    acc.unknown
                        .push(format!("{id} (payload n {:?})", list[0].n));
                }
            }
        }
    }
    acc.missing.sort();
    acc
}

impl Accounting {
    /// Asserts the delivery guarantees: nothing lost, nothing unknown, nothing early, one
    /// delivery id per job, the right due time and payload.
    pub fn assert_guarantees(&self) {
        let examples = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>();
        assert!(
            self.missing.is_empty(),
            "{} acknowledged jobs never delivered, e.g. {:?}",
            self.missing.len(),
            examples(&self.missing)
        );
        assert!(
            self.unknown.is_empty(),
            "{} deliveries of jobs never created, e.g. {:?}",
            self.unknown.len(),
            examples(&self.unknown)
        );
        assert!(
            self.early.is_empty(),
            "{} deliveries before their due time, e.g. {:?}",
            self.early.len(),
            examples(&self.early)
        );
        assert!(
            self.mixed_ids.is_empty(),
            "{} jobs delivered under more than one delivery id, e.g. {:?}",
            self.mixed_ids.len(),
            examples(&self.mixed_ids)
        );
        assert!(
            self.wrong.is_empty(),
            "{} deliveries with another due time or payload, e.g. {:?}",
            self.wrong.len(),
            examples(&self.wrong)
        );
    }

    /// First-delivery lateness (ms) of the acknowledged jobs that `filter` selects by due time.
    pub fn lateness(&self, filter: impl Fn(i64) -> bool) -> Vec<i64> {
        self.first
            .values()
            .filter(|(due, _)| filter(*due))
            .map(|(due, first)| first - due)
            .collect()
    }
}

pub fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// "n=… p50=… p99=… max=…" of lateness figures in ms.
pub fn summary(values: &mut [i64]) -> String {
    values.sort_unstable();
    format!(
        "n={} p50={}ms p90={}ms p99={}ms max={}ms",
        values.len(),
        percentile(values, 0.5),
        percentile(values, 0.9),
        percentile(values, 0.99),
        values.last().copied().unwrap_or(0)
    )
}

/// A small xorshift generator, so the tests need no extra dependency; the seed is printed.
pub struct Rng(u64);

impl Rng {
    pub fn from_env_or_clock(var: &str) -> Self {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("seed: {seed} (set {var} to replay)");
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// Waits until `ready` holds, polling every `every`; false after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, every: Duration, mut ready: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if ready().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}
