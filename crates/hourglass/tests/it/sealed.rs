//! Signing secrets sealed at rest, through the process: a node given a secrets key stores no
//! secret in the clear (the embedded store's files hold no `whsec_`), a node without the key, or
//! with another, refuses to start (exit 78, naming the key), and with the key the secrets are the
//! ones the API handed out before.

use std::path::Path;

use serde_json::json;

use crate::support::{NodeOptions, Nodes};

/// Every file under `dir`, read whole (the SQLite database, its WAL, payload files).
pub(crate) fn every_byte(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read data dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            bytes.extend(every_byte(&path));
        } else {
            bytes.extend(std::fs::read(&path).expect("read store file"));
        }
    }
    bytes
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn sealed_secrets_stay_out_of_the_store_and_need_their_key() {
    let hourglass = env!("CARGO_BIN_EXE_hourglass");
    let made = std::process::Command::new(hourglass)
        .args(["key", "secrets"])
        .output()
        .expect("run hourglass key secrets");
    assert!(made.status.success());
    let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    assert_eq!(key.len(), 64, "{key}");

    let nodes = Nodes::default();
    let mut opts = NodeOptions::embedded("sealed");
    opts.env.push(("HOURGLASS_SECRETS_KEY".into(), key.clone()));
    let node = nodes.start(&opts).await;
    // The namespace's first secret, then a rotation that keeps it valid for an hour.
    let (status, first) = node.api.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{first}");
    let (status, rotated) = node
        .api
        .call("POST", "/v1/signing-secret", Some(json!({"overlap": "1h"})))
        .await;
    assert_eq!(status, 200, "{rotated}");
    let (first, current) = (
        first["signing_secret"].as_str().unwrap().to_owned(),
        rotated["signing_secret"].as_str().unwrap().to_owned(),
    );
    assert!(current.starts_with("whsec_") && first != current);
    node.kill().await;

    let data = nodes.data_dir("sealed");
    let stored = every_byte(&data);
    assert!(!stored.is_empty());
    assert!(!contains(&stored, b"whsec_"), "a secret in the clear");
    for secret in [&first, &current] {
        let body = secret.trim_start_matches("whsec_").as_bytes();
        assert!(!contains(&stored, body), "a secret's bytes in the clear");
    }

    let start = |key: Option<&str>| {
        let mut command = std::process::Command::new(hourglass);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_STORE")
            .env_remove("HOURGLASS_SECRETS_KEY");
        if let Some(key) = key {
            command.env("HOURGLASS_SECRETS_KEY", key);
        }
        let out = command.output().expect("run hourglass serve");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text) = start(None);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("encrypted") && text.contains("HOURGLASS_SECRETS_KEY"),
        "{text}"
    );
    let (code, text) = start(Some(&"ab".repeat(32)));
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("not with the given key"), "{text}");
    let (code, text) = start(Some("not a key"));
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("HOURGLASS_SECRETS_KEY") && text.contains("64 hex"),
        "{text}"
    );

    // With its key, the node signs with the secrets it handed out.
    let node = nodes.start(&opts).await;
    let (status, shown) = node.api.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["signing_secret"], current.as_str());
    let valid_until = shown["previous_valid_until"].as_str().unwrap_or_default();
    assert!(
        !valid_until.is_empty(),
        "the rotation's overlap is kept: {shown}"
    );
    node.kill().await;
}
