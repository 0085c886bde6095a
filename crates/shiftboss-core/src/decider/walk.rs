//! The running phase: walk the definition's steps in order against the task's rows, starting what
//! is due and following control steps into their branches.
//!
//! The walk works on a copy of the rows; every action it decides is applied to the copy at once,
//! so that the rest of the walk sees it (a switch decided now is followed into its case in the
//! same decide, a loop runs its next pass at once).

use super::scope::StepScope;
use super::{Action, ChildTask, MAX_ACTIONS, NewStep, StepView, TaskMove, TaskView};
use crate::expr::{Expr, Template};
use crate::state::StepState;
use crate::time::Timestamp;
use crate::workflow::step::is_dynamic;
use crate::workflow::validate::strip_template;
use crate::workflow::{DEFAULT_MAX_ITERATIONS, EndStatus, MAX_ITEMS, StepDef, StepKind, WorkflowDef, check_name};
use serde_json::{Value, json};
use std::borrow::Cow;

/// How a list of steps (or one step) stands.
pub(super) enum Flow {
    /// Every step has ended well; the value is the last one's output.
    Done(Value),
    /// Something is pending or processing.
    Waiting,
    Failed {
        step: String,
        reason: String,
    },
    /// A step was cancelled from outside.
    Cancelled,
    /// A terminate step ended the task.
    Ended {
        step: String,
        status: EndStatus,
        output: Value,
        /// Why, in the definition's words (its `reason`).
        reason: Option<String>,
    },
}

pub(super) struct Working<'d> {
    pub def: &'d WorkflowDef,
    pub task: TaskView<'d>,
    /// The task's input, with the workflow's input defaults filled in where it has none.
    pub input: Cow<'d, Value>,
    pub rows: Vec<StepView>,
    actions: Vec<Action>,
    /// A branch that a fork does not join is still running: the task cannot end yet.
    background: bool,
    /// The item of each fork_each pass being walked, innermost last.
    items: Vec<(String, Value)>,
}

