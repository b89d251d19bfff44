//! The OpenAPI document served at `GET /v1/openapi.json`: well-formed OpenAPI 3.1, and in step
//! with the router (every documented operation is routed, every route is documented) and with the
//! error codes the source can produce.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hourglass_server::error::ErrorCode;
use hourglass_server::{Node, NodeConfig};
use serde_json::Value;

const DOC: &str = include_str!("../../openapi.json");

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn doc() -> Value {
    serde_json::from_str(DOC).expect("openapi.json is valid JSON")
}

/// (path, method, operation) for every operation under `section` (`paths` or `webhooks`).
fn operations<'a>(doc: &'a Value, section: &str) -> Vec<(&'a str, &'a str, &'a Value)> {
    let mut out = Vec::new();
    let Some(items) = doc[section].as_object() else {
        return out;
    };
    for (path, item) in items {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                out.push((path.as_str(), method, op));
            }
        }
    }
    out
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(r) => doc
            .pointer(r.strip_prefix('#').expect("local ref"))
            .unwrap_or_else(|| panic!("{r} does not resolve")),
        None => value,
    }
}

fn collect_refs<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref"
                    && let Some(r) = v.as_str()
                {
                    out.push((at.clone(), r));
                }
                collect_refs(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_refs(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_document_is_openapi_3_1() {
    let doc = doc();
    let version = doc["openapi"].as_str().expect("openapi field");
    assert!(version.starts_with("3.1."), "openapi is {version}");
    assert!(doc["info"]["title"].is_string(), "info.title");
    assert!(doc["info"]["version"].is_string(), "info.version");
    let schemes = doc["components"]["securitySchemes"]
        .as_object()
        .expect("security schemes");
    assert!(schemes.contains_key("bearer"));

    let mut operation_ids = BTreeSet::new();
    let paths = operations(&doc, "paths");
    let webhooks = operations(&doc, "webhooks");
    assert!(!paths.is_empty() && !webhooks.is_empty());
    for (path, method, op) in paths.iter().chain(&webhooks) {
        let what = format!("{method} {path}");
        let responses = op["responses"].as_object();
        assert!(
            responses.is_some_and(|r| !r.is_empty()),
            "{what} has no responses"
        );
        for (status, response) in responses.into_iter().flatten() {
            let known = status == "default"
                || (status.len() == 3
                    && status.starts_with(['1', '2', '3', '4', '5'])
                    && (status[1..].chars().all(|c| c.is_ascii_digit()) || &status[1..] == "XX"));
            assert!(known, "{what}: response key {status}");
            assert!(
                resolve(&doc, response)["description"].is_string(),
                "{what} {status} has no description"
            );
        }
        let id = op["operationId"].as_str().expect("operationId");
        assert!(operation_ids.insert(id), "operationId {id} is not unique");
        for requirement in op["security"].as_array().into_iter().flatten() {
            for scheme in requirement
                .as_object()
                .expect("security requirement")
                .keys()
            {
                assert!(
                    schemes.contains_key(scheme),
                    "{what}: unknown scheme {scheme}"
                );
            }
        }
    }

    // Path templates and declared path parameters agree.
    for (path, method, op) in &paths {
        let templated: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        let declared: BTreeSet<&str> = doc["paths"][*path]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(op["parameters"].as_array().into_iter().flatten())
            .map(|p| resolve(&doc, p))
            .filter(|p| p["in"] == "path")
            .map(|p| p["name"].as_str().expect("parameter name"))
            .collect();
        assert_eq!(templated, declared, "{method} {path}: path parameters");
    }

    let mut refs = Vec::new();
    collect_refs(&doc, String::new(), &mut refs);
    assert!(!refs.is_empty());
    for (at, r) in refs {
        let pointer = r
            .strip_prefix("#/components/")
            .unwrap_or_else(|| panic!("{at}: {r} is not a local component ref"));
        assert!(
            doc.pointer(&format!("/components/{pointer}")).is_some(),
            "{at}: {r} does not resolve"
        );
    }
}

#[test]
fn every_known_route_is_documented() {
    let doc = doc();
    let documented: BTreeSet<(&str, &str)> = operations(&doc, "paths")
        .into_iter()
        .map(|(path, method, _)| (path, method))
        .collect();
    // The router's own table (`routes.rs`), but for the dashboard's page and assets.
    for (method, path, _) in hourglass_server::routes::route_needs() {
        if path == "/" || path.starts_with("/dashboard/") {
            continue;
        }
        let route = (path.as_str(), method.to_lowercase());
        assert!(
            documented.contains(&(route.0, route.1.as_str())),
            "{route:?} is not documented"
        );
    }
}

/// Every `.rs` file under `dir`, its subdirectories (module directories) included.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The OpenAPI document's `ErrorCode` enum is the server's error table, and every code core's
/// validation produces (a string, as core knows nothing of HTTP) has a row in that table.
#[test]
fn documented_error_codes_match_the_table() {
    let doc = doc();
    let documented: BTreeSet<&str> = doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode enum")
        .iter()
        .map(|c| c.as_str().expect("code"))
        .collect();
    let table: BTreeSet<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(documented, table, "the documented codes are the table's");

    // The code literals given to `ValidationError::new` wherever validation errors are made.
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = rust_files(&crates.join("server/src"));
    files.extend(rust_files(&crates.join("core/src")));
    files.push(crates.join("engine/src/netguard.rs"));
    let mut validation = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source file");
        for (at, _) in text.match_indices("ValidationError::new(") {
            let rest = text[at + "ValidationError::new(".len()..].trim_start();
            let Some(literal) = rest.strip_prefix('"') else {
                continue;
            };
            let code = &literal[..literal.find('"').expect("closing quote")];
            validation.insert(code.to_string(), file.display().to_string());
        }
    }
    assert!(validation.len() > 10, "found only {validation:?}");
    for (code, file) in &validation {
        assert!(
            ErrorCode::parse(code).is_some(),
            "{code} (from {file}) is not in the error table"
        );
    }
}

fn is_documented(op: &Value, status: u16) -> bool {
    let responses = op["responses"].as_object().expect("responses");
    let class = format!("{}XX", status / 100);
    responses.contains_key(&status.to_string())
        || responses.contains_key(&class)
        || responses.contains_key("default")
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
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
    // Built after the node: starting it installs the TLS crypto provider reqwest needs.
    let client = reqwest::Client::new();
    let base = format!("http://{}", node.addr());
    let doc = doc();

    for (path, method, op) in operations(&doc, "paths") {
        let id = if path.starts_with("/v1/dead-letters/") {
            "1".to_string()
        } else {
            uuid::Uuid::now_v7().to_string()
        };
        // A bulk action's `{action}` is one of four names; any other is no route.
        let path = path.replace("{action}", "pause");
        let url = format!("{base}{}", path.replace("{id}", &id));
        let mut request = client.request(method.to_uppercase().parse().unwrap(), &url);
        if matches!(method, "post" | "put" | "patch") {
            request = request
                .header("content-type", "application/json")
                .body("{}");
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let text = response.text().await.expect("response body");
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or_default();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        let what = format!("{} {url}", method.to_uppercase());
        assert!(
            !(status == 404 && code == "not_found" && message == "route not found"),
            "{what} is not routed"
        );
        assert!(
            status != 405 && code != "method_not_allowed",
            "{what}: method not allowed"
        );
        assert!(
            is_documented(op, status),
            "{what} answered {status}, which is not documented: {text}"
        );
    }

    // The document is served as is.
    let response = client
        .get(format!("{base}/v1/openapi.json"))
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.headers()["content-type"], "application/json");
    let served: Value = response.json().await.expect("json");
    assert_eq!(served, doc);

    // The create examples are accepted, and the job comes back with exactly the documented fields:
    // the required ones and its payload, which only a listing leaves out unless asked.
    let mut job_fields: BTreeSet<&str> = doc["components"]["schemas"]["Job"]["required"]
        .as_array()
        .expect("Job.required")
        .iter()
        .map(|f| f.as_str().expect("field name"))
        .collect();
    job_fields.insert("payload");
    let examples =
        doc["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["examples"]
            .as_object()
            .expect("createJob examples");
    assert!(examples.len() >= 4);
    let now = jiff::Timestamp::now();
    for (name, example) in examples {
        let body = &resolve(&doc, example)["value"];
        if let Some(at) = body["schedule"]["at"].as_str()
            && at.parse::<jiff::Timestamp>().expect("example instant") < now
        {
            continue;
        }
        let response = client
            .post(format!("{base}/v1/jobs"))
            .json(body)
            .send()
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        let job: Value = response.json().await.expect("json");
        assert_eq!(status, 201, "example {name}: {job}");
        let fields: BTreeSet<&str> = job
            .as_object()
            .expect("job object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(fields, job_fields, "example {name}");
    }

    node.shutdown().await;
}

/// Sends one raw HTTP/1.1 request and returns the status; `Connection: close` ends the response.
async fn raw_status(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n{body}"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    // The status line is all that is needed; the node may reset a connection whose declared
    // body it did not read, after answering.
    while !head.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no status in {text:?}"))
}

/// The answers every authenticated route can give whatever its handler does (a bad namespace
/// header, a missing key, a body of the wrong type or over the limit) are documented for each.
#[tokio::test]
async fn statuses_every_route_can_answer_are_documented() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dev = Node::start(
        NodeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().join("dev"),
            ..Default::default()
        },
        Arc::new(hourglass_core::SystemClock),
    )
    .await
    .expect("node starts");
    let keyed = Node::start(
        NodeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().join("keyed"),
            api_keys: vec![hourglass_server::auth::ApiKeyConfig {
                sha256: hourglass_server::auth::hash_key("k"),
                namespace: Some("a".into()),
                all_namespaces: false,
                ..Default::default()
            }],
            ..Default::default()
        },
        Arc::new(hourglass_core::SystemClock),
    )
    .await
    .expect("node starts");
    let doc = doc();
    let mut undocumented = Vec::new();
    for (path, method, op) in operations(&doc, "paths") {
        let open = op["security"].as_array().is_some_and(Vec::is_empty);
        if open {
            continue;
        }
        let target = path
            .replace("{id}", &uuid::Uuid::now_v7().to_string())
            .replace("{name}", "q");
        let method = method.to_uppercase();
        let mut probes = vec![
            (keyed.addr(), "", "", "no api key"),
            (
                keyed.addr(),
                "Authorization: Bearer k\r\n",
                "",
                "namespace key",
            ),
        ];
        if path.starts_with("/v1/") {
            probes.push((
                dev.addr(),
                "hourglass-namespace: no/such\r\n",
                "",
                "bad namespace header",
            ));
        }
        if op.get("requestBody").is_some() {
            probes.push((
                dev.addr(),
                "Content-Type: text/plain\r\nContent-Length: 2\r\n",
                "{}",
                "wrong content type",
            ));
            probes.push((
                dev.addr(),
                "Content-Type: application/json\r\nContent-Length: 1000000000\r\n",
                "",
                "huge content length",
            ));
        }
        for (addr, headers, body, what) in probes {
            let status = raw_status(addr, &method, &target, headers, body).await;
            if !is_documented(op, status) {
                undocumented.push(format!("{method} {path} ({what}) answered {status}"));
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "undocumented statuses:\n{}",
        undocumented.join("\n")
    );
    dev.shutdown().await;
    keyed.shutdown().await;
}
