//! What an operator's retry, rerun and skip do to a task's rows (P16), planned here so that every
//! store does the same; the store writes the plan and runs the decider again in one transaction.

use super::{StepView, base_name, suffix_of};
use crate::state::{StepState, TaskState};
use crate::workflow::{StepDef, StepKind, WorkflowDef};
use serde_json::{Value, json};

/// One change to a row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// An agent step runs again from scratch: Pending, due now, its failure count reset.
    Reset {
        /// The instance name of the row.
        name: String,
    },
    /// A control step is open again (Processing), with this output (a loop's pass).
    Reopen {
        /// The instance name of the row.
        name: String,
        /// Its new output, which replaces the old.
        output: Option<Value>,
    },
    /// The row goes: the decider schedules the step anew.
    Delete {
        /// The instance name of the row.
        name: String,
    },
    /// The step counts as done with this output, without running.
    Finish {
        /// The instance name of the row.
        name: String,
        /// The output it is recorded with, as if it had run.
        output: Value,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The row changes, written in this order.
    pub changes: Vec<RowChange>,
    /// The task's state once the changes are written (the decider then runs).
    pub task_state: TaskState,
}

/// Why an operator action cannot apply; shown to the operator as it is.
pub type Refusal = String;

/// Retry from the failed step: every step in Error runs again; a failed sub-workflow starts a new
/// child. A failed compensation is retried in the compensating phase.
pub fn plan_retry(_def: &WorkflowDef, state: TaskState, rows: &[StepView]) -> Result<Plan, Refusal> {
    if state != TaskState::Failed {
        return Err(format!("only a failed task can be retried; this one is {state}"));
    }
    // A failed compensation is what stopped the task: retrying it goes on compensating, and the
    // step whose failure started the compensation stays as it was.
    let compensating = rows.iter().any(|r| r.state == StepState::Error && r.compensates.is_some());
    let task_state = if compensating { TaskState::Compensating } else { TaskState::Running };
    let mut changes = Vec::new();
    for r in rows.iter().filter(|r| r.state == StepState::Error && r.compensates.is_some() == compensating) {
        changes.push(match r.kind {
            StepKind::Agent => RowChange::Reset { name: r.name.clone() },
            StepKind::SubWorkflow => RowChange::Delete { name: r.name.clone() },
            _ => RowChange::Reopen { name: r.name.clone(), output: r.output.clone() },
        });
    }
    if changes.is_empty() {
        return Err("no step is in error (the task was ended by a terminate step or an expression): rerun it from a \
                    step instead"
            .into());
    }
    Ok(Plan { changes, task_state })
}

/// Resubmit one step in Error (P16): it runs again, the forks and loops around it that failed
/// with it are open again, and a failed task runs again (or compensates again, for a compensation).
pub fn plan_resubmit(def: &WorkflowDef, state: TaskState, rows: &[StepView], step: &str) -> Result<Plan, Refusal> {
    let row = rows.iter().find(|r| r.name == step).ok_or_else(|| format!("the task has no step {step:?}"))?;
    if row.state != StepState::Error {
        return Err(format!("step {step:?} is {}; only a step in error can be resubmitted", row.state));
    }
    if row.kind != StepKind::Agent {
        return Err(format!("{step:?} is a {} step: retry the task instead", row.kind.as_str()));
    }
    let task_state = match state {
        TaskState::Failed if row.compensates.is_some() => TaskState::Compensating,
        TaskState::Failed => TaskState::Running,
        TaskState::Running | TaskState::Paused | TaskState::Compensating => state,
        other => return Err(format!("the task is {other}; its steps cannot be resubmitted")),
    };
    let mut changes = vec![RowChange::Reset { name: step.to_owned() }];
    changes.extend(reopen_ancestors(def, rows, step, |r| r.state == StepState::Error));
    Ok(Plan { changes, task_state })
}

/// Rerun from a named step: that step and every step started after it go and run again; the
/// control steps around it are open again. Compensations already run go too.
pub fn plan_rerun(def: &WorkflowDef, state: TaskState, rows: &[StepView], from: &str) -> Result<Plan, Refusal> {
    if state.is_active() {
        return Err(format!("the task is {state}: pause it before rerunning a step"));
    }
    let start = rows.iter().find(|r| r.name == from).ok_or_else(|| format!("the task has no step {from:?}"))?;
    if start.compensates.is_some() {
        return Err(format!("{from:?} is a compensation: rerun from the step it undoes, or retry the task"));
    }
    let mut changes: Vec<RowChange> = rows
        .iter()
        .filter(|r| r.id >= start.id || r.compensates.is_some())
        .map(|r| RowChange::Delete { name: r.name.clone() })
        .collect();
    changes.extend(reopen_ancestors(def, rows, from, |r| r.id < start.id));
    Ok(Plan { changes, task_state: if state == TaskState::Paused { state } else { TaskState::Running } })
}

