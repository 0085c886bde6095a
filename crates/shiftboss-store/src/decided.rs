//! What a store writes for the decider's actions and moves: the new step row's fields, the events,
//! the task's new state. The same in every store, so a backend only runs its SQL (as with `lapse`).

use crate::StoreError;
use crate::advance::TaskRow;
use crate::event_kind as ev;
use serde_json::{Value, json};
use shiftboss_core::decider::{NewStep, TaskMove};
use shiftboss_core::idempotency::step_key;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepState, TaskId, TaskState, Timestamp};

/// The fields of a new step row, besides its task, name, state and bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    /// The agent that runs it; empty for a control step.
    pub agent: String,
    /// When it may be claimed; for a wait, when it ends (a wait for a signal never does by time).
    pub due_at: i64,
    /// Its task's priority plus the step's own: higher is claimed first.
    pub priority: i32,
    /// The step's input, as JSON text.
    pub input: String,
    /// What a step done at once records (a switch's case, a loop's pass), as JSON text.
    pub output: Option<String>,
    /// Sent to the remote service on every attempt (P4); made from the task's key, the step's
    /// instance name and the task's generation (see `shiftboss_core::idempotency`).
    pub idempotency_key: String,
    /// The complete-by window of one claim, in milliseconds.
    pub timeout_ms: i64,
    /// What the agent needs besides the input, as JSON text.
    pub config: String,
    /// The retry policy (the step's, its workflow's or a job's) as JSON text; none: the agent's or the default.
    pub retry: Option<String>,
    /// The step kind's name (`agent`, `switch`, ...).
    pub kind: &'static str,
    /// The isolation domain whose schedulers alone may claim it, until `fallback_at`.
    pub domain: Option<String>,
    /// When any scheduler of the agent may claim it, in milliseconds since the epoch.
    pub fallback_at: Option<i64>,
    /// The window within which the agent must report progress, in milliseconds.
    pub response_timeout_ms: Option<i64>,
    /// The name of its timeout policy (`retry`, `fail_task`, `alert_only`).
    pub on_timeout: &'static str,
    /// How long a due attempt may wait for a claim, in milliseconds, before the supervisor times
    /// it out (by `on_timeout`).
    pub claim_timeout_ms: Option<i64>,
    /// When all its attempts must have ended (its first due time plus its total timeout), in
    /// milliseconds since the epoch: no complete-by runs past it, no retry is due at or after it.
    pub deadline_at: Option<i64>,
}

impl StepRow {
    /// True when the row is an agent step that may be claimed at once (schedulers should wake).
    pub fn due_now(&self, state: StepState, now: Timestamp) -> bool {
        self.kind == StepKind::Agent.as_str() && state == StepState::Pending && self.due_at <= now.0
    }

    /// True when the row is work someone sleeps until: an agent step that will be claimable (now
    /// or at a later due time), or a timed wait the reconciler ends. Its transaction rings the
    /// due-work channel so that sleepers read their next due times again.
    pub fn queues_work(&self, state: StepState) -> bool {
        let agent = self.kind == StepKind::Agent.as_str() && state == StepState::Pending && self.due_at < i64::MAX;
        let wait = self.kind == StepKind::Wait.as_str() && self.due_at < i64::MAX;
        agent || wait
    }
}

/// The row of a step the decider creates, from its definition.
pub fn step_row(def: &WorkflowDef, n: &NewStep, task: &TaskRow, now: Timestamp) -> Result<StepRow, StoreError> {
    let step = def.find(&n.def_name).ok_or_else(|| {
        StoreError::Incompatible(format!("step {} is not in {} v{}", n.def_name, def.name, def.version))
    })?;
    let due_at = match (n.kind, n.wake_at) {
        (StepKind::Wait, Some(at)) => at.0,
        (StepKind::Wait, None) => i64::MAX,
        (StepKind::Agent, _) => step.delay.map_or(now.0, |d| now.plus(d).0),
        _ => now.0,
    };
    // An agent chosen at run time is the decider's; the definition holds its expression.
    let agent = n.agent.clone().unwrap_or_else(|| step.agent_name().to_owned());
    // The definition's domain, else the task's for this agent; an agent step's only.
    let domain = match (&step.domain, n.kind) {
        (Some(d), _) => Some(d.clone()),
        (None, StepKind::Agent) => crate::domain_for(&task.domains, &agent).cloned(),
        (None, _) => None,
    };
    Ok(StepRow {
        agent,
        due_at,
        priority: step.priority_in(task.priority),
        input: n.input.to_string(),
        output: n.output.as_ref().map(Value::to_string),
        idempotency_key: step_key(&task.key, &n.name, task.generation),
        timeout_ms: duration_ms(step.timeout()),
        config: step.config.to_string(),
        retry: def.retry_for(step).map(|p| serde_json::to_string(p).expect("policies serialize")),
        kind: n.kind.as_str(),
        domain,
        fallback_at: step.domain_fallback.map(|d| now.plus(d).0),
        response_timeout_ms: step.response_timeout.map(duration_ms),
        on_timeout: step.on_timeout.as_str(),
        claim_timeout_ms: step.claim_timeout.map(duration_ms),
        deadline_at: step.total_timeout.map(|t| due_at.saturating_add(duration_ms(t))),
    })
}

