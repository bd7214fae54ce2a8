//! The README's Rust example is `examples/quickstart.rs`: this test keeps the two identical
//! and runs the example against the local server.

mod common;

#[allow(dead_code)]
#[path = "../examples/quickstart.rs"]
mod quickstart;

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("missing {start}"))
        + start.len();
    let to = text[from..]
        .find(end)
        .unwrap_or_else(|| panic!("missing {end}"))
        + from;
    text[from..to].trim_matches('\n')
}

#[test]
fn readme_shows_the_example_verbatim() {
    let example = include_str!("../examples/quickstart.rs");
    let readme = include_str!("../../README.md");
    let shown = between(example, "// README:begin\n", "// README:end");
    let in_readme = between(readme, "```rust\n", "```");
    assert_eq!(
        in_readme, shown,
        "README.md's Rust example must match core/examples/quickstart.rs"
    );
}

#[tokio::test]
async fn the_example_runs_against_the_local_server() {
    let server = common::server().await;
    let config = cycles_core::Config::new(server.url(), common::KEY);
    quickstart::run(config)
        .await
        .expect("the quick start works");
    let kinds: Vec<String> = server.ledger().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["reserve", "commit"]);
}