/// Skip a step: it counts as processed with `output` (null when none), and the task moves on.
pub fn plan_skip(
    def: &WorkflowDef,
    state: TaskState,
    rows: &[StepView],
    step: &str,
    output: Value,
) -> Result<Plan, Refusal> {
    let row = rows.iter().find(|r| r.name == step).ok_or_else(|| format!("the task has no step {step:?}"))?;
    if row.kind != StepKind::Agent {
        return Err(format!("{step:?} is a {} step: only agent steps can be skipped", row.kind.as_str()));
    }
    if !matches!(row.state, StepState::Pending | StepState::Processing | StepState::Error) {
        return Err(format!("{step:?} is {}: only a pending, processing or failed step can be skipped", row.state));
    }
    let task_state = match state {
        TaskState::Failed => {
            if row.compensates.is_some() {
                TaskState::Compensating
            } else {
                TaskState::Running
            }
        }
        TaskState::Running | TaskState::Paused | TaskState::Compensating => state,
        other => return Err(format!("the task is {other}: nothing of it runs any more")),
    };
    let mut changes = vec![RowChange::Finish { name: step.to_owned(), output }];
    changes.extend(reopen_ancestors(def, rows, step, |r| r.state == StepState::Error));
    Ok(Plan { changes, task_state })
}

/// The wait step a signal ends: the waiting step of that instance name, or one whose definition
/// waits for a signal of that name.
pub fn waiting_for<'a>(def: &WorkflowDef, rows: &'a [StepView], signal: &str) -> Option<&'a StepView> {
    rows.iter().find(|r| {
        r.kind == StepKind::Wait
            && r.state == StepState::Processing
            && (r.name == signal || def.find(base_name(&r.name)).and_then(|d| d.signal.as_deref()) == Some(signal))
    })
}

/// Reopens the forks and loops around `instance` whose rows pass `which`; a loop goes back to the
/// pass `instance` ran in.
fn reopen_ancestors(
    def: &WorkflowDef,
    rows: &[StepView],
    instance: &str,
    which: impl Fn(&StepView) -> bool,
) -> Vec<RowChange> {
    let passes: Vec<u64> = suffix_of(instance).split('#').filter_map(|p| p.parse().ok()).collect();
    let mut loops_seen = 0;
    let mut suffix = String::new();
    let mut out = Vec::new();
    for a in ancestors(&def.steps, base_name(instance)).unwrap_or_default() {
        let name = format!("{}{suffix}", a.name);
        let row = rows.iter().rev().find(|r| r.name == name);
        // A fork_each's passes are suffixed as a loop's; its row keeps its items (in its input).
        let passes_of = matches!(a.kind, StepKind::DoWhile | StepKind::ForkEach);
        let pass = passes_of.then(|| passes.get(loops_seen).copied().unwrap_or(1));
        if let Some(r) = row
            && which(r)
            && matches!(a.kind, StepKind::Fork | StepKind::DoWhile | StepKind::ForkEach)
        {
            let output = match (a.kind, pass) {
                (StepKind::DoWhile, Some(p)) => Some(json!({"iteration": p})),
                (StepKind::ForkEach, _) => None,
                _ => r.output.clone(),
            };
            out.push(RowChange::Reopen { name, output });
        }
        if let Some(p) = pass {
            suffix.push_str(&format!("#{p}"));
            loops_seen += 1;
        }
    }
    out
}

/// The control steps that hold the step named `name`, outermost first; none if it is not nested.
pub fn ancestors<'a>(steps: &'a [StepDef], name: &str) -> Option<Vec<&'a StepDef>> {
    for s in steps {
        if s.name == name || s.compensate.as_ref().is_some_and(|c| c.name == name) {
            return Some(Vec::new());
        }
        for list in s.children() {
            if let Some(mut inner) = ancestors(list, name) {
                inner.insert(0, s);
                return Some(inner);
            }
        }
    }
    None
}
