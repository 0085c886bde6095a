//! The evaluators on their own: results as Conductor gives them, and every limit ending an
//! evaluation with a clear error while the next evaluation works.

use serde_json::{Value, json};
use shiftboss_scripts::ScriptError;
use shiftboss_scripts::jq::{JqLimits, JqPool, WorkerCommand};
use shiftboss_scripts::js::{JsLimits, evaluate};
use std::time::{Duration, Instant};

fn js(script: &str, input: Value) -> Result<Value, ScriptError> {
    evaluate(script, &input, &JsLimits::default())
}

fn pool(limits: JqLimits) -> JqPool {
    let command = WorkerCommand { program: env!("CARGO_BIN_EXE_shiftboss-jq-worker").into(), args: vec![] };
    JqPool::new(command, limits)
}

#[test]
fn a_script_reads_its_input_and_gives_its_last_value() {
    assert_eq!(js("(function(){ return $.a + $.b; })()", json!({"a": 1, "b": 2})).unwrap(), json!(3));
    assert_eq!(js("$.items.map(function (x) { return x * 2; })", json!({"items": [1, 2]})).unwrap(), json!([2, 4]));
    assert_eq!(js("var o = {n: $.name}; o", json!({"name": "ann"})).unwrap(), json!({"n": "ann"}));
    assert_eq!(js("undefined", json!({})).unwrap(), Value::Null);
    // Sloppy mode, as in Conductor's engines: a variable without `var`.
    assert_eq!(js("total = 0; for (i = 0; i < 3; i++) total += i; total", json!({})).unwrap(), json!(3));
    assert_eq!(js("$['a-b'] == 'x'", json!({"a-b": "x"})).unwrap(), json!(true));
    assert_eq!(js("console.log('debugging'); 7", json!({})).unwrap(), json!(7), "logging goes nowhere");
}

#[test]
fn a_script_that_throws_or_does_not_parse_says_why() {
    let e = js("throw new Error('card refused')", json!({})).unwrap_err();
    assert_eq!(e, ScriptError::Threw("Error: card refused".into()));
    let e = js("$.missing.field", json!({})).unwrap_err();
    assert!(matches!(&e, ScriptError::Threw(m) if m.starts_with("TypeError")), "{e}");
    let e = js("function (", json!({})).unwrap_err();
    assert!(matches!(&e, ScriptError::Threw(m) if m.starts_with("SyntaxError")), "{e}");
    let e = js("throw 'plain'", json!({})).unwrap_err();
    assert_eq!(e, ScriptError::Threw("plain".into()));
}

#[test]
fn a_script_that_loops_for_ever_is_stopped_at_its_time_limit() {
    let limits = JsLimits { time: Duration::from_millis(200), ..JsLimits::default() };
    let start = Instant::now();
    let e = evaluate("while (true) {}", &json!({}), &limits).unwrap_err();
    assert_eq!(e, ScriptError::TimedOut(Duration::from_millis(200)));
    assert!(start.elapsed() < Duration::from_secs(2), "stopped promptly: {:?}", start.elapsed());
    // A try/catch cannot keep it going: the interrupt is uncatchable.
    let e = evaluate("for (;;) { try { while (true) {} } catch (e) {} }", &json!({}), &limits).unwrap_err();
    assert_eq!(e, ScriptError::TimedOut(Duration::from_millis(200)));
    assert_eq!(js("1 + 1", json!({})).unwrap(), json!(2), "the next script runs");
}

#[test]
fn a_script_that_allocates_without_end_is_stopped_at_its_memory_limit() {
    let e = js("var a = []; while (true) { a.push(new Array(10000).fill('x')); }", json!({})).unwrap_err();
    assert_eq!(e, ScriptError::OutOfMemory(JsLimits::default().memory), "{e}");
    let e = js("var s = 'x'; while (true) { s = s + s; }", json!({})).unwrap_err();
    assert!(matches!(e, ScriptError::OutOfMemory(_) | ScriptError::Threw(_)), "{e}");
    let e = js("function f() { return f() + 1; } f()", json!({})).unwrap_err();
    assert!(matches!(&e, ScriptError::Threw(m) if m.contains("stack")), "{e}");
    assert_eq!(js("2 * 21", json!({})).unwrap(), json!(42));
}

#[test]
fn a_script_has_no_way_out() {
    for probe in [
        "require('fs')",
        "fetch('http://127.0.0.1:1/')",
        "setTimeout(function () {}, 1)",
        "std.open('/etc/passwd', 'r')",
        "os.exec(['ls'])",
        "new XMLHttpRequest()",
        "process.env",
    ] {
        let e = js(probe, json!({})).unwrap_err();
        assert!(
            matches!(&e, ScriptError::Threw(m) if m.starts_with("ReferenceError") && m.contains("no I/O")),
            "{probe}: {e}"
        );
    }
    let e = js("import('fs')", json!({})).map(|v| v.to_string()).unwrap_or_else(|e| e.to_string());
    assert!(!e.contains("root:"), "no module can be loaded: {e}");
}