impl<'d> Working<'d> {
    pub fn new(def: &'d WorkflowDef, task: &TaskView<'d>, steps: &[StepView]) -> Working<'d> {
        let input = match (&def.input_defaults, task.input) {
            (Some(Value::Object(defaults)), Value::Object(given)) => {
                let mut merged = defaults.clone();
                merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
                Cow::Owned(Value::Object(merged))
            }
            (Some(defaults @ Value::Object(_)), Value::Null) => Cow::Owned(defaults.clone()),
            _ => Cow::Borrowed(task.input),
        };
        Working {
            def,
            task: *task,
            input,
            rows: steps.to_vec(),
            actions: Vec::new(),
            background: false,
            items: Vec::new(),
        }
    }

    pub fn into_actions(self) -> Vec<Action> {
        self.actions
    }

    pub fn row(&self, instance: &str) -> Option<&StepView> {
        self.rows.iter().rev().find(|r| r.name == instance)
    }

    pub fn push(&mut self, action: Action) {
        match &action {
            Action::Create(n) => self.rows.push(StepView {
                id: i64::MAX - self.rows.len() as i64,
                name: n.name.clone(),
                kind: n.kind,
                state: n.state,
                input: n.input.clone(),
                output: n.output.clone(),
                last_error: None,
                updated_at: self.task.now,
                compensates: n.compensates.clone(),
            }),
            Action::Update { name, state, output, error } => {
                if let Some(r) = self.rows.iter_mut().rev().find(|r| &r.name == name) {
                    r.state = *state;
                    r.output.clone_from(output);
                    r.last_error.clone_from(error);
                    r.updated_at = self.task.now;
                }
            }
            Action::Cancel { name } => {
                if let Some(r) = self.rows.iter_mut().rev().find(|r| &r.name == name) {
                    r.state = StepState::Cancelled;
                }
            }
        }
        self.actions.push(action);
    }

    pub fn scope<'s>(&'s self, suffix: &'s str) -> StepScope<'s> {
        StepScope { task: &self.task, input: &self.input, steps: &self.rows, def: self.def, suffix, items: &self.items }
    }

    /// The running phase of the whole task.
    pub fn run(&mut self) -> TaskMove {
        let def = self.def;
        match self.seq(&def.steps, "") {
            Flow::Waiting => TaskMove::Stay,
            // Branches no fork joined run on: the task ends once they have.
            Flow::Done(_) if self.background => TaskMove::Stay,
            Flow::Done(_) if self.permissive_failure().is_some() => {
                let (step, reason) = self.permissive_failure().expect("just seen");
                self.failed(step, reason)
            }
            Flow::Done(last) => {
                let output = match &def.output {
                    None => Ok(last),
                    Some(t) => Template::parse(t).and_then(|t| t.render(&self.scope(""))).map_err(|e| e.to_string()),
                };
                self.cancel_live();
                match output {
                    Ok(output) => TaskMove::Complete { output },
                    Err(e) => self.failed("output".into(), format!("the workflow's output: {e}")),
                }
            }
            Flow::Failed { step, reason } => self.failed(step, reason),
            Flow::Cancelled => {
                self.cancel_live();
                TaskMove::Cancelled
            }
            Flow::Ended { step, status, output, reason } => {
                self.cancel_live();
                match status {
                    EndStatus::Completed => TaskMove::Complete { output },
                    EndStatus::Failed => {
                        let reason = reason.unwrap_or_else(|| format!("terminated as failed: {output}"));
                        self.failed(step, reason)
                    }
                }
            }
        }
    }

    /// The first permissive step that failed for good: the task went on past it, and fails now
    /// that nothing is left to run. (Optional wins over permissive: its failure fails nothing.)
    fn permissive_failure(&self) -> Option<(String, String)> {
        self.permissive_failure_in(|_| true)
    }

    /// The same, among the rows `within` accepts.
    fn permissive_failure_in(&self, within: impl Fn(&StepView) -> bool) -> Option<(String, String)> {
        self.rows.iter().find_map(|r| {
            let permissive = r.state == StepState::Error
                && r.compensates.is_none()
                && within(r)
                && self.def.find(super::base_name(&r.name)).is_some_and(|s| s.permissive && !s.optional);
            permissive
                .then(|| (r.name.clone(), r.last_error.clone().unwrap_or_else(|| "a permissive step failed".into())))
        })
    }

    /// A failure for good: compensate when the policy says so and there is something to undo.
    fn failed(&mut self, step: String, reason: String) -> TaskMove {
        self.cancel_live();
        if self.def.compensate_on_failure && self.has_compensations() {
            self.task.state = crate::state::TaskState::Compensating;
            return match self.compensate() {
                TaskMove::Stay => TaskMove::Compensate { step, reason },
                other => other,
            };
        }
        TaskMove::Fail { step, reason }
    }

    /// Cancels every live row: the task ends, and nothing of it may go on running (C1).
    pub fn cancel_live(&mut self) {
        let live: Vec<String> = self.rows.iter().filter(|r| r.is_live()).map(|r| r.name.clone()).collect();
        for name in live {
            self.push(Action::Cancel { name });
        }
    }

    fn budget_left(&self) -> bool {
        self.actions.len() < MAX_ACTIONS
    }

    pub fn seq(&mut self, steps: &'d [StepDef], suffix: &str) -> Flow {
        let mut last = Value::Null;
        for s in steps {
            match self.step(s, suffix) {
                Flow::Done(out) => last = out,
                other => return other,
            }
        }
        Flow::Done(last)
    }

    fn step(&mut self, s: &'d StepDef, suffix: &str) -> Flow {
        if !self.budget_left() {
            return Flow::Failed {
                step: s.name.clone(),
                reason: format!("more than {MAX_ACTIONS} changes in one decide: the definition runs away"),
            };
        }
        let instance = format!("{}{suffix}", s.name);
        let Some(row) = self.row(&instance).cloned() else {
            return self.start(s, suffix, instance);
        };
        match (s.kind, row.state) {
            (StepKind::Switch, StepState::Processed) => self.seq(case_branch(s, Some(&row)), suffix),
            (StepKind::Fork, StepState::Processed) if !s.join_on.is_empty() => {
                // The fork has joined what it waits for; the branches it does not join go on.
                for branch in s.branches.iter().filter(|b| !joined(s, b)) {
                    match self.seq(branch, suffix) {
                        Flow::Done(_) => {}
                        Flow::Waiting => self.background = true,
                        other => return other,
                    }
                }
                Flow::Done(row.output.unwrap_or(Value::Null))
            }
            (StepKind::Fork, StepState::Processing) => self.fork(s, suffix, &instance),
            (StepKind::DoWhile, StepState::Processing) => self.do_while(s, suffix, &instance, &row),
            (StepKind::ForkEach, StepState::Processing) => self.fork_each(s, suffix, &instance, &row),
            (StepKind::Terminate, StepState::Processed) => {
                let recorded = row.output.unwrap_or(Value::Null);
                Flow::Ended {
                    step: instance,
                    status: s.status.unwrap_or_default(),
                    output: recorded.get("output").cloned().unwrap_or(Value::Null),
                    reason: recorded.get("reason").and_then(Value::as_str).map(str::to_owned),
                }
            }
            (StepKind::DoWhile, StepState::Processed) => {
                Flow::Done(row.output.and_then(|o| o.get("output").cloned()).unwrap_or(Value::Null))
            }
            (_, StepState::Processed) => Flow::Done(row.output.unwrap_or(Value::Null)),
            (_, StepState::Pending | StepState::Processing) => Flow::Waiting,
            // An optional step's failure is passed over; a permissive one's too, until the end.
            (_, StepState::Error) if s.optional || s.permissive => Flow::Done(Value::Null),
            (_, StepState::Error) => {
                Flow::Failed { step: instance, reason: row.last_error.unwrap_or_else(|| "the step is in error".into()) }
            }
            (_, StepState::Cancelled) => Flow::Cancelled,
        }
    }

    /// A step reached for the first time.
    fn start(&mut self, s: &'d StepDef, suffix: &str, instance: String) -> Flow {
        let new = |state, input, output| NewStep {
            name: instance.clone(),
            def_name: s.name.clone(),
            kind: s.kind,
            state,
            input,
            output,
            wake_at: None,
            compensates: None,
            child: None,
            agent: None,
        };
        let fail = |what: &str, e: String| Flow::Failed { step: instance.clone(), reason: format!("{what}: {e}") };
        match s.kind {
            StepKind::Agent => {
                let agent = match self.chosen_name(s.agent.as_deref(), suffix) {
                    Ok(a) => a,
                    Err(e) => return fail("agent", e),
                };
                match self.input_of(s, suffix) {
                    Ok(input) => {
                        let mut n = new(StepState::Pending, input, None);
                        n.agent = agent;
                        self.push(Action::Create(n));
                        Flow::Waiting
                    }
                    Err(e) => fail("input", e),
                }
            }
            StepKind::Switch => {
                let text = s.expression.as_deref().unwrap_or("null");
                let value = match Expr::parse(strip_template(text)).and_then(|e| e.eval(&self.scope(suffix))) {
                    Ok(v) => v,
                    Err(e) => return fail("expression", e.to_string()),
                };
                let key = case_key(&value);
                let case = s.cases.contains_key(&key).then_some(key);
                let output = json!({"case": case, "value": value});
                self.push(Action::Create(new(StepState::Processed, Value::Null, Some(output))));
                let branch = case_branch(s, self.row(&instance));
                self.seq(branch, suffix)
            }
            StepKind::Fork => {
                self.push(Action::Create(new(StepState::Processing, Value::Null, None)));
                self.fork(s, suffix, &instance)
            }
            StepKind::ForkEach => {
                let template = s.items.clone().unwrap_or(Value::Null);
                let items = match Template::parse(&template).and_then(|t| t.render(&self.scope(suffix))) {
                    Ok(Value::Array(items)) if items.len() <= MAX_ITEMS => items,
                    Ok(Value::Array(items)) => {
                        return fail("items", format!("{} items; a fork_each takes at most {MAX_ITEMS}", items.len()));
                    }
                    Ok(other) => return fail("items", format!("{template} gave {other}, not a list")),
                    Err(e) => return fail("items", e.to_string()),
                };
                // The row keeps the items: every later decide runs the same passes.
                self.push(Action::Create(new(StepState::Processing, Value::Array(items), None)));
                let row = self.row(&instance).cloned().expect("just created");
                self.fork_each(s, suffix, &instance, &row)
            }
            StepKind::DoWhile => {
                self.push(Action::Create(new(StepState::Processing, Value::Null, Some(json!({"iteration": 1})))));
                let row = self.row(&instance).cloned().expect("just created");
                self.do_while(s, suffix, &instance, &row)
            }
            StepKind::SubWorkflow | StepKind::StartWorkflow => {
                let workflow = match self.chosen_name(s.workflow.as_deref(), suffix) {
                    Ok(w) => w.or_else(|| s.workflow.clone()).unwrap_or_default(),
                    Err(e) => return fail("workflow", e),
                };
                let version = match &s.workflow_version_from {
                    None => s.workflow_version,
                    Some(text) => match self.chosen_version(text, suffix) {
                        Ok(v) => v,
                        Err(e) => return fail("workflow_version_from", e),
                    },
                };
                match self.input_of(s, suffix) {
                    Ok(input) => {
                        let mut n = new(StepState::Processing, input.clone(), None);
                        let detached = s.kind == StepKind::StartWorkflow;
                        n.child = Some(ChildTask { workflow, version, input, detached });
                        self.push(Action::Create(n));
                        Flow::Waiting
                    }
                    Err(e) => fail("input", e),
                }
            }
            StepKind::Set => {
                let render = |t: &Option<Value>| match t {
                    None => Ok(Value::Null),
                    Some(t) => {
                        Template::parse(t).and_then(|t| t.render(&self.scope(suffix))).map_err(|e| e.to_string())
                    }
                };
                let variables = match render(&s.variables) {
                    Ok(v) => v,
                    Err(e) => return fail("variables", e),
                };
                let output = match render(&s.output) {
                    Ok(Value::Null) => json!({}),
                    Ok(o) => o,
                    Err(e) => return fail("output", e),
                };
                // The variables set are the row's input: the scope reads them back from there.
                self.push(Action::Create(new(StepState::Processed, variables, Some(output.clone()))));
                Flow::Done(output)
            }
            StepKind::Wait => {
                let wake_at = if let Some(d) = s.duration {
                    Some(self.task.now.plus(d))
                } else if let Some(d) = &s.duration_from {
                    match self.duration_from(d, suffix) {
                        Ok(d) => Some(self.task.now.plus(d)),
                        Err(e) => return fail("duration_from", e),
                    }
                } else if let Some(u) = &s.until {
                    match self.until(u, suffix) {
                        Ok(t) => Some(t),
                        Err(e) => return fail("until", e),
                    }
                } else {
                    None
                };
                if wake_at.is_some_and(|t| t <= self.task.now) {
                    self.push(Action::Create(new(StepState::Processed, Value::Null, Some(json!({})))));
                    return Flow::Done(json!({}));
                }
                let mut n = new(StepState::Processing, Value::Null, None);
                n.wake_at = wake_at;
                self.push(Action::Create(n));
                Flow::Waiting
            }
            StepKind::Terminate => {
                let output = match &s.output {
                    None => Ok(Value::Null),
                    Some(t) => {
                        Template::parse(t).and_then(|t| t.render(&self.scope(suffix))).map_err(|e| e.to_string())
                    }
                };
                let output = match output {
                    Ok(o) => o,
                    Err(e) => return fail("output", e),
                };
                let reason = match &s.reason {
                    None => None,
                    Some(r) => {
                        match Template::parse(&Value::String(r.clone())).and_then(|t| t.render(&self.scope(suffix))) {
                            Ok(Value::String(r)) => Some(r),
                            Ok(Value::Null) => None,
                            Ok(other) => Some(other.to_string()),
                            Err(e) => return fail("reason", e.to_string()),
                        }
                    }
                };
                let status = s.status.unwrap_or_default();
                let recorded = json!({"status": status, "output": output, "reason": reason});
                self.push(Action::Create(new(StepState::Processed, Value::Null, Some(recorded))));
                Flow::Ended { step: instance, status, output, reason }
            }
        }
    }

    /// A name chosen at run time (an agent, a workflow): `None` when the definition names it
    /// outright, else the expression's value, which must be a name.
    fn chosen_name(&self, field: Option<&str>, suffix: &str) -> Result<Option<String>, String> {
        let Some(text) = field.filter(|t| is_dynamic(t)) else { return Ok(None) };
        let value =
            Expr::parse(strip_template(text)).and_then(|e| e.eval(&self.scope(suffix))).map_err(|e| e.to_string())?;
        let Value::String(name) = value else {
            return Err(format!("{text} gave {value}, not a name"));
        };
        check_name("name", &name).map_err(|e| format!("{text} gave {name:?}: {}", e.problem))?;
        Ok(Some(name))
    }

    /// The input of an agent step or a sub-workflow: its template rendered, else the task's input.
    pub fn input_of(&self, s: &StepDef, suffix: &str) -> Result<Value, String> {
        match &s.input {
            None => Ok(self.input.as_ref().clone()),
            Some(t) => Template::parse(t).and_then(|t| t.render(&self.scope(suffix))).map_err(|e| e.to_string()),
        }
    }

    /// A child's version from its template: a whole number from 1, or such a number as text;
    /// null or empty text for the newest.
    fn chosen_version(&self, text: &str, suffix: &str) -> Result<Option<u32>, String> {
        let v = Template::parse(&Value::String(text.to_owned()))
            .and_then(|t| t.render(&self.scope(suffix)))
            .map_err(|e| e.to_string())?;
        let n = match &v {
            Value::Null => return Ok(None),
            Value::String(s) if s.trim().is_empty() => return Ok(None),
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n.and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1) {
            Some(n) => Ok(Some(n)),
            None => Err(format!("{text} gave {v}, not a version (a whole number from 1)")),
        }
    }

    fn duration_from(&self, text: &str, suffix: &str) -> Result<std::time::Duration, String> {
        let v = Template::parse(&Value::String(text.to_owned()))
            .and_then(|t| t.render(&self.scope(suffix)))
            .map_err(|e| e.to_string())?;
        let d = match &v {
            Value::Number(n) => n
                .as_u64()
                .map(std::time::Duration::from_millis)
                .ok_or_else(|| format!("{v} is not whole milliseconds"))?,
            Value::String(s) => crate::time::parse_duration_words(s)?,
            other => return Err(format!("{other} is neither a duration nor milliseconds")),
        };
        if d > crate::workflow::MAX_TASK_TIMEOUT {
            return Err(format!("{v} is longer than 366 days"));
        }
        Ok(d)
    }

    fn until(&self, text: &str, suffix: &str) -> Result<Timestamp, String> {
        let v = Template::parse(&Value::String(text.to_owned()))
            .and_then(|t| t.render(&self.scope(suffix)))
            .map_err(|e| e.to_string())?;
        match &v {
            Value::Number(n) => n.as_i64().map(Timestamp).ok_or_else(|| format!("{v} is not whole milliseconds")),
            Value::String(s) => humantime::parse_rfc3339_weak(s)
                .map(Timestamp::from_system)
                .map_err(|e| format!("{s:?} is not an RFC 3339 time: {e}")),
            other => Err(format!("{other} is neither a time nor milliseconds")),
        }
    }

    fn fork(&mut self, s: &'d StepDef, suffix: &str, instance: &str) -> Flow {
        let mut outputs = Vec::with_capacity(s.branches.len());
        let mut waiting = false;
        for (i, branch) in s.branches.iter().enumerate() {
            let joined = joined(s, branch);
            match self.seq(branch, suffix) {
                Flow::Done(v) if joined => outputs.push(v),
                Flow::Done(_) => {}
                Flow::Waiting if joined => waiting = true,
                Flow::Waiting => self.background = true,
                flow => return self.branch_ended(instance, flow, format!("branch {i} failed")),
            }
        }
        if waiting {
            return Flow::Waiting;
        }
        // Every branch has ended: a permissive step that failed in one fails the join now.
        let mut inside = Vec::new();
        s.branches.iter().flatten().for_each(|b| b.walk(&mut inside));
        let failed = self.permissive_failure_in(|r| {
            let at = super::suffix_of(&r.name);
            let here = at == suffix || at.strip_prefix(suffix).is_some_and(|deeper| deeper.starts_with('#'));
            here && inside.iter().any(|d| d.name == super::base_name(&r.name))
        });
        if let Some((step, reason)) = failed {
            let error = Some(format!("branch step {step} failed"));
            self.push(Action::Update { name: instance.to_owned(), state: StepState::Error, output: None, error });
            return Flow::Failed { step, reason };
        }
        self.joined(instance, Value::Array(outputs))
    }

    /// A fork (or fork_each) whose branches it waits for have all ended well: done, with `output`.
    fn joined(&mut self, instance: &str, output: Value) -> Flow {
        self.push(Action::Update {
            name: instance.to_owned(),
            state: StepState::Processed,
            output: Some(output.clone()),
            error: None,
        });
        Flow::Done(output)
    }

    /// One branch cannot finish, so neither can its fork (or fork_each): the row ends with it. The
    /// other branches are not walked further, and the task's end cancels their running work (C1).
    fn branch_ended(&mut self, instance: &str, flow: Flow, why: String) -> Flow {
        let (state, error) = match &flow {
            Flow::Cancelled => (StepState::Cancelled, None),
            Flow::Ended { .. } => (StepState::Processed, None),
            _ => (StepState::Error, Some(why)),
        };
        self.push(Action::Update { name: instance.to_owned(), state, output: None, error });
        flow
    }

    /// One pass of the body per item, side by side; the join waits for them all, and a pass that
    /// fails fails the step (the task's end cancels the others' running work, C1).
    fn fork_each(&mut self, s: &'d StepDef, suffix: &str, instance: &str, row: &StepView) -> Flow {
        let items = row.input.as_array().cloned().unwrap_or_default();
        let mut outputs = Vec::with_capacity(items.len());
        let mut keys = Vec::new();
        let mut waiting = false;
        for (i, item) in items.into_iter().enumerate() {
            let inner = format!("{suffix}#{}", i + 1);
            self.items.push((s.name.clone(), item));
            let flow = self.seq(&s.body, &inner);
            let key = match (&flow, &s.key) {
                (Flow::Done(_), Some(k)) => Some(
                    Template::parse(&Value::String(k.clone()))
                        .and_then(|t| t.render(&self.scope(&inner)))
                        .map_err(|e| e.to_string()),
                ),
                _ => None,
            };
            self.items.pop();
            match flow {
                Flow::Done(v) => outputs.push(v),
                Flow::Waiting => waiting = true,
                flow => return self.branch_ended(instance, flow, format!("item {} failed", i + 1)),
            }
            match key {
                Some(Ok(Value::String(k))) => keys.push(k),
                Some(Ok(other)) => keys.push(other.to_string()),
                Some(Err(e)) => return self.each_failed(instance, format!("key: {e}")),
                None => {}
            }
        }
        if waiting {
            return Flow::Waiting;
        }
        let output = if s.key.is_some() {
            Value::Object(keys.into_iter().zip(outputs).collect())
        } else {
            Value::Array(outputs)
        };
        self.joined(instance, output)
    }

    fn each_failed(&mut self, instance: &str, reason: String) -> Flow {
        let error = Some(reason.clone());
        self.push(Action::Update { name: instance.to_owned(), state: StepState::Error, output: None, error });
        Flow::Failed { step: instance.to_owned(), reason }
    }

    fn do_while(&mut self, s: &'d StepDef, suffix: &str, instance: &str, row: &StepView) -> Flow {
        let max = s.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS);
        let mut pass = row.output.as_ref().and_then(|o| o.get("iteration")).and_then(Value::as_u64).unwrap_or(1);
        loop {
            let inner = format!("{suffix}#{pass}");
            let last = match self.seq(&s.body, &inner) {
                Flow::Done(v) => v,
                Flow::Waiting => return Flow::Waiting,
                flow => {
                    if let Flow::Failed { .. } = flow {
                        let output = Some(json!({"iteration": pass}));
                        let error = Some("its body failed".to_owned());
                        self.push(Action::Update { name: instance.to_owned(), state: StepState::Error, output, error });
                    }
                    return flow;
                }
            };
            let text = s.condition.as_deref().unwrap_or("false");
            let again = match Expr::parse(strip_template(text)).and_then(|e| e.eval_bool(&self.scope(&inner))) {
                Ok(b) => b,
                Err(e) => return self.loop_failed(instance, pass, format!("condition: {e}")),
            };
            if !again {
                let output = json!({"iteration": pass, "output": last});
                self.push(Action::Update {
                    name: instance.to_owned(),
                    state: StepState::Processed,
                    output: Some(output),
                    error: None,
                });
                return Flow::Done(last);
            }
            if pass >= u64::from(max) {
                return self.loop_failed(instance, pass, format!("the condition still holds after {max} passes"));
            }
            if !self.budget_left() {
                return self.loop_failed(instance, pass, format!("more than {MAX_ACTIONS} changes in one decide"));
            }
            pass += 1;
            self.push(Action::Update {
                name: instance.to_owned(),
                state: StepState::Processing,
                output: Some(json!({"iteration": pass})),
                error: None,
            });
        }
    }

    fn loop_failed(&mut self, instance: &str, pass: u64, reason: String) -> Flow {
        self.push(Action::Update {
            name: instance.to_owned(),
            state: StepState::Error,
            output: Some(json!({"iteration": pass})),
            error: Some(reason.clone()),
        });
        Flow::Failed { step: instance.to_owned(), reason }
    }
}

/// The case a switch value selects: strings as they are, anything else as JSON text.
fn case_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a fork waits for this branch: every branch, unless `join_on` names some.
fn joined(fork: &StepDef, branch: &[StepDef]) -> bool {
    fork.join_on.is_empty() || branch.last().is_some_and(|last| fork.join_on.contains(&last.name))
}

fn case_branch<'d>(s: &'d StepDef, row: Option<&StepView>) -> &'d [StepDef] {
    let case = row.and_then(|r| r.output.as_ref()).and_then(|o| o.get("case")).and_then(Value::as_str);
    case.and_then(|c| s.cases.get(c)).unwrap_or(&s.default)
}
