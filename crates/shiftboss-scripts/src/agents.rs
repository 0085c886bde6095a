//! The `inline` and `jq` agents: a step's config holds the script or filter, the step's resolved
//! input is what it reads (`$` in JavaScript, `.` in jq), and the output is Conductor's.
//!
//! - `inline`: config `{"script": "...", "as": "value" | "bool"}`; output `{"result": value}`.
//!   `as: "bool"` (the loop conditions of imported DO_WHILEs) turns the value into a boolean the
//!   way Conductor's evaluator does: a boolean is itself, a number is true above 0, anything else
//!   is false.
//! - `jq`: config `{"filter": "..."}`; output `{"result": first result or null, "resultList": [all]}`.
//!
//! A script that throws, runs past its time or memory, or a filter that fails, fails its step for
//! good (`AgentError::Permanent`) with the reason: the same input would fail the same way again.

use crate::ScriptError;
use crate::jq::{JqLimits, JqPool, WorkerCommand};
use crate::js::{self, JsLimits};
use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_core::workflow::StepDef;
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// The name `serve` registers the JavaScript agent under (the importer's INLINE steps use it).
pub const INLINE_AGENT: &str = "inline";
/// The name `serve` registers the jq agent under (the importer's JSON_JQ_TRANSFORM steps use it).
pub const JQ_AGENT: &str = "jq";

fn to_agent_error(e: ScriptError) -> AgentError {
    match e {
        // Not the script's doing: worth another try.
        ScriptError::Engine(_) => AgentError::Transient(e.to_string()),
        _ => AgentError::Permanent(e.to_string()),
    }
}

/// Evaluates JavaScript in QuickJS, on blocking threads, at most `concurrency` at once.
pub struct InlineAgent {
    limits: JsLimits,
    running: Arc<Semaphore>,
}

impl InlineAgent {
    pub fn new(limits: JsLimits, concurrency: usize) -> InlineAgent {
        InlineAgent { limits, running: Arc::new(Semaphore::new(concurrency.max(1))) }
    }
}

impl Default for InlineAgent {
    fn default() -> Self {
        InlineAgent::new(JsLimits::default(), 4)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum As {
    Value,
    Bool,
}

fn inline_config(config: &Value) -> Result<(String, As), String> {
    let script = config.get("script").and_then(Value::as_str).ok_or("config.script must be the script's text")?;
    let as_ = match config.get("as").and_then(Value::as_str) {
        None | Some("value") => As::Value,
        Some("bool") => As::Bool,
        Some(other) => return Err(format!("config.as: {other:?} is neither \"value\" nor \"bool\"")),
    };
    if let Some(obj) = config.as_object()
        && let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "script" | "as"))
    {
        return Err(format!("config.{k}: the inline agent has no such setting"));
    }
    Ok((script.to_owned(), as_))
}

/// Conductor's reading of a script's value as a condition.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f > 0.0),
        _ => false,
    }
}

#[async_trait]
impl Agent for InlineAgent {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        let (script, as_) = inline_config(&call.config).map_err(AgentError::Permanent)?;
        let permit = self.running.clone().acquire_owned().await.map_err(|_| AgentError::Transient("closed".into()))?;
        let (input, limits) = (call.input.clone(), self.limits);
        // Off the runtime's workers: a script may take up to its time limit.
        let value = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            js::evaluate(&script, &input, &limits)
        })
        .await
        .map_err(|e| AgentError::Transient(format!("the script's thread failed: {e}")))?
        .map_err(to_agent_error)?;
        Ok(match as_ {
            As::Value => json!({"result": value}),
            As::Bool => json!({"result": truthy(&value)}),
        })
    }

    fn check_config(&self, step: &StepDef) -> Result<(), String> {
        inline_config(&step.config).map(|_| ())
    }
}

/// Runs jq filters in worker processes.
pub struct JqAgent {
    pool: JqPool,
}

impl JqAgent {
    pub fn new(command: WorkerCommand, limits: JqLimits) -> JqAgent {
        JqAgent { pool: JqPool::new(command, limits) }
    }
}

fn jq_config(config: &Value) -> Result<&str, String> {
    let filter = config.get("filter").and_then(Value::as_str).ok_or("config.filter must be the jq filter's text")?;
    if let Some(obj) = config.as_object()
        && let Some(k) = obj.keys().find(|k| k.as_str() != "filter")
    {
        return Err(format!("config.{k}: the jq agent has no such setting"));
    }
    Ok(filter)
}

#[async_trait]
impl Agent for JqAgent {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        let filter = jq_config(&call.config).map_err(AgentError::Permanent)?;
        let results = self.pool.run(filter, &call.input).await.map_err(to_agent_error)?;
        Ok(json!({"result": results.first().cloned().unwrap_or(Value::Null), "resultList": results}))
    }

    /// The filter is compiled here (in this process: compiling is bounded by the filter's
    /// length), so that a filter that does not parse is refused with its definition.
    fn check_config(&self, step: &StepDef) -> Result<(), String> {
        crate::jq::filter::check(jq_config(&step.config)?)
    }
}
