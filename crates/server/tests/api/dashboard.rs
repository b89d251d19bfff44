//! The dashboard is served by the node itself: the page and its two assets, with their content
//! types and a policy that keeps the page to this origin. (Its behaviour in a browser is tested by
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
            "/v1/jobs",
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

    // Other paths outside /v1 still answer the API's JSON 404.
    let response = client
        .get(format!("{base}/dashboard/missing.js"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 404);

    node.shutdown().await;
}
