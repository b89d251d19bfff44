//! `hourglass listen` against a real node: a node in development mode (no API keys, no
//! `--allow-targets`) delivers to the listener on loopback, and the listener prints the delivery
//! with its id, attempt and payload, and "verified" when given the namespace's signing secret.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::support::{NodeOptions, Nodes};

const READY: &str = "hourglass listen: receiving webhooks on http://";

/// A running `hourglass listen` and its stdout, line by line.
struct Listen {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    url: String,
}

impl Listen {
    async fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .args(["listen", "--port", "0"])
            .args(args)
            .env_remove("HOURGLASS_WEBHOOK_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn hourglass listen");
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("read listen stdout") {
                if let Some(rest) = line.strip_prefix(READY) {
                    let addr = rest.split('/').next().expect("an address");
                    return format!("http://{addr}");
                }
            }
            panic!("hourglass listen exited before listening");
        })
        .await
        .expect("hourglass listen reports its address");
        Self {
            _child: child,
            lines,
            url,
        }
    }

    /// The lines printed up to and including the block of the delivery `id` (the block ends
    /// with its payload's last line, `  }`).
    async fn block_of(&mut self, id: &str, within: Duration) -> Vec<String> {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(within, async {
            let mut in_block = false;
            while let Some(line) = self.lines.next_line().await.expect("read listen stdout") {
                in_block |= line == format!("delivery {id}");
                let end = in_block && line == "  }";
                seen.push(line);
                if end {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(
            found,
            Ok(true),
            "no block for {id}; listen printed:\n{}",
            seen.join("\n")
        );
        let start = seen
            .iter()
            .position(|l| l == &format!("delivery {id}"))
            .expect("block start");
        seen.split_off(start)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_prints_each_delivery_and_verifies_its_signature() {
    let nodes = Nodes::default();
    let node = nodes
        .start(&NodeOptions {
            allow_loopback_targets: false,
            ..NodeOptions::embedded("listen")
        })
        .await;
    let (status, rotated) = node.api.call("POST", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{rotated}");
    let secret = rotated["signing_secret"]
        .as_str()
        .expect("a secret")
        .to_string();

    let mut checked = Listen::start(&["--secret", &secret]).await;
    let mut unchecked = Listen::start(&[]).await;
    let mut ids = Vec::new();
    for listen in [&checked, &unchecked] {
        let job = node
            .api
            .create(json!({
                "type": "reminder.flight",
                "schedule": {"after": "1s"},
                "target": {"webhook": {"url": format!("{}/hooks/reminder", listen.url)}},
                "payload": {"passenger": "p-123", "flight": "LH 400"}
            }))
            .await;
        let due_ms = crate::support::instant_ms(&job["next_due_at"]);
        let id = format!("{}_{due_ms}", job["id"].as_str().unwrap().replace('-', ""));
        ids.push((id, job["id"].as_str().unwrap().to_string()));
    }

    for ((id, job_id), (listen, signature)) in ids.iter().zip([
        (&mut checked, "  signature  verified"),
        (&mut unchecked, "  signature  not checked (no --secret)"),
    ]) {
        let block = listen.block_of(id, Duration::from_secs(30)).await;
        let text = block.join("\n");
        for want in [
            signature,
            "  attempt    1",
            &format!("  job        {job_id} (type reminder.flight)"),
            "  request    POST /hooks/reminder -> answered 200",
            "    \"flight\": \"LH 400\",",
            "    \"passenger\": \"p-123\"",
        ] {
            assert!(block.iter().any(|l| l == want), "{want:?} missing:\n{text}");
        }
        assert!(
            block
                .iter()
                .any(|l| l.starts_with("  due        ") && l.ends_with(" late)")),
            "no lateness line:\n{text}"
        );
        assert!(!text.contains('\x1b'), "plain text when piped:\n{text}");
    }
    // The node recorded the listener's 200 as the delivery of that id (written in a batch just
    // after the answer, so it may take a moment).
    let (id, job_id) = &ids[0];
    let path = format!("/v1/jobs/{job_id}/runs");
    let recorded = crate::support::eventually(
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let (status, runs) = node.api.call("GET", &path, None).await;
            status == 200
                && runs["runs"][0]["delivery_id"] == id.as_str()
                && runs["runs"][0]["status_code"] == 200
        },
    )
    .await;
    assert!(recorded, "{:?}", node.api.call("GET", &path, None).await);
}

/// Issue 39, defect 10: `listen` read any body whole (50 MB held). A body over
/// `--max-body-bytes` is now answered 413, on its `Content-Length` before it is read, and a
/// chunked one as soon as it passes the limit; a body within it is still shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_refuses_a_body_over_its_limit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut listen = Listen::start(&["--max-body-bytes", "1024"]).await;
    // reqwest is built without a default TLS provider; the binary installs ring, so do we.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let post = |path: &str, body: Vec<u8>, id: &str| {
        client
            .post(format!("{}{path}", listen.url))
            .header("webhook-id", id)
            .body(body)
            .send()
    };
    let small = post("/small", b"[1]".to_vec(), "small_1").await.unwrap();
    assert_eq!(small.status(), 200);
    let big = post("/big", vec![b'x'; 4096], "big_1").await.unwrap();
    assert_eq!(big.status(), 413);

    // Chunked: no length declared, 2 KiB sent in 256-byte chunks.
    let addr = listen.url.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /chunked HTTP/1.1\r\nhost: {addr}\r\nwebhook-id: chunked_1\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..8 {
        let chunk = format!("100\r\n{}\r\n", "y".repeat(256));
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            break; // answered and closed before the rest was sent
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // What it printed: the small body, and the refusals without their bodies.
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = listen.lines.next_line().await.unwrap() {
            let done = line.contains("/chunked");
            seen.push(line);
            if done {
                break;
            }
        }
    })
    .await;
    let text = seen.join("\n");
    assert!(
        text.contains("  request    POST /small -> answered 200"),
        "{text}"
    );
    for refused in ["/big", "/chunked"] {
        assert!(
            text.contains(&format!(
                "  request    POST {refused} -> answered 413 (body over 1024 bytes, not read)"
            )),
            "{text}"
        );
    }
    assert!(!text.contains("xxxx") && !text.contains("yyyy"), "{text}");
}
