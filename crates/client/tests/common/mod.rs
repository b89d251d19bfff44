//! Starts a real node in-process for the client's integration tests: port 0, a temporary data
//! directory, development mode (no API keys).

use std::sync::Arc;
use std::time::Duration;

use hourglass_client::Client;
use hourglass_server::{Node, NodeConfig};

pub struct TestNode {
    pub node: Node,
    pub client: Client,
    // Dropped after the node: the data directory must outlive it.
    _dir: tempfile::TempDir,
}

impl TestNode {
    pub async fn stop(self) {
        self.node.shutdown().await;
    }
}

pub async fn start_node() -> TestNode {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        ..NodeConfig::default()
    };
    config.engine.shutdown_grace = Duration::from_secs(2);
    let node = Node::start(config, Arc::new(hourglass_core::SystemClock))
        .await
        .expect("node starts");
    let client = Client::new(format!("http://{}", node.addr())).unwrap();
    TestNode {
        node,
        client,
        _dir: dir,
    }
}
