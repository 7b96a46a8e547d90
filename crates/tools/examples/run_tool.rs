//! Runs one built-in tool from the command line, for benchmarks and poking:
//!
//! ```sh
//! cargo run --release -p ferroclaw-tools --example run_tool -- grep '{"pattern": "fn main"}' /path/to/tree
//! ```

use ferroclaw_tools::{ToolContext, builtin_tools};

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, input, rest @ ..] = args.as_slice() else {
        eprintln!("usage: run_tool TOOL JSON_INPUT [WORKSPACE]");
        std::process::exit(2);
    };
    let workspace = rest.first().cloned().unwrap_or_else(|| ".".into());
    let workspace = std::fs::canonicalize(&workspace).unwrap_or_else(|e| {
        eprintln!("workspace {workspace}: {e}");
        std::process::exit(2);
    });
    let input: serde_json::Value = serde_json::from_str(input).unwrap_or_else(|e| {
        eprintln!("input is not JSON: {e}");
        std::process::exit(2);
    });
    let tools = builtin_tools();
    if let Err(e) = tools.validate(name, &input) {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let Some(tool) = tools.get(name) else { unreachable!("validated") };
    match tool.execute(input, &ToolContext::new(workspace)).await {
        Ok(out) => {
            println!("{}", out.joined_text());
            std::process::exit(i32::from(out.is_error));
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
