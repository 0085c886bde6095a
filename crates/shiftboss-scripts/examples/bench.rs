//! The cost of one INLINE evaluation and one jq transform on a small input: p50 and p99 over
//! many runs, after a warm-up. `cargo run -p shiftboss-scripts --example bench [--release] [N]`
//! (the jq worker is this crate's `shiftboss-jq-worker`, built alongside; run `cargo build -p
//! shiftboss-scripts` first in the same profile).

use serde_json::json;
use shiftboss_scripts::jq::{JqLimits, JqPool, WorkerCommand};
use shiftboss_scripts::js::{JsLimits, evaluate};
use std::time::{Duration, Instant};

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!("{what:<40} n={:<6} p50={:>8.1?} p99={:>8.1?} max={:>8.1?}", times.len(), at(0.50), at(0.99), at(1.0));
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let input = json!({
        "evaluatorType": "javascript",
        "lines": [{"sku": "A", "unit": 40, "qty": 2}, {"sku": "B", "unit": 25, "qty": 1}, {"sku": "C", "unit": 5, "qty": 10}],
        "member": true
    });
    let script = "(function () { var sum = 0; for (var i = 0; i < $.lines.length; i++) { sum += $.lines[i].unit * $.lines[i].qty; } \
                  return {total: sum, due: $.member ? sum * 0.9 : sum}; })()";
    let limits = JsLimits::default();
    let mut times = Vec::with_capacity(n);
    for k in 0..n + 100 {
        let start = Instant::now();
        let out = evaluate(script, &input, &limits).expect("the script runs");
        if k >= 100 {
            times.push(start.elapsed());
        }
        assert_eq!(out["total"], json!(155));
    }
    report("INLINE (a fresh QuickJS context per call)", times);
    // What a fresh context costs by itself (the runtime under it is kept per thread).
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        evaluate("1", &json!({}), &limits).expect("runs");
        times.push(start.elapsed());
    }
    report("INLINE `1` (the context alone)", times);

    let exe = std::env::current_exe().expect("this example's path");
    let worker = exe.parent().and_then(|p| p.parent()).map(|d| d.join("shiftboss-jq-worker")).expect("target dir");
    let pool = JqPool::new(WorkerCommand { program: worker, args: vec![] }, JqLimits::default());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let filter = ".lines | map(select(.qty > 1)) | map({sku, cost: (.unit * .qty)})";
    let times = runtime.block_on(async {
        let mut times = Vec::with_capacity(n);
        for k in 0..n + 100 {
            let start = Instant::now();
            let out = pool.run(filter, &input).await.expect("the filter runs");
            if k >= 100 {
                times.push(start.elapsed());
            }
            assert_eq!(out.len(), 1);
        }
        times
    });
    report("jq transform (worker process, round trip)", times);
}
