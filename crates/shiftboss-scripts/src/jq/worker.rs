//! The worker process's side: read requests from stdin, run them, answer on stdout, until stdin
//! closes. It runs under an address-space limit it sets on itself first, so a filter that
//! allocates without end ends this process (the pool sees it and says so), not the engine.
//!
//! Protocol, one request after the other: the filter as one line of JSON (a string), then the
//! input as one line of JSON; the answer is one line, `{"ok": [results...]}` or `{"error": "..."}`.

use super::filter::Filters;
use std::io::{BufRead, Write};

/// The arguments a worker is started with, after the command's own: `MEMORY_BYTES OUTPUT_BYTES`.
pub fn worker_args(memory: u64, max_output: usize) -> [String; 2] {
    [memory.to_string(), max_output.to_string()]
}

/// The worker's main loop; `args` are those of [`worker_args`]. Returns the process exit code.
pub fn worker_main(args: &[String]) -> i32 {
    let (Some(memory), Some(max_output)) =
        (args.first().and_then(|a| a.parse::<u64>().ok()), args.get(1).and_then(|a| a.parse::<usize>().ok()))
    else {
        eprintln!("jq worker: expected MEMORY_BYTES OUTPUT_BYTES");
        return 2;
    };
    let limit = rustix::process::Rlimit { current: Some(memory), maximum: Some(memory) };
    if let Err(e) = rustix::process::setrlimit(rustix::process::Resource::Data, limit) {
        eprintln!("jq worker: cannot limit its memory: {e}");
        return 2;
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut filters = Filters::default();
    let (mut filter_line, mut input_line) = (String::new(), String::new());
    loop {
        filter_line.clear();
        input_line.clear();
        match (input.read_line(&mut filter_line), input.read_line(&mut input_line)) {
            (Ok(n), Ok(m)) if n > 0 && m > 0 => {}
            _ => return 0,
        }
        let answer = match serde_json::from_str::<String>(&filter_line) {
            Ok(filter) => match filters.run(&filter, input_line.trim_end(), max_output) {
                Ok(results) => serde_json::json!({"ok": results}),
                Err(e) => serde_json::json!({"error": e}),
            },
            Err(e) => serde_json::json!({"error": format!("a bad request: {e}")}),
        };
        if writeln!(out, "{answer}").and_then(|()| out.flush()).is_err() {
            return 0;
        }
    }
}
