//! Webhooks to an `https://` receiver, through a real node process: delivered when the
//! receiver's certificate chains to a root the node trusts (a throwaway authority made with
//! openssl, trusted through `SSL_CERT_FILE`), and not delivered, with the certificate named in
//! the job's error, when the node trusts another authority only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::support::{NodeOptions, Nodes, Receiver, eventually, now_ms, rfc3339_ms};

/// Runs openssl with these arguments in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (Debian package openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway certificate authority in `dir`, and a certificate for `localhost` it signed:
/// (the authority's certificate, the server's certificate, the server's key), as PEM files.
fn authority_and_server(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let rsa = ["-newkey", "rsa:2048", "-nodes"];
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &rsa,
            &["-days", "2", "-subj", "/CN=hourglass test CA"],
            &["-keyout", "ca.key", "-out", "ca.crt"],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req"][..],
            &rsa,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=critical,CA:FALSE\nsubjectAltName=DNS:localhost\n\
         extendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    (
        dir.join("ca.crt"),
        dir.join("server.crt"),
        dir.join("server.key"),
    )
}

/// A node whose only trusted root is `roots` (a PEM file).
fn trusting(name: &str, roots: &Path, empty_dir: &Path) -> NodeOptions {
    let mut options = NodeOptions::embedded(name);
    options.env = vec![
        ("SSL_CERT_FILE".into(), roots.display().to_string()),
        ("SSL_CERT_DIR".into(), empty_dir.display().to_string()),
    ];
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_receiver_gets_deliveries_only_with_a_trusted_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = authority_and_server(dir.path());
    let (other_ca, _, _) = authority_and_server(&mkdir(dir.path().join("other")));
    let empty = mkdir(dir.path().join("empty"));
    let hooks = Receiver::start_tls(&cert, &key).await;
    let url = hooks.url("/hook");
    assert!(url.starts_with("https://localhost:"), "{url}");
    let nodes = Nodes::default();

    // Trusted: delivered, signed as over plain HTTP.
    let node = nodes.start(&trusting("trusting", &ca, &empty)).await;
    let job = node
        .api
        .create(
            json!({"schedule": {"at": rfc3339_ms(now_ms())}, "target": {"webhook": {"url": url}}}),
        )
        .await;
    assert!(
        hooks.wait_count(1, Duration::from_secs(20)).await,
        "no delivery over TLS"
    );
    let seen = hooks.deliveries();
    assert_eq!(
        seen[0].job_id().replace('-', ""),
        job["id"].as_str().unwrap().replace('-', "")
    );
    assert!(!seen[0].webhook_id().is_empty(), "{seen:?}");
    node.kill().await;

    // Not trusted (the node trusts another authority only): the attempt fails on the
    // certificate, and the receiver sees nothing.
    let node = nodes
        .start(&trusting("distrusting", &other_ca, &empty))
        .await;
    let job = node
        .api
        .create(
            json!({"schedule": {"at": rfc3339_ms(now_ms())}, "target": {"webhook": {"url": url}}}),
        )
        .await;
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let failed = eventually(
        Duration::from_secs(20),
        Duration::from_millis(100),
        || async {
            let (_, job) = node.api.call("GET", &path, None).await;
            job["last_error"].as_str().is_some()
        },
    )
    .await;
    let (_, job) = node.api.call("GET", &path, None).await;
    assert!(failed, "the attempt did not fail: {job}");
    let error = job["last_error"].as_str().unwrap().to_lowercase();
    assert!(error.contains("certificate"), "{error}");
    assert_eq!(
        hooks.count(),
        1,
        "the untrusted attempt reached the receiver"
    );
    node.kill().await;
}

fn mkdir(path: PathBuf) -> PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    path
}
