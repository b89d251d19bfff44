//! The dashboard is served by the node itself: the page, its stylesheet and its ES modules (the
//! entry module and every module it imports, followed), with their content types and a policy
//! that keeps the page to this origin. (Its behaviour in a browser is tested by
//! scripts/browser-test.)

use std::sync::Arc;

use hourglass_server::{Node, NodeConfig};

#[tokio::test]
async fn the_node_serves_the_dashboard() {
    let dir = tempfile::tempdir().expect("temp dir");
    let node = Node::start(
        NodeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().to_path_buf(),
            ..Default::default()
        },
        Arc::new(hourglass_core::SystemClock),
    )
    .await
    .expect("node starts");
    let client = reqwest::Client::new();
    let base = format!("http://{}", node.addr());

    for (path, content_type, marker) in [
        ("/", "text/html; charset=utf-8", "<main id=\"view\""),
        (
            "/dashboard/app.js",
            "text/javascript; charset=utf-8",
            "from \"./router.js\"",
        ),
        ("/dashboard/app.css", "text/css; charset=utf-8", ":root"),
    ] {
        let response = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], content_type, "{path}");
        if path == "/" {
            let csp = response.headers()["content-security-policy"]
                .to_str()
                .unwrap();
            assert!(csp.contains("default-src 'self'"), "{csp}");
        }
        let body = response.text().await.expect("body");
        assert!(body.contains(marker), "{path} lacks {marker}");
    }

    // Every module the entry module imports, and what they import in turn, is served as a script
    // a browser runs as a module, and none reads a Prometheus metric name.
    let mut pending = vec!["app.js".to_string()];
    let mut served = std::collections::BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !served.insert(name.clone()) {
            continue;
        }
        let response = client
            .get(format!("{base}/dashboard/{name}"))
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), 200, "{name}");
        assert_eq!(
            response.headers()["content-type"],
            "text/javascript; charset=utf-8",
            "{name}"
        );
        let body = response.text().await.expect("body");
        assert!(!body.contains("hourglass_"), "{name} names a metric");
        for import in body.split("from \"./").skip(1) {
            pending.push(import.split('"').next().unwrap().to_string());
        }
    }
    assert!(
        served.len() > 5,
        "the dashboard is split into modules: {served:?}"
    );
    assert!(served.contains("figures.js"), "{served:?}");

    // Other paths outside /v1 still answer the API's JSON 404.
    let response = client
        .get(format!("{base}/dashboard/missing.js"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 404);

    node.shutdown().await;
}