/// The event of a created step.
pub fn created_event(n: &NewStep) -> (&'static str, Value) {
    match (n.kind, n.state) {
        (StepKind::Agent, _) => (ev::STEP_SCHEDULED, json!({"step": n.name})),
        (StepKind::Switch, _) => (ev::STEP_DECIDED, json!({"step": n.name, "output": n.output})),
        (StepKind::Wait, StepState::Processed) => (ev::WAIT_ENDED, json!({"step": n.name})),
        (_, StepState::Processed) => (ev::STEP_PROCESSED, json!({"step": n.name, "output": n.output})),
        _ => (ev::STEP_STARTED, json!({"step": n.name, "kind": n.kind.as_str()})),
    }
}

/// The event of a control step the decider moved.
pub fn updated_event(
    name: &str,
    state: StepState,
    output: Option<&Value>,
    error: Option<&str>,
) -> (&'static str, EventLevel, Value) {
    let (kind, level) = match state {
        StepState::Error => (ev::STEP_ERROR, EventLevel::Alert),
        StepState::Processed => (ev::STEP_PROCESSED, EventLevel::Info),
        _ => (ev::STEP_STARTED, EventLevel::Info),
    };
    (kind, level, json!({"step": name, "output": output, "error": error}))
}

/// A task's move as the store writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    /// The task's new state.
    pub state: TaskState,
    /// The kind of the event written with the move.
    pub kind: &'static str,
    /// That event's level: a failure or a compensation is an alert.
    pub level: EventLevel,
    /// That event's detail, as JSON.
    pub detail: Value,
    /// The task's output, when it completes.
    pub output: Option<Value>,
}

/// What a move writes; none for `Stay`.
pub fn task_outcome(m: TaskMove) -> Option<TaskOutcome> {
    let o = |state, kind, level, detail| TaskOutcome { state, kind, level, detail, output: None };
    Some(match m {
        TaskMove::Stay => return None,
        TaskMove::Complete { output } => TaskOutcome {
            output: Some(output),
            ..o(TaskState::Completed, ev::TASK_COMPLETED, EventLevel::Info, json!({}))
        },
        TaskMove::Fail { step, reason } => {
            o(TaskState::Failed, ev::TASK_FAILED, EventLevel::Alert, json!({"step": step, "reason": reason}))
        }
        TaskMove::Compensate { step, reason } => o(
            TaskState::Compensating,
            ev::TASK_COMPENSATING,
            EventLevel::Alert,
            json!({"step": step, "reason": reason}),
        ),
        TaskMove::Compensated => o(TaskState::Compensated, ev::TASK_COMPENSATED, EventLevel::Info, json!({})),
        TaskMove::CompensationFailed { step } => {
            o(TaskState::Failed, ev::TASK_COMPENSATION_FAILED, EventLevel::Alert, json!({"step": step}))
        }
        TaskMove::Cancelled => o(TaskState::Cancelled, ev::TASK_CANCELLED, EventLevel::Info, json!({})),
    })
}

