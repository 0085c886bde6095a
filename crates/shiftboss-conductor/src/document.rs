//! Reading the Conductor JSON documents: the workflow text, a bundle's parts, and the typed fields
//! of its objects, with errors at the place in the document.

use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::DefinitionError;
use shiftboss_core::workflow::parse::MAX_DEFINITION_BYTES;

pub(super) fn read_json(text: &str, prefix: &str) -> Result<Value, DefinitionError> {
    if text.len() > MAX_DEFINITION_BYTES {
        return Err(err(format!("{prefix}document").trim_end(), format!("larger than {MAX_DEFINITION_BYTES} bytes")));
    }
    serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let message = message.rfind(" at line ").map_or(message.as_str(), |i| &message[..i]).to_owned();
        err(format!("{prefix}line {} column {}", e.line(), e.column()), message)
    })
}

/// The workflow and the TaskDefs of a bundle; a bare WorkflowDef has none.
pub(super) fn split_bundle(doc: Value) -> Result<(Value, Vec<Value>), DefinitionError> {
    let Value::Object(mut m) = doc else {
        return Err(err("document", "a Conductor definition is a JSON object"));
    };
    if !m.contains_key("workflowDef") {
        return Ok((Value::Object(m), Vec::new()));
    }
    if let Some(extra) = m.keys().find(|k| !matches!(k.as_str(), "workflowDef" | "taskDefs")) {
        return Err(err(extra.as_str(), "a bundle holds only `workflowDef` and `taskDefs`"));
    }
    let wf = m.remove("workflowDef").unwrap_or_default();
    let defs = match m.remove("taskDefs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(err("taskDefs", "must be an array of TaskDefs")),
    };
    Ok((wf, defs))
}

/// A step list of the document: an array of tasks.
pub(super) fn list_of<'v>(v: &'v Value, path: &str) -> Result<&'v [Value], DefinitionError> {
    match v {
        Value::Array(items) => Ok(items),
        _ => Err(err(path, "must be an array of tasks")),
    }
}

/// Null, false, 0, "", [] and {}: what Conductor's exports write for fields not in use.
pub(super) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

pub(super) fn opt_str<'m>(m: &'m Map<String, Value>, key: &str, at: &str) -> Result<Option<&'m str>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(field_path(at, key), "must be a string")),
    }
}

pub(super) fn opt_u64(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_u64().map(Some).ok_or_else(|| err(field_path(at, key), "must be a whole number"))
        }
        Some(_) => Err(err(field_path(at, key), "must be a number")),
    }
}

pub(super) fn opt_bool(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<bool>, DefinitionError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(err(field_path(at, key), "must be true or false")),
    }
}

fn field_path(at: &str, key: &str) -> String {
    if at.is_empty() { key.to_owned() } else { format!("{at}.{key}") }
}