#[test]
fn a_result_past_the_output_limit_is_refused() {
    let limits = JsLimits { output: 100, ..JsLimits::default() };
    let e = evaluate("'x'.repeat(200)", &json!({}), &limits).unwrap_err();
    assert!(matches!(e, ScriptError::Result(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jq_filter_gives_its_results() {
    let p = pool(JqLimits::default());
    let input = json!({"persons": [{"name": "a", "id": 1}, {"name": "b", "id": 2}], "queryExpression": "x"});
    let out = p.run(".persons | map({user: .name})", &input).await.unwrap();
    assert_eq!(out, vec![json!([{"user": "a"}, {"user": "b"}])]);
    let out = p.run(".persons[] | .id", &input).await.unwrap();
    assert_eq!(out, vec![json!(1), json!(2)]);
    assert_eq!(p.run("empty", &input).await.unwrap(), Vec::<Value>::new());
    let out = p.run(r#".persons | map(select(.name | test("^b"))) | length"#, &input).await.unwrap();
    assert_eq!(out, vec![json!(1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jq_errors_say_why_and_the_worker_goes_on() {
    let p = pool(JqLimits::default());
    let e = p.run(".a | error(\"no stock\")", &json!({"a": 1})).await.unwrap_err();
    assert!(matches!(&e, ScriptError::Jq(m) if m.contains("no stock")), "{e}");
    let e = p.run(".a +", &json!({})).await.unwrap_err();
    assert!(matches!(&e, ScriptError::Jq(m) if m.contains("parse")), "{e}");
    let e = p.run("nosuchfunction(1)", &json!({})).await.unwrap_err();
    assert!(matches!(&e, ScriptError::Jq(m) if m.contains("nosuchfunction")), "{e}");
    let e = p.run(".a.b", &json!({"a": 5})).await.unwrap_err();
    assert!(matches!(e, ScriptError::Jq(_)), "{e}");
    let e = p.run("env", &json!({})).await.unwrap_err();
    assert!(matches!(&e, ScriptError::Jq(m) if m.contains("env")), "the environment is not readable: {e}");
    assert_eq!(p.run(".a", &json!({"a": 5})).await.unwrap(), vec![json!(5)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jq_filter_that_runs_for_ever_or_allocates_without_end_is_stopped() {
    let p = pool(JqLimits { time: Duration::from_millis(500), memory: 256 << 20, ..JqLimits::default() });
    let start = Instant::now();
    let e = p.run("last(repeat(1))", &json!({})).await.unwrap_err();
    assert_eq!(e, ScriptError::TimedOut(Duration::from_millis(500)));
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    assert_eq!(p.run(".", &json!(1)).await.unwrap(), vec![json!(1)], "a fresh worker takes over");
    let p = pool(JqLimits { time: Duration::from_secs(20), memory: 128 << 20, ..JqLimits::default() });
    let e = p.run("[range(1e10)] | length", &json!({})).await.unwrap_err();
    assert_eq!(e, ScriptError::OutOfMemory(128 << 20), "{e}");
    assert_eq!(p.run(".x", &json!({"x": 2})).await.unwrap(), vec![json!(2)]);
    let p = pool(JqLimits { output: 1000, ..JqLimits::default() });
    let e = p.run("range(1000)", &json!({})).await.unwrap_err();
    assert!(matches!(&e, ScriptError::Jq(m) if m.contains("1000 bytes")), "{e}");
}

#[test]
fn scripts_on_one_thread_never_see_each_other_and_a_stopped_one_spoils_nothing() {
    // Evaluations on one thread share its runtime (kept between them), never a context.
    let set = "var leaked = 1; globalThis.also = 2; Array.prototype.evil = 3; Object.prototype.bad = 4; 'set'";
    assert_eq!(js(set, json!({})).unwrap(), json!("set"));
    let look = "typeof leaked + ',' + typeof also + ',' + typeof [].evil + ',' + typeof ({}).bad";
    assert_eq!(js(look, json!({})).unwrap(), json!("undefined,undefined,undefined,undefined"));
    let limits = JsLimits { time: std::time::Duration::from_millis(50), ..JsLimits::default() };
    assert!(matches!(evaluate("while (true) {}", &json!({}), &limits), Err(ScriptError::TimedOut(_))));
    let e = js("var a = []; while (true) { a.push(new Array(10000).fill('x')); }", json!({})).unwrap_err();
    assert_eq!(e, ScriptError::OutOfMemory(JsLimits::default().memory), "{e}");
    assert_eq!(js("$.a + 1", json!({"a": 41})).unwrap(), json!(42), "the next evaluation runs as the first did");
}