/// How a sub-workflow's step ends when its child task ends in `state`: processed with the
/// child's output when it completed, else in Error.
pub fn child_result(child: TaskId, state: TaskState) -> (StepState, Option<String>) {
    match state {
        TaskState::Completed => (StepState::Processed, None),
        other => (StepState::Error, Some(format!("child task {child} ended {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiftboss_core::workflow::StepDef;
    use std::time::Duration;

    fn new_step(name: &str, kind: StepKind, state: StepState) -> NewStep {
        NewStep {
            name: name.into(),
            def_name: name.into(),
            kind,
            state,
            input: json!({"a": 1}),
            output: None,
            wake_at: None,
            compensates: None,
            child: None,
            agent: None,
        }
    }

    #[test]
    fn a_step_row_carries_its_definitions_policies() {
        let mut charge = StepDef::agent("charge", "pay").with_timeout(Duration::from_secs(5));
        charge.priority = 3;
        charge.domain = Some("eu".into());
        charge.domain_fallback = Some(Duration::from_secs(10));
        let def = WorkflowDef::new("w", 1, vec![charge, StepDef::wait_for_signal("hold", "go")]);
        let now = Timestamp(1000);
        let task = TaskRow {
            state: TaskState::Running,
            workflow: "w".into(),
            version: 1,
            input: json!({}),
            key: "order-1".into(),
            priority: 2,
            depth: 0,
            is_child: false,
            generation: 0,
            domains: Default::default(),
            correlation_id: None,
        };
        let row = step_row(&def, &new_step("charge", StepKind::Agent, StepState::Pending), &task, now).unwrap();
        assert_eq!(row.idempotency_key, step_key("order-1", "charge", 0), "made from the work, not drawn");
        let rerun = TaskRow { generation: 1, ..task.clone() };
        let again = step_row(&def, &new_step("charge", StepKind::Agent, StepState::Pending), &rerun, now).unwrap();
        assert_ne!(again.idempotency_key, row.idempotency_key, "a rerun is new work");
        assert_eq!((row.agent.as_str(), row.priority, row.timeout_ms, row.due_at), ("pay", 5, 5000, 1000));
        assert_eq!((row.domain.as_deref(), row.fallback_at), (Some("eu"), Some(11_000)));
        assert!(row.due_now(StepState::Pending, now));
        let task = TaskRow { priority: 0, ..task };
        let hold = step_row(&def, &new_step("hold", StepKind::Wait, StepState::Processing), &task, now).unwrap();
        assert_eq!(hold.due_at, i64::MAX, "a wait for a signal is never due by time");
        assert!(!hold.due_now(StepState::Processing, now));
        assert!(row.queues_work(StepState::Pending), "a new agent step wakes the schedulers");
        assert!(!hold.queues_work(StepState::Processing), "nobody sleeps until a signal");
        // A task's domains place the steps whose definition names none: by agent, else "*".
        let ship = StepDef::agent("ship", "carrier");
        let def = WorkflowDef::new("w", 1, vec![ship, StepDef::agent("note", "mail"), StepDef::agent("pay", "pay")]);
        let domains = [
            ("carrier".to_owned(), "eu-west".to_owned()),
            ("*".to_owned(), "blue".to_owned()),
            ("pay".to_owned(), crate::NO_DOMAIN.to_owned()),
        ];
        let placed = TaskRow { domains: domains.into_iter().collect(), ..task.clone() };
        let at = |name: &str, t: &TaskRow| {
            step_row(&def, &new_step(name, StepKind::Agent, StepState::Pending), t, now).unwrap().domain
        };
        assert_eq!(at("ship", &placed).as_deref(), Some("eu-west"));
        assert_eq!(at("note", &placed).as_deref(), Some("blue"), "\"*\" for the other agents");
        assert_eq!(at("pay", &placed), None, "NO_DOMAIN keeps it out of \"*\"");
        assert_eq!(at("ship", &task), None, "no domains, no domain");
        let later = StepRow { due_at: 5000, ..row.clone() };
        assert!(later.queues_work(StepState::Pending) && !later.due_now(StepState::Pending, now));
        let held = StepRow { due_at: i64::MAX, ..row.clone() };
        assert!(!held.queues_work(StepState::Pending), "a paused task's step waits for its resume");
        let missing = step_row(&def, &new_step("nope", StepKind::Agent, StepState::Pending), &task, now);
        assert!(matches!(missing, Err(StoreError::Incompatible(_))));
    }

    #[test]
    fn moves_map_to_states_and_alerts() {
        assert_eq!(task_outcome(TaskMove::Stay), None);
        let done = task_outcome(TaskMove::Complete { output: json!(1) }).unwrap();
        assert_eq!((done.state, done.output), (TaskState::Completed, Some(json!(1))));
        let failed = task_outcome(TaskMove::CompensationFailed { step: "refund".into() }).unwrap();
        assert_eq!((failed.state, failed.level), (TaskState::Failed, EventLevel::Alert));
        assert_eq!(child_result(TaskId(4), TaskState::Completed), (StepState::Processed, None));
        assert_eq!(child_result(TaskId(4), TaskState::Cancelled).0, StepState::Error);
    }
}
