//! Signing secrets sealed at rest with a secrets key wrapped by AWS KMS (moto, from
//! `scripts/with-buses`: `HOURGLASS_TEST_MOTO_URL`), through the process:
//! `hourglass key secrets --kms-key-id` prints the wrapped data key and nothing of the key; a
//! node given it in `HOURGLASS_SECRETS_KEY_KMS` has KMS unwrap it, signs deliveries and stores
//! no secret in the clear; a node without it, with a blob KMS refuses, or with KMS out of reach
//! does not start, naming the setting (exit 78, or 1 when KMS could not answer); with it again
//! the same secret signs; and a second wrapped key takes over with the first as the previous one.

use std::time::Duration;

use aws_sdk_kms::primitives::Blob;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hourglass_engine::signing::SigningKey;
use serde_json::json;

use crate::sealed::{contains, every_byte};
use crate::support::{NodeOptions, NodeProc, Nodes, Receiver, aws_env_for_moto, moto, now_ms};

const PATIENCE: Duration = Duration::from_secs(30);

async fn kms() -> aws_sdk_kms::Client {
    let connection: hourglass_targets::ConnectionConfig = serde_json::from_value(json!({
        "kind": "aws",
        "region": "us-east-1",
        "endpoint_url": moto(),
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }))
    .unwrap();
    let sdk = hourglass_targets::sdk_config(&connection, Duration::from_secs(10)).await;
    aws_sdk_kms::Client::new(&sdk)
}

/// `hourglass key secrets --kms-key-id KEY`: its stdout and stderr.
fn wrapped_key(key_id: &str) -> (String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .args(["key", "secrets", "--kms-key-id", key_id])
        .envs(aws_env_for_moto())
        .output()
        .expect("run hourglass key secrets --kms-key-id");
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    (stdout, stderr)
}

