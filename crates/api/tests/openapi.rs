//! The freshness test: the committed OpenAPI document (`crates/server/openapi.json`) is what
//! `hourglass_api::openapi::document()` generates from the API's types and the frame. With
//! `HOURGLASS_BLESS=1` (what `scripts/openapi-generate` runs) it rewrites the file instead.

use std::path::Path;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../server/openapi.json");

#[test]
fn committed_document_is_fresh() {
    let generated = match hourglass_api::openapi::document() {
        Ok(text) => text,
        Err(e) => panic!("generating the OpenAPI document failed: {e}"),
    };
    let path = Path::new(COMMITTED);
    if std::env::var_os("HOURGLASS_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, &generated).expect("write crates/server/openapi.json");
        return;
    }
    let committed = std::fs::read_to_string(path).expect("read crates/server/openapi.json");
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        let show = |text: &str| {
            let from = line.saturating_sub(3);
            text.lines()
                .enumerate()
                .skip(from)
                .take(line - from + 4)
                .map(|(n, l)| format!("  {:>5} {} {l}\n", n + 1, if n == line { '>' } else { ' ' }))
                .collect::<String>()
        };
        panic!(
            "crates/server/openapi.json is stale: it differs from what the API's types and \
             crates/api/openapi/frame.json generate, first at line {}.\n\
             committed:\n{}generated:\n{}\
             Run scripts/openapi-generate (it rewrites the document, then the SDK models) and \
             commit the result.",
            line + 1,
            show(&committed),
            show(&generated),
        );
    }
}
