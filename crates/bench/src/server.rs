//! The node under test: a child process running `hourglass serve` from the `hourglass` binary
//! (the default: its /proc figures are the server's alone, and it is the binary users run), a
//! node inside this process, or an existing node.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Child,
    InProcess,
    External,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Child => "child-process",
            Mode::InProcess => "in-process",
            Mode::External => "external",
        }
    }
}

pub struct ServerOptions {
    pub url: Option<String>,
    pub server_pid: Option<u32>,
    pub data_dir: Option<PathBuf>,
    pub in_process: bool,
    /// The `hourglass` binary for the child; `None`: the one beside this executable.
    pub server_bin: Option<PathBuf>,
    pub server_config: Option<PathBuf>,
    /// `hourglass serve --store` for the child; with it the data directory is not used.
    pub store: Option<String>,
}

enum Running {
    Child(Child),
    InProcess(Box<hourglass_server::Node>),
    External,
}

pub struct Server {
    pub base_url: String,
    pub mode: Mode,
    /// A child's binary and what its `--version` says, to tell which build was measured.
    pub binary: Option<String>,
    pid: Option<u32>,
    /// The embedded store's directory; `None` for an external node without --data-dir and for a
    /// node on another store.
    data_dir: Option<PathBuf>,
    log: Option<PathBuf>,
    /// What the child printed on stdout besides its address: its tracing output.
    stdout_log: Arc<Mutex<Vec<String>>>,
    running: Running,
    /// Holds the server log and, without --data-dir, the data directory; removed on drop.
    _work: tempfile::TempDir,
}

/// What the node's process has used: peak resident set and CPU time (user + system).
#[derive(Debug, Clone, Copy)]
pub struct ProcStats {
    pub peak_rss_kb: u64,
    pub cpu_seconds: f64,
}

/// What the server wrote to stderr (HOURGLASS_LOG=warn: warnings and errors only).
pub struct ServerLog {
    pub lines: usize,
    pub head: Vec<String>,
}

