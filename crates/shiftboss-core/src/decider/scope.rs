//! What expressions see while the decider runs: `task` (its input, id and key) and every step of
//! the definition by name (its input, output and state). Inside a loop's pass, a step's name
//! means its instance of that pass, then of the enclosing passes, then outside any loop; outside
//! its loop, a loop body's step means its latest pass.

use super::{StepView, TaskView};
use crate::expr::Scope;
use crate::workflow::WorkflowDef;
use serde_json::{Value, json};
use std::borrow::Cow;

pub struct StepScope<'a> {
    pub task: &'a TaskView<'a>,
    pub steps: &'a [StepView],
    /// The definition: a step of it that has not run reads as null.
    pub def: &'a WorkflowDef,
    /// The loop-pass suffix of the place being decided (`#2#1`), or empty.
    pub suffix: &'a str,
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

impl Scope for StepScope<'_> {
    fn root(&self, name: &str) -> Option<Cow<'_, Value>> {
        if name == "task" {
            let t = self.task;
            return Some(Cow::Owned(json!({"input": t.input, "id": t.id, "key": t.key})));
        }
        // A name that is no step of the definition is unknown; a step that has not run is null.
        self.def.find(name)?;
        Some(Cow::Owned(match self.row(name) {
            Some(r) => json!({"input": r.input, "output": r.output, "state": r.state.as_str()}),
            None => Value::Null,
        }))
    }
}
