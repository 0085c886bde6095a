//! The decider (C3): from a workflow definition and the current steps of a task, what happens next.
//!
//! It is a pure function, so that a store can run it inside the same transaction that records a
//! step's result: the result and the work it causes are written together or not at all.

use crate::state::StepState;
use crate::workflow::WorkflowDef;

/// What the decider sees of one existing step of the task.
#[derive(Debug, Clone, Copy)]
pub struct StepView<'a> {
    pub name: &'a str,
    pub state: StepState,
    pub output: Option<&'a serde_json::Value>,
}

/// What to do next with a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Create these steps (indexes into the definition's steps) as Pending.
    Schedule(Vec<usize>),
    /// Steps are still pending or processing: nothing to do until one of them changes.
    Wait,
    /// Every step is processed; the task's output is the last step's output.
    Complete { output: serde_json::Value },
    /// A step is in Error: the task fails until an operator resubmits it.
    Fail { step: String },
    /// A step was cancelled: the task is cancelled.
    Cancelled,
}

/// Decides the next move of a task that runs the definition's steps in order.
pub fn decide(def: &WorkflowDef, steps: &[StepView<'_>]) -> Decision {
    let mut last_output = serde_json::Value::Null;
    for (i, step_def) in def.steps.iter().enumerate() {
        let Some(step) = steps.iter().find(|s| s.name == step_def.name) else {
            return Decision::Schedule(vec![i]);
        };
        match step.state {
            StepState::Processed => {
                last_output = step.output.cloned().unwrap_or(serde_json::Value::Null);
            }
            StepState::Pending | StepState::Processing => return Decision::Wait,
            StepState::Error => return Decision::Fail { step: step.name.to_owned() },
            StepState::Cancelled => return Decision::Cancelled,
        }
    }
    Decision::Complete { output: last_output }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def() -> WorkflowDef {
        WorkflowDef::from_json(
            r#"{"name":"order","steps":[
                {"name":"reserve","agent":"http"},
                {"name":"charge","agent":"http"},
                {"name":"ship","agent":"http"}]}"#,
        )
        .unwrap()
    }

    fn v<'a>(name: &'a str, state: StepState, output: Option<&'a serde_json::Value>) -> StepView<'a> {
        StepView { name, state, output }
    }

    #[test]
    fn table() {
        use StepState::*;
        let out = json!({"tracking": "T1"});
        let cases: Vec<(Vec<StepView>, Decision)> = vec![
            (vec![], Decision::Schedule(vec![0])),
            (vec![v("reserve", Pending, None)], Decision::Wait),
            (vec![v("reserve", Processing, None)], Decision::Wait),
            (vec![v("reserve", Processed, None)], Decision::Schedule(vec![1])),
            (vec![v("reserve", Processed, None), v("charge", Error, None)], Decision::Fail { step: "charge".into() }),
            (vec![v("reserve", Cancelled, None)], Decision::Cancelled),
            (
                vec![v("reserve", Processed, None), v("charge", Processed, None), v("ship", Processing, None)],
                Decision::Wait,
            ),
            (
                vec![v("ship", Processed, Some(&out)), v("reserve", Processed, None), v("charge", Processed, None)],
                Decision::Complete { output: out.clone() },
            ),
        ];
        for (i, (steps, want)) in cases.into_iter().enumerate() {
            assert_eq!(decide(&def(), &steps), want, "case {i}");
        }
    }
}