impl Server {
    pub async fn start(opts: &ServerOptions) -> anyhow::Result<Self> {
        let work = tempfile::Builder::new()
            .prefix("hourglass-bench-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        if let Some(url) = &opts.url {
            return Ok(Self {
                base_url: url.trim_end_matches('/').to_string(),
                mode: Mode::External,
                binary: None,
                pid: opts.server_pid,
                data_dir: opts.data_dir.clone(),
                log: None,
                stdout_log: Arc::default(),
                running: Running::External,
                _work: work,
            });
        }
        let data_dir = opts
            .data_dir
            .clone()
            .unwrap_or_else(|| work.path().join("data"));
        if opts.in_process {
            let mut config = hourglass_server::NodeConfig {
                listen: "127.0.0.1:0".parse().expect("valid address"),
                data_dir: data_dir.clone(),
                allow_targets: vec!["127.0.0.0/8".parse().expect("valid range")],
                ..hourglass_server::NodeConfig::default()
            };
            config.engine.shutdown_grace = Duration::from_secs(5);
            let node = hourglass_server::Node::start(config, Arc::new(hourglass_core::SystemClock))
                .await
                .context("cannot start the in-process node")?;
            return Ok(Self {
                base_url: format!("http://{}", node.addr()),
                mode: Mode::InProcess,
                binary: None,
                pid: Some(std::process::id()),
                data_dir: Some(data_dir),
                log: None,
                stdout_log: Arc::default(),
                running: Running::InProcess(Box::new(node)),
                _work: work,
            });
        }
        let exe = server_binary(opts.server_bin.as_deref())?;
        let log = work.path().join("server.log");
        let log_file = std::fs::File::create(&log).context("cannot create the server log")?;
        let version = Command::new(&exe)
            .arg("--version")
            .output()
            .await
            .with_context(|| format!("cannot run `{} --version`", exe.display()))?;
        let binary = format!(
            "{} ({})",
            exe.display(),
            String::from_utf8_lossy(&version.stdout).trim()
        );
        let mut command = Command::new(&exe);
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(["--allow-targets", "127.0.0.0/8"]);
        match &opts.store {
            Some(store) => command.args(["--store", store]),
            None => command.arg("--data-dir").arg(&data_dir),
        };
        if let Some(config) = &opts.server_config {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .env("HOURGLASS_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start `{} serve`", exe.display()))?;
        let pid = child.id();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let stdout_log: Arc<Mutex<Vec<String>>> = Arc::default();
        let collect = stdout_log.clone();
        let listening = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(addr) = listening_url(&line) {
                    return Ok(Some(addr));
                }
                push_line(&collect, line);
            }
            Ok::<_, std::io::Error>(None)
        })
        .await;
        let base_url = match listening {
            Ok(Ok(Some(base))) => base,
            Ok(Ok(None)) | Ok(Err(_)) => {
                let _ = child.wait().await;
                bail!(
                    "`hourglass serve` exited before listening:\n{}",
                    read_log(&log, &stdout_log).head.join("\n")
                );
            }
            Err(_) => bail!("`hourglass serve` did not start listening within 120 s"),
        };
        // Keep reading its stdout (where `serve` logs) so it can never block on a full pipe.
        let collect = stdout_log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                push_line(&collect, line);
            }
        });
        Ok(Self {
            base_url,
            mode: Mode::Child,
            binary: Some(binary),
            pid,
            data_dir: opts.store.is_none().then_some(data_dir),
            log: Some(log),
            stdout_log,
            running: Running::Child(child),
            _work: work,
        })
    }

    /// Waits for /readyz to answer 200.
    pub async fn wait_ready(&mut self, client: &reqwest::Client) -> anyhow::Result<()> {
        let url = format!("{}/readyz", self.base_url);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(response) = client.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(());
            }
            self.check_alive()?;
            if tokio::time::Instant::now() > deadline {
                bail!("{url} did not answer 200 within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fails if the child process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Running::Child(child) = &mut self.running
            && let Some(status) = child.try_wait()?
        {
            let log = self.log.as_deref().map(|l| read_log(l, &self.stdout_log));
            bail!(
                "the server process exited ({status}); its log:\n{}",
                log.map(|l| l.head.join("\n")).unwrap_or_default()
            );
        }
        Ok(())
    }

    pub fn stats(&self) -> Option<ProcStats> {
        proc_stats(self.pid?)
    }

    /// Whether the figures from `stats` include this bench's own work (receiver, submitters).
    pub fn stats_include_bench(&self) -> bool {
        self.mode == Mode::InProcess
    }

    /// Checkpoints the WAL into the database file (through a connection of our own, which SQLite
    /// allows next to the node's), then sums the database and WAL file sizes. `None` when the data
    /// directory is unknown (an external node without --data-dir).
    pub async fn store_bytes(&self) -> Option<anyhow::Result<u64>> {
        let dir = self.data_dir.clone()?;
        Some(
            tokio::task::spawn_blocking(move || checkpoint_and_measure(&dir))
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r),
        )
    }

    /// Stops the node (SIGTERM for the child, so it drains as in production) and returns its log.
    pub async fn shutdown(self) -> anyhow::Result<Option<ServerLog>> {
        match self.running {
            Running::External => Ok(None),
            Running::InProcess(node) => {
                node.shutdown().await;
                Ok(None)
            }
            Running::Child(mut child) => {
                if let Some(pid) = self.pid {
                    let _ = std::process::Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status();
                }
                match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
                    Ok(status) => {
                        let status = status?;
                        if !status.success() {
                            eprintln!("warning: the server exited with {status}");
                        }
                    }
                    Err(_) => {
                        eprintln!("warning: the server did not stop within 30 s; killing it");
                        child.kill().await?;
                    }
                }
                Ok(self.log.as_deref().map(|l| read_log(l, &self.stdout_log)))
            }
        }
    }
}

/// The `hourglass` binary the child node runs: the one asked for, else the one in this
/// executable's directory (`cargo build -p hourglass -p hourglass-bench` puts both there).
fn server_binary(asked: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = asked {
        return Ok(path.to_path_buf());
    }
    let me = std::env::current_exe().context("cannot find this executable")?;
    let beside = me.with_file_name("hourglass");
    if !beside.is_file() {
        bail!(
            "no hourglass binary beside this one ({}): build it with `cargo build -p hourglass` \
             (with --release for a release bench), or name one with --server-bin",
            beside.display()
        );
    }
    Ok(beside)
}

