//! The undoing phase (P7): the compensations of the task's completed steps run one at a time,
//! newest completion first, each with its own retries. A compensation that fails for good stops
//! the phase: the task fails and an operator is alerted.

use super::walk::Working;
use super::{Action, NewStep, TaskMove, base_name, suffix_of};
use crate::state::StepState;
use crate::workflow::StepKind;
use std::cmp::Reverse;

/// True when some completed step of the task has a compensation to run.
pub fn needs_compensation(def: &crate::workflow::WorkflowDef, steps: &[super::StepView]) -> bool {
    let now = crate::time::Timestamp(0);
    let input = serde_json::Value::Null;
    let task = super::TaskView {
        id: 0,
        key: "",
        state: crate::state::TaskState::Compensating,
        input: &input,
        now,
        correlation_id: None,
    };
    Working::new(def, &task, steps).has_compensations()
}

impl Working<'_> {
    /// True when some completed step has a compensation.
    pub fn has_compensations(&self) -> bool {
        !self.to_undo().is_empty()
    }

    /// The completed agent steps that name a compensation, newest completion first.
    fn to_undo(&self) -> Vec<(String, i64)> {
        let mut done: Vec<_> = self
            .rows
            .iter()
            .filter(|r| r.kind == StepKind::Agent && r.state == StepState::Processed && r.compensates.is_none())
            .filter(|r| self.def.find(base_name(&r.name)).is_some_and(|d| d.compensate.is_some()))
            .map(|r| (r.name.clone(), r.updated_at.0, r.id))
            .collect();
        done.sort_by_key(|(_, at, id)| Reverse((*at, *id)));
        done.into_iter().map(|(n, _, id)| (n, id)).collect()
    }

    /// The compensating phase of the whole task.
    pub fn compensate(&mut self) -> TaskMove {
        for (done, _) in self.to_undo() {
            let Some(def) = self.def.find(base_name(&done)).and_then(|d| d.compensate.as_deref()) else {
                continue;
            };
            let suffix = suffix_of(&done).to_owned();
            let instance = format!("{}{suffix}", def.name);
            match self.row(&instance).map(|r| r.state) {
                None => {
                    // Without an input of its own, a compensation gets the input of the step it undoes.
                    let input = match &def.input {
                        None => self.row(&done).map(|r| r.input.clone()).unwrap_or_default(),
                        Some(_) => match self.input_of(def, &suffix) {
                            Ok(v) => v,
                            Err(_) => return TaskMove::CompensationFailed { step: instance },
                        },
                    };
                    self.push(Action::Create(NewStep {
                        name: instance,
                        def_name: def.name.clone(),
                        kind: StepKind::Agent,
                        state: StepState::Pending,
                        input,
                        output: None,
                        wake_at: None,
                        compensates: Some(done),
                        child: None,
                        agent: None,
                    }));
                    return TaskMove::Stay;
                }
                Some(StepState::Pending | StepState::Processing) => return TaskMove::Stay,
                Some(StepState::Processed) => continue,
                Some(StepState::Error | StepState::Cancelled) => {
                    return TaskMove::CompensationFailed { step: instance };
                }
            }
        }
        TaskMove::Compensated
    }
}
