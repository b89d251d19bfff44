//! `hourglass serve` processes: started on a free loopback port, on the embedded store (in a
//! directory that outlives the process, so a restart finds its jobs) or on PostgreSQL, and
//! stopped by SIGKILL, SIGTERM or SIGSTOP/SIGCONT.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::{Api, tail};

const READY_LINE: &str = "hourglass listening on http://";
/// The address in a node's listening line: plain text, or with `--log-format json` a JSON log
/// event whose message is that text.
fn ready_address(line: &str) -> Option<SocketAddr> {
    let text = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(event) => event["fields"]["message"].as_str()?.to_owned(),
        Err(_) => line.to_owned(),
    };
    let addr = text.strip_prefix(READY_LINE)?;
    Some(addr.trim().parse().expect("listen address"))
}

/// How long a node may take to print its listening line (it runs migrations first).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The node processes of one test and their logs (stdout and stderr, one file per process),
/// printed if the test panics.
pub struct Nodes {
    dir: tempfile::TempDir,
    logs: Mutex<Vec<PathBuf>>,
}

/// How to start a node.
#[derive(Clone)]
pub struct NodeOptions {
    /// The test's name for the node, in its log file's name and in messages. (The node names
    /// its lease owner itself: host, pid and a random part.) Nodes started under one name share
    /// a working directory, and with it the embedded store's data.
    pub name: String,
    /// `--store`: a PostgreSQL URL; `None` for the embedded store, in the node's working
    /// directory.
    pub store: Option<String>,
    /// `--lease-ttl`, e.g. "3s"; `None` for the default.
    pub lease_ttl: Option<String>,
    /// `HOURGLASS_LOG`.
    pub log_level: &'static str,
    /// More arguments to `hourglass serve`.
    pub args: Vec<String>,
    /// Pass `--allow-targets 127.0.0.0/8`, so that the tests' loopback receivers are reachable
    /// also with API keys configured. Off: a node without keys still allows loopback (development
    /// mode), one with keys refuses it.
    pub allow_loopback_targets: bool,
    /// More environment variables for the process (the AWS_* ones of a DynamoDB store: tests
    /// cannot change their own environment, `unsafe_code` is forbidden).
    pub env: Vec<(String, String)>,
}

impl NodeOptions {
    /// A node on the embedded store, logging warnings and errors.
    pub fn embedded(name: &str) -> Self {
        Self {
            name: name.to_string(),
            store: None,
            lease_ttl: None,
            log_level: "warn",
            args: Vec::new(),
            allow_loopback_targets: true,
            env: Vec::new(),
        }
    }

    /// A node on the PostgreSQL database at `url`, with a lease of `lease_ttl`.
    pub fn postgres(name: &str, url: &str, lease_ttl: &str) -> Self {
        Self {
            store: Some(url.to_string()),
            lease_ttl: Some(lease_ttl.to_string()),
            ..Self::embedded(name)
        }
    }

    /// A node on the DynamoDB table `table` of moto (`HOURGLASS_TEST_MOTO_URL`, from
    /// `scripts/with-buses`), with a lease of `lease_ttl`; the standard AWS chain finds moto's
    /// endpoint, a region and static keys in the node's environment.
    pub fn dynamodb(name: &str, table: &str, lease_ttl: &str) -> Self {
        let env = super::aws_env_for_moto()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        Self {
            store: Some(format!("dynamodb://{table}")),
            lease_ttl: Some(lease_ttl.to_string()),
            env,
            ..Self::embedded(name)
        }
    }
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
    /// The embedded store's directory of the nodes started under `name` (it exists once one
    /// was started, or a test created it to put a store in place before the first start).
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(name).join("data")
    }

    /// Starts `hourglass serve` on a fresh loopback port and waits until it listens and answers
    /// /healthz.
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
        // The node's working directory is a scratch one so that nothing lands in the source
        // tree whatever it writes; the embedded store keeps its data there.
        let cwd = self.dir.path().join(&opts.name);
        std::fs::create_dir_all(&cwd).expect("node working dir");
        // Both streams append to one file, so neither overwrites what the other wrote.
        let append = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("node log file")
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_hourglass"));
        command.arg("serve").args(["--listen", "127.0.0.1:0"]);
        match &opts.store {
            Some(store) => command.args(["--store", store]),
            None => command.arg("--data-dir").arg(self.data_dir(&opts.name)),
        };
        if let Some(ttl) = &opts.lease_ttl {
            command.args(["--lease-ttl", ttl]);
        }
        if opts.allow_loopback_targets {
            command.args(["--allow-targets", "127.0.0.0/8"]);
        }
        let mut child = command
            .args(&opts.args)
            .current_dir(&cwd)
            .env("HOURGLASS_LOG", opts.log_level)
            .env("NO_COLOR", "1")
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_STORE")
            .env_remove("HOURGLASS_LOG_FORMAT")
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(append()))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn hourglass serve");
        let pid = child.id().expect("a running child has a pid");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut out_log = append();
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("read node stdout") {
                // Into the log like every other line: a test of the log format sees it too.
                let _ = out_log.write_all(format!("{line}\n").as_bytes());
                if let Some(addr) = ready_address(&line) {
                    return Some(addr);
                }
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
        // blocks on a full pipe. Blocking appends: a line each, few at the levels tests use.
        let drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = out_log.write_all(format!("{line}\n").as_bytes());
            }
        });
        let api = Api::new(addr);
        let (status, body) = api.call("GET", "/healthz", None).await;
        assert_eq!(status, 200, "healthz of {} after start: {body}", opts.name);
        NodeProc {
            name: opts.name.clone(),
            child,
            pid,
            addr,
            api,
            log,
            drain,
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
    pub addr: SocketAddr,
    pub api: Api,
    /// Its stdout and stderr; complete once the process was killed or terminated.
    pub log: PathBuf,
    drain: JoinHandle<()>,
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

    /// SIGKILL, then reap (so that the embedded store's lock is gone) and finish the log.
    pub async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        self.child.wait().await.expect("reap killed node");
        self.finish_log().await;
    }

    /// SIGTERM, then wait for the drain to end the process.
    pub async fn terminate(mut self, timeout: Duration) -> ExitStatus {
        self.signal("TERM");
        let sent = std::time::Instant::now();
        let status = match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.expect("wait for node"),
            Err(_) => panic!(
                "node {} did not exit within {timeout:?} of SIGTERM",
                self.name
            ),
        };
        println!(
            "node {} exited {} ms after SIGTERM",
            self.name,
            sent.elapsed().as_millis()
        );
        self.finish_log().await;
        status
    }

    /// Waits until what the process wrote before it ended is in its log.
    async fn finish_log(&mut self) {
        let drained = tokio::time::timeout(Duration::from_secs(10), &mut self.drain).await;
        assert!(drained.is_ok(), "the log of {} never ended", self.name);
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

    /// Occurrences this node claimed from the store (a claim taken over later counts too).
    pub fn claimed(&self) -> f64 {
        self.sum("hourglass_claimed_occurrences_total", &[])
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
