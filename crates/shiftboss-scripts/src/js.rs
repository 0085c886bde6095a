//! JavaScript evaluation in QuickJS, sandboxed: a fresh context per evaluation, in a runtime with
//! a memory limit, a stack limit and a deadline (QuickJS asks an interrupt handler every few
//! thousand instructions, and stops the script with an uncatchable exception when it says so).
//!
//! No I/O can happen: the context has the language's own objects only (no `require`, no module
//! loader, no `fetch`, no timers, no `std`/`os` modules), so a script can compute and nothing
//! else. Each evaluation has a context of its own, so scripts never see each other's globals or
//! builtins. The runtime under it (its heap and atoms) is kept per thread and used again, after a
//! garbage collection, by the next evaluation on that thread: making one costs about as much as a
//! small script. A runtime whose evaluation ran out of time or memory, or failed in the engine, is
//! dropped rather than used again.

use crate::ScriptError;
use rquickjs::context::EvalOptions;
use rquickjs::{Context, Ctx, Runtime, Value};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

thread_local! {
    /// This thread's runtime, between evaluations.
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

/// The bounds of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsLimits {
    /// The longest one evaluation may run.
    pub time: Duration,
    /// The most memory its runtime may allocate, in bytes.
    pub memory: usize,
    /// The most stack its runtime may use, in bytes (deep recursion stops with a RangeError).
    pub stack: usize,
    /// The longest result, as JSON text, in bytes.
    pub output: usize,
}

impl Default for JsLimits {
    fn default() -> Self {
        JsLimits { time: Duration::from_secs(1), memory: 32 << 20, stack: 256 << 10, output: 1 << 20 }
    }
}

/// Evaluates `script` as a classic (non-strict) script with `$` bound to `input`, and gives the
/// value of its last statement as JSON (`undefined` and functions give null), as Conductor's
/// JavaScript evaluator does.
pub fn evaluate(script: &str, input: &serde_json::Value, limits: &JsLimits) -> Result<serde_json::Value, ScriptError> {
    let engine = |e: rquickjs::Error| ScriptError::Engine(e.to_string());
    let runtime = match RUNTIME.with(|r| r.borrow_mut().take()) {
        Some(r) => r,
        None => Runtime::new().map_err(engine)?,
    };
    let out = evaluate_in(&runtime, script, input, limits);
    // A script that threw leaves the runtime as it found it once its context is gone; one that
    // ran out of time or memory, or broke the engine, may not.
    // Nor is one that holds jobs a script queued (a promise's): they would run in the next.
    let clean = matches!(out, Ok(_) | Err(ScriptError::Threw(_) | ScriptError::Result(_) | ScriptError::Input(_)));
    if clean && !runtime.is_job_pending() {
        runtime.run_gc();
        RUNTIME.with(|r| *r.borrow_mut() = Some(runtime));
    }
    out
}

fn evaluate_in(
    runtime: &Runtime,
    script: &str,
    input: &serde_json::Value,
    limits: &JsLimits,
) -> Result<serde_json::Value, ScriptError> {
    let engine = |e: rquickjs::Error| ScriptError::Engine(e.to_string());
    runtime.set_memory_limit(limits.memory);
    runtime.set_max_stack_size(limits.stack);
    let deadline = Instant::now() + limits.time;
    let timed_out = Arc::new(AtomicBool::new(false));
    let flag = timed_out.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || {
        let late = Instant::now() >= deadline;
        if late {
            flag.store(true, Ordering::Relaxed);
        }
        late
    })));
    // The language's objects that scripts compute with (promises too: `import()` makes one); not
    // Proxy, typed arrays, weak references or `performance`, which a script that maps JSON to JSON
    // has no use for and which cost each context's making.
    use rquickjs::context::intrinsic::{Date, Eval, Json, MapSet, Promise, RegExp, RegExpCompiler};
    let context =
        Context::custom::<(Date, Eval, RegExpCompiler, RegExp, Json, MapSet, Promise)>(runtime).map_err(engine)?;
    let input = serde_json::to_string(input).map_err(|e| ScriptError::Input(e.to_string()))?;
    let out = context.with(|ctx| run(&ctx, script, &input, limits));
    match out {
        Err(_) if timed_out.load(Ordering::Relaxed) => Err(ScriptError::TimedOut(limits.time)),
        Err(ScriptError::Threw(m)) if m.contains("out of memory") => Err(ScriptError::OutOfMemory(limits.memory)),
        Err(ScriptError::Engine(m)) if m.contains("Allocation") || m.contains("allocat") => {
            Err(ScriptError::OutOfMemory(limits.memory))
        }
        other => other,
    }
}

const QUIET_CONSOLE: &str = "var console = {log: function () {}, info: function () {}, warn: function () {}, error: function () {}, debug: function () {}};";

fn run(ctx: &Ctx<'_>, script: &str, input: &str, limits: &JsLimits) -> Result<serde_json::Value, ScriptError> {
    let input = ctx.json_parse(input).map_err(|e| thrown(ctx, e))?;
    ctx.globals().set("$", input).map_err(|e| thrown(ctx, e))?;
    // Scripts written for Conductor may log; here logging goes nowhere.
    ctx.eval::<(), _>(QUIET_CONSOLE).map_err(|e| thrown(ctx, e))?;
    let mut options = EvalOptions::default();
    // Conductor's engines run scripts in sloppy mode: `x = 1` without `var` works there.
    options.strict = false;
    let value: Value = ctx.eval_with_options(script, options).map_err(|e| thrown(ctx, e))?;
    let text = match ctx.json_stringify(value).map_err(|e| thrown(ctx, e))? {
        Some(s) => s.to_string().map_err(|e| ScriptError::Result(e.to_string()))?,
        None => return Ok(serde_json::Value::Null),
    };
    if text.len() > limits.output {
        return Err(ScriptError::Result(format!(
            "the result is {} bytes of JSON; the limit is {}",
            text.len(),
            limits.output
        )));
    }
    serde_json::from_str(&text).map_err(|e| ScriptError::Result(e.to_string()))
}

/// The message of a JavaScript exception (`TypeError: x is not a function`), or the engine's error.
fn thrown(ctx: &Ctx<'_>, e: rquickjs::Error) -> ScriptError {
    if !matches!(e, rquickjs::Error::Exception) {
        return ScriptError::Engine(e.to_string());
    }
    let v = ctx.catch();
    let text = if let Some(ex) = v.as_exception() {
        let message = ex.message().unwrap_or_default();
        let name: Option<String> = ex.get("name").ok();
        match name {
            Some(n) if !n.is_empty() => format!("{n}: {message}"),
            _ => message,
        }
    } else if let Some(s) = v.as_string() {
        s.to_string().unwrap_or_default()
    } else {
        ctx.json_stringify(v).ok().flatten().and_then(|s| s.to_string().ok()).unwrap_or_else(|| "a value".into())
    };
    // Say why the usual ways out are missing, rather than leave a bare "not defined".
    let io = ["require", "fetch", "setTimeout", "setInterval", "XMLHttpRequest", "process", "std", "os", "Java"];
    if text.starts_with("ReferenceError")
        && io.iter().any(|w| text.contains(&format!("'{w}'")) || text.contains(&format!(" {w} ")))
    {
        return ScriptError::Threw(format!(
            "{text} (scripts have no I/O: no modules, network, timers, files or host objects)"
        ));
    }
    ScriptError::Threw(text)
}