/// `hourglass serve` on the data directory with `env` added to moto's: its exit code and
/// stderr (the process is expected to refuse to start; a bound in case it does not).
fn refused_start(data: &std::path::Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = std::process::Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_hourglass"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .env_remove("HOURGLASS_CONFIG")
        .env_remove("HOURGLASS_STORE")
        .env_remove("HOURGLASS_SECRETS_KEY")
        .env_remove("HOURGLASS_SECRETS_PREVIOUS_KEY")
        .env_remove("HOURGLASS_SECRETS_KEY_KMS")
        .env_remove("HOURGLASS_SECRETS_PREVIOUS_KEY_KMS")
        .envs(aws_env_for_moto())
        .envs(env.iter().copied())
        .output()
        .expect("run hourglass serve");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A webhook job due at once; waits for its delivery and checks it is signed with `secret`.
async fn signed_with(node: &NodeProc, hooks: &Receiver, secret: &str) {
    let path = format!("/kms-{}", now_ms());
    let (status, job) = node
        .api
        .call(
            "POST",
            "/v1/jobs",
            Some(json!({
                "schedule": {"after": "100ms"},
                "target": {"webhook": {"url": hooks.url(&path)}},
                "payload": {"sealed": "kms"},
            })),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let seen = hooks
        .wait_for(PATIENCE, "the job's delivery", |all| {
            all.iter().any(|d| d.path == path)
        })
        .await;
    let delivery = seen.iter().find(|d| d.path == path).unwrap();
    let key = SigningKey::parse(secret).expect("a whsec_ secret");
    assert!(
        key.verify(
            delivery.header("webhook-id"),
            delivery.header("webhook-timestamp"),
            &delivery.body,
            delivery.header("webhook-signature"),
        ),
        "a delivery not signed with {secret}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_key_wrapped_by_kms_seals_the_secrets_and_is_needed_to_start() {
    let kms = kms().await;
    let key_id = kms
        .create_key()
        .send()
        .await
        .unwrap()
        .key_metadata
        .unwrap()
        .key_id;
    let alias = format!("alias/hourglass-test-{}-{}", std::process::id(), now_ms());
    kms.create_alias()
        .alias_name(&alias)
        .target_key_id(&key_id)
        .send()
        .await
        .unwrap();

    // The command prints the wrapped key alone; the key itself appears nowhere.
    let (stdout, stderr) = wrapped_key(&alias);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let blob = stdout.trim().to_owned();
    let plaintext = kms
        .decrypt()
        .ciphertext_blob(Blob::new(BASE64.decode(&blob).expect("base64")))
        .send()
        .await
        .unwrap()
        .plaintext
        .unwrap()
        .into_inner();
    assert_eq!(plaintext.len(), 32);
    let hex: String = plaintext.iter().map(|b| format!("{b:02x}")).collect();
    for shown in [&stdout, &stderr] {
        assert!(!shown.contains(&hex), "the key in hex: {shown}");
        assert!(
            !shown.contains(&BASE64.encode(&plaintext)),
            "the key: {shown}"
        );
    }
    assert!(stderr.contains("HOURGLASS_SECRETS_KEY_KMS"), "{stderr}");

    let hooks = Receiver::start().await;
    let nodes = Nodes::default();
    let with_env = |env: &[(&str, &str)]| {
        let mut opts = NodeOptions::embedded("sealed-kms");
        opts.env = aws_env_for_moto()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .chain(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
            .collect();
        opts
    };
    let opts = with_env(&[("HOURGLASS_SECRETS_KEY_KMS", &blob)]);
    let node = nodes.start(&opts).await;
    let (status, shown) = node.api.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{shown}");
    let secret = shown["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    signed_with(&node, &hooks, &secret).await;
    node.kill().await;

    let data = nodes.data_dir("sealed-kms");
    let stored = every_byte(&data);
    assert!(!stored.is_empty());
    assert!(!contains(&stored, b"whsec_"), "a secret in the clear");
    let body = secret.trim_start_matches("whsec_").as_bytes();
    assert!(!contains(&stored, body), "the secret's bytes in the clear");

    // Without the key: refused, and told which settings give it.
    let (code, text) = refused_start(&data, &[]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("encrypted") && text.contains("HOURGLASS_SECRETS_KEY_KMS"),
        "{text}"
    );
    // A blob that is no data key of KMS's: refused by KMS, the setting named.
    let forged = BASE64.encode([7u8; 150]);
    let (code, text) = refused_start(&data, &[("HOURGLASS_SECRETS_KEY_KMS", &forged)]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("HOURGLASS_SECRETS_KEY_KMS") && text.contains("AWS KMS refused"),
        "{text}"
    );
    // KMS out of reach: the same message's kind, but exit 1, for the supervisor to try again.
    let (code, text) = refused_start(
        &data,
        &[
            ("HOURGLASS_SECRETS_KEY_KMS", &blob),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("HOURGLASS_SECRETS_KEY_KMS") && text.contains("AWS KMS could not answer"),
        "{text}"
    );
    // Given twice (the key and the wrapped key): refused before KMS is asked.
    let (code, text) = refused_start(
        &data,
        &[
            ("HOURGLASS_SECRETS_KEY_KMS", &blob),
            ("HOURGLASS_SECRETS_KEY", &hex),
        ],
    );
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("one way only"), "{text}");

    // With the wrapped key again, the same secret signs.
    let node = nodes.start(&opts).await;
    let (_, shown) = node.api.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(shown["signing_secret"], secret.as_str(), "{shown}");
    signed_with(&node, &hooks, &secret).await;
    node.kill().await;

    // A second wrapped key under the same KMS key is another secrets key: alone it is refused;
    // with the first as the previous one the node re-seals with it, and from then on it suffices.
    let (second, _) = wrapped_key(&key_id);
    let second = second.trim().to_owned();
    assert_ne!(second, blob);
    let (code, text) = refused_start(&data, &[("HOURGLASS_SECRETS_KEY_KMS", &second)]);
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("not with the given key"), "{text}");
    let node = nodes
        .start(&with_env(&[
            ("HOURGLASS_SECRETS_KEY_KMS", &second),
            ("HOURGLASS_SECRETS_PREVIOUS_KEY_KMS", &blob),
        ]))
        .await;
    node.kill().await;
    let node = nodes
        .start(&with_env(&[("HOURGLASS_SECRETS_KEY_KMS", &second)]))
        .await;
    let (_, shown) = node.api.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(shown["signing_secret"], secret.as_str(), "{shown}");
    signed_with(&node, &hooks, &secret).await;
    node.kill().await;
    let (code, text) = refused_start(&data, &[("HOURGLASS_SECRETS_KEY_KMS", &blob)]);
    assert_eq!(
        code,
        Some(78),
        "the first key no longer opens the store: {text}"
    );
}
