//! What expressions see while the decider runs: `task` (its input, id, key, workflow, version and
//! variables) and every step of the definition by name (its input, output and state). Inside a loop's pass, a step's name
//! means its instance of that pass, then of the enclosing passes, then outside any loop; outside
//! its loop, a loop body's step means its latest pass.

use super::{StepView, TaskView};
use crate::expr::Scope;
use crate::workflow::{StepKind, WorkflowDef};
use serde_json::{Value, json};
use std::borrow::Cow;

pub struct StepScope<'a> {
    pub task: &'a TaskView<'a>,
    /// The task's input with the workflow's input defaults filled in.
    pub input: &'a Value,
    pub steps: &'a [StepView],
    /// The definition: a step of it that has not run reads as null.
    pub def: &'a WorkflowDef,
    /// The loop-pass suffix of the place being decided (`#2#1`), or empty.
    pub suffix: &'a str,
    /// The item of each fork_each pass being decided, by the fork_each's name, innermost last.
    pub items: &'a [(String, Value)],
}

impl StepScope<'_> {
    fn row(&self, name: &str) -> Option<&StepView> {
        let mut suffix = self.suffix;
        loop {
            let instance = format!("{name}{suffix}");
            if let Some(r) = self.steps.iter().rev().find(|s| s.name == instance) {
                return Some(r);
            }
            if suffix.is_empty() {
                // Outside the loop that ran it, a step means its latest pass.
                return self.steps.iter().rev().find(|s| super::base_name(&s.name) == name);
            }
            suffix = &suffix[..suffix.rfind('#').unwrap_or(0)];
        }
    }
}

/// The task's variables: the workflow's initial ones, then what each set step set, in the order
/// they ran (rows are in creation order, and a set step is done when it is created).
pub fn variables(def: &WorkflowDef, steps: &[StepView]) -> Value {
    let mut vars = match &def.variables {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    for r in steps.iter().filter(|r| r.kind == StepKind::Set && r.state == crate::state::StepState::Processed) {
        if let Value::Object(set) = &r.input {
            vars.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    Value::Object(vars)
}

impl Scope for StepScope<'_> {
    fn root(&self, name: &str) -> Option<Cow<'_, Value>> {
        if name == "task" {
            let t = self.task;
            return Some(Cow::Owned(json!({
                "input": self.input,
                "id": t.id,
                "key": t.key,
                "correlation_id": t.correlation_id,
                "workflow": self.def.name,
                "version": self.def.version,
                "variables": variables(self.def, self.steps),
            })));
        }
        // A name that is no step of the definition is unknown; a step that has not run is null.
        self.def.find(name)?;
        let mut v = match self.row(name) {
            Some(r) => json!({"input": r.input, "output": r.output, "state": r.state.as_str()}),
            None => Value::Null,
        };
        // Inside a fork_each's pass, the fork_each also gives that pass's item.
        if let (Value::Object(m), Some((_, item))) = (&mut v, self.items.iter().rev().find(|(n, _)| n == name)) {
            m.insert("item".into(), item.clone());
        }
        Some(Cow::Owned(v))
    }
}
