//! The node's budget for request bodies held in memory (issue 39, defect 4): many connections
//! each sending all but the last byte of a large body hold at most the budget; the bodies past it
//! are refused at once with `503 server_busy` instead of being buffered, per API key too, and
//! the budget comes back when the held bodies finish.

use hourglass_server::auth::{ApiKeyConfig, hash_key};
use hourglass_server::budget::BodyBudget;
use serde_json::Value;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

use crate::support::{PATIENCE, start_node_with, test_config};

const MIB: usize = 1024 * 1024;
/// Each held body: a batch of no jobs, padded with spaces to this size.
const BODY: usize = MIB;

/// A batch body of `BODY` bytes whose last byte is its closing brace.
fn body() -> Vec<u8> {
    let mut body = b"{\"jobs\": []".to_vec();
    body.resize(BODY - 1, b' ');
    body.push(b'}');
    body
}

/// Opens a connection and sends a batch's head and all of its body but the last byte. Its answer
/// (status and JSON body) goes to `answers` with `index` once the node sends one.
async fn hold(
    addr: SocketAddr,
    index: usize,
    key: Option<&str>,
    answers: mpsc::UnboundedSender<(usize, u16, Value)>,
) -> OwnedWriteHalf {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let auth = key.map_or(String::new(), |k| format!("authorization: Bearer {k}\r\n"));
    let head = format!(
        "POST /v1/jobs/batch HTTP/1.1\r\nhost: 127.0.0.1\r\n{auth}content-type: application/json\r\n\
         content-length: {BODY}\r\nconnection: close\r\n\r\n"
    );
    write.write_all(head.as_bytes()).await.expect("head sent");
    let body = body();
    // The node may refuse the body before reading it; what it did not read stays unsent.
    let _ = write.write_all(&body[..BODY - 1]).await;
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .and_then(|(_, b)| serde_json::from_str(b).ok())
            .unwrap_or(Value::Null);
        let _ = answers.send((index, status, body));
    });
    write
}

async fn next(answers: &mut mpsc::UnboundedReceiver<(usize, u16, Value)>) -> (usize, u16, Value) {
    tokio::time::timeout(PATIENCE, answers.recv())
        .await
        .expect("an answer within the patience")
        .expect("answers open")
}

/// Opens `keys.len()` held bodies (one per entry, sent with that key); `refused` of them must be
/// refused at once with 503 `server_busy`, the rest must all be read whole once their last byte
/// arrives (each answers 422 `invalid_batch`: an empty batch). Answers which were refused.
async fn hold_many(addr: SocketAddr, keys: &[Option<&str>], refused: usize) -> Vec<usize> {
    let (tx, mut answers) = mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        writers.push(Some(hold(addr, i, *key, tx.clone()).await));
    }
    let mut busy = Vec::new();
    for _ in 0..refused {
        let (i, status, body) = next(&mut answers).await;
        assert_eq!(status, 503, "held body {i}: {body}");
        assert_eq!(body["error"]["code"], "server_busy", "{body}");
        assert_eq!(body["error"]["field"], "body");
        busy.push(i);
        writers[i] = None;
    }
    for writer in writers.iter_mut().flatten() {
        writer.write_all(b"}").await.expect("last byte sent");
    }
    for _ in refused..keys.len() {
        let (i, status, body) = next(&mut answers).await;
        assert!(!busy.contains(&i));
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (422, Some("invalid_batch")),
            "held body {i} was read whole once complete: {body}"
        );
    }
    busy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_node_budget_are_refused_at_once_and_the_budget_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.limits.body_budget = BodyBudget {
        node_bytes: 4 * BODY,
        key_bytes: 4 * BODY,
    };
    let node = start_node_with(config).await;
    let addr = node.addr();
    // Six bodies of 1 MiB against a budget of 4 MiB: two refused, whichever arrive last.
    hold_many(addr, &[None; 6], 2).await;
    // Every byte came back: four more fit again.
    hold_many(addr, &[None; 4], 0).await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_holds_at_most_its_share_while_another_still_sends() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.api_keys = ["key-a", "key-b"]
        .into_iter()
        .map(|k| ApiKeyConfig {
            sha256: hash_key(k),
            namespace: Some(k.into()),
            all_namespaces: false,
            ..Default::default()
        })
        .collect();
    config.limits.body_budget = BodyBudget {
        node_bytes: 8 * BODY,
        key_bytes: 2 * BODY,
    };
    let node = start_node_with(config).await;
    let a = Some("key-a");
    let b = Some("key-b");
    // Key a's third and fourth bodies pass its share of 2 MiB; key b's two still fit.
    let busy = hold_many(node.addr(), &[a, a, a, a, b, b], 2).await;
    assert!(busy.iter().all(|i| *i < 4), "key b was refused: {busy:?}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_is_refused_once_it_passes_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.limits.body_budget = BodyBudget {
        node_bytes: BODY,
        key_bytes: BODY,
    };
    let node = start_node_with(config).await;
    // No length declared: the body takes its bytes as they arrive, and is refused once it has
    // more than the budget (well under the batch limit of 16 MiB).
    let stream = TcpStream::connect(node.addr()).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let sender = tokio::spawn(async move {
        write
            .write_all(
                b"POST /v1/jobs/batch HTTP/1.1\r\nhost: 127.0.0.1\r\n\
                  content-type: application/json\r\ntransfer-encoding: chunked\r\n\
                  connection: close\r\n\r\n",
            )
            .await?;
        let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
        for _ in 0..2 * BODY / 0x10000 {
            write.write_all(chunk.as_bytes()).await?;
        }
        std::io::Result::Ok(())
    });
    let mut text = Vec::new();
    tokio::time::timeout(PATIENCE, read.read_to_end(&mut text))
        .await
        .expect("an answer within the patience")
        .ok();
    let text = String::from_utf8_lossy(&text);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("server_busy"), "{text}");
    // The node stopped reading: the sender may or may not have got everything out.
    let _ = sender.await;
    node.shutdown().await;
}