fn checkpoint_and_measure(dir: &Path) -> anyhow::Result<u64> {
    let db = dir.join("hourglass.db");
    let conn =
        rusqlite::Connection::open(&db).with_context(|| format!("cannot open {}", db.display()))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let (busy, _log, _done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .context("wal checkpoint failed")?;
    if busy != 0 {
        eprintln!("warning: the WAL checkpoint was blocked; store_bytes includes the WAL");
    }
    drop(conn);
    let mut total = 0;
    for name in ["hourglass.db", "hourglass.db-wal"] {
        if let Ok(meta) = std::fs::metadata(dir.join(name)) {
            total += meta.len();
        }
    }
    Ok(total)
}

/// Keeps a line of the child's stdout, without terminal colours.
fn push_line(log: &Mutex<Vec<String>>, line: String) {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip a CSI sequence: ESC [ parameters final-byte.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    // The node the bench starts has no API keys on purpose; its notice about that is expected.
    if plain.contains("development mode: no api keys configured") || is_announcement(&plain) {
        return;
    }
    log.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(plain);
}

/// Whether a line is one that `serve` prints after its listening line to say where the dashboard
/// and the metrics are (plain text, or the message of a JSON event), not a log event.
fn is_announcement(line: &str) -> bool {
    const PREFIXES: [&str; 2] = ["dashboard: ", "hourglass serving metrics on "];
    let event = serde_json::from_str::<serde_json::Value>(line).ok();
    let message = event
        .as_ref()
        .and_then(|event| event["fields"]["message"].as_str())
        .unwrap_or(line);
    PREFIXES.iter().any(|prefix| message.starts_with(prefix))
}

/// The child's log: its stdout (tracing) lines, then its stderr (panics, if any).
fn read_log(stderr: &Path, stdout: &Mutex<Vec<String>>) -> ServerLog {
    let mut lines = stdout
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    let text = std::fs::read_to_string(stderr).unwrap_or_default();
    lines.extend(text.lines().map(str::to_string));
    ServerLog {
        lines: lines.len(),
        head: lines.into_iter().take(10).collect(),
    }
}

/// Clock ticks per second of /proc/<pid>/stat; USER_HZ is 100 on every Linux we run on, but ask.
pub fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// VmHWM from /proc/<pid>/status and utime + stime from /proc/<pid>/stat.
pub fn proc_stats(pid: u32) -> Option<ProcStats> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let peak_rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its closing parenthesis start at
    // field 3 (state), so utime (field 14) and stime (field 15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(ProcStats {
        peak_rss_kb,
        cpu_seconds: (utime + stime) as f64 / clock_ticks(),
    })
}

/// The URL in `serve`'s listening line: plain text, or the message of its first JSON log event
/// when a config file asks for JSON logs.
fn listening_url(line: &str) -> Option<String> {
    const PREFIX: &str = "hourglass listening on ";
    if let Some(url) = line.strip_prefix(PREFIX) {
        return Some(url.trim().to_string());
    }
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let url = event["fields"]["message"].as_str()?.strip_prefix(PREFIX)?;
    Some(url.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_lines_lose_their_colours() {
        let log = super::Mutex::new(Vec::new());
        super::push_line(&log, "\u{1b}[33m WARN\u{1b}[0m stale lease".into());
        super::push_line(
            &log,
            "WARN development mode: no api keys configured, ...".into(),
        );
        assert_eq!(*log.lock().unwrap(), vec![" WARN stale lease".to_string()]);
    }

    /// `serve`'s dashboard and metrics lines are not warnings: the report counts only the rest.
    #[test]
    fn serve_announcements_are_not_log_lines() {
        let log = super::Mutex::new(Vec::new());
        for line in [
            "dashboard: http://127.0.0.1:7070/",
            "hourglass serving metrics on http://127.0.0.1:9090/metrics",
            r#"{"timestamp":"2026-11-28T12:00:00Z","level":"INFO","fields":{"message":"dashboard: http://127.0.0.1:7070/"},"target":"hourglass"}"#,
            r#"{"level":"WARN","fields":{"message":"stale lease"}}"#,
            "see the dashboard: it is at /",
        ] {
            super::push_line(&log, line.into());
        }
        assert_eq!(
            *log.lock().unwrap(),
            vec![
                r#"{"level":"WARN","fields":{"message":"stale lease"}}"#.to_string(),
                "see the dashboard: it is at /".to_string(),
            ]
        );
    }

    #[test]
    fn reads_own_proc_figures() {
        let stats = super::proc_stats(std::process::id()).expect("/proc is readable");
        assert!(stats.peak_rss_kb > 0);
        assert!(stats.cpu_seconds >= 0.0);
    }
}
