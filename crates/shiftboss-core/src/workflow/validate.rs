//! Every rule a definition must satisfy before it is registered. Each error names the place in
//! the definition (`steps[1].branches[0][2].timeout`) and what is wrong there.

use super::step::is_dynamic;
use super::{DefinitionError, MAX_DEPTH, MAX_STEP_TIMEOUT, MAX_STEPS, MAX_TASK_TIMEOUT, WorkflowDef, check_name, err};
use super::{StepDef, StepKind};
use crate::expr::{Expr, Template};
use std::collections::HashSet;

/// The most passes a loop may be allowed.
pub const MAX_ITERATIONS_CAP: u32 = 10_000;

struct Checker<'a> {
    names: HashSet<&'a str>,
    count: usize,
}

impl WorkflowDef {
    /// Checks everything a definition must satisfy before it is registered.
    pub fn validate(&self) -> Result<(), DefinitionError> {
        check_name("name", &self.name)?;
        // Retry jobs' workflows are made by the store; a user definition may not take their place.
        if let Some(handler) = crate::jobs::handler_of(&self.name)
            && crate::jobs::definition(handler).as_ref() != Ok(self)
        {
            return Err(err(
                "name",
                format!("names starting with {:?} are kept for retry jobs", crate::jobs::WORKFLOW_PREFIX),
            ));
        }
        if self.version == 0 {
            return Err(err("version", "must be 1 or more"));
        }
        if let Some(p) = &self.retry {
            p.validate().map_err(|e| err("retry", e.to_string()))?;
        }
        if let Some(t) = self.timeout
            && (t.is_zero() || t > MAX_TASK_TIMEOUT)
        {
            return Err(err("timeout", "must be more than 0 and at most 366 days"));
        }
        if let Some(o) = &self.output {
            check_template("output", o)?;
        }
        for (field, v) in [("variables", &self.variables), ("input_defaults", &self.input_defaults)] {
            if v.as_ref().is_some_and(|v| !v.is_object()) {
                return Err(err(field, "must be a JSON object"));
            }
        }
        if let Some(w) = &self.on_failure {
            check_name("on_failure", w)?;
        }
        if self.steps.is_empty() {
            return Err(err("steps", "a workflow needs at least one step"));
        }
        let mut c = Checker { names: HashSet::new(), count: 0 };
        c.list("steps", &self.steps, 0)?;
        // Expressions may read any step of the workflow, or the task.
        let known: HashSet<&str> = c.names.iter().copied().chain(["task"]).collect();
        check_roots(self, &known)
    }
}

impl<'a> Checker<'a> {
    fn list(&mut self, path: &str, steps: &'a [StepDef], depth: usize) -> Result<(), DefinitionError> {
        if depth > MAX_DEPTH {
            return Err(err(path, format!("control steps nest at most {MAX_DEPTH} deep")));
        }
        for (i, s) in steps.iter().enumerate() {
            self.step(&format!("{path}[{i}]"), s, depth)?;
        }
        Ok(())
    }

    fn step(&mut self, at: &str, s: &'a StepDef, depth: usize) -> Result<(), DefinitionError> {
        let f = |field: &str| format!("{at}.{field}");
        self.count += 1;
        if self.count > MAX_STEPS {
            return Err(err(at, format!("a workflow holds at most {MAX_STEPS} steps")));
        }
        check_name(&f("name"), &s.name)?;
        if s.name == "task" {
            return Err(err(f("name"), "\"task\" is the name expressions use for the task itself"));
        }
        if !self.names.insert(s.name.as_str()) {
            return Err(err(f("name"), format!("{:?} is used by another step", s.name)));
        }
        if let Some(field) = misplaced(s).first() {
            return Err(err(f(field), format!("a step of kind {} has no {field}", s.kind.as_str())));
        }
        match s.kind {
            StepKind::Agent => self.agent(at, s)?,
            StepKind::Switch => {
                let e = s.expression.as_deref().ok_or_else(|| err(f("expression"), "a switch needs an expression"))?;
                check_expr(&f("expression"), e)?;
                if s.cases.is_empty() {
                    return Err(err(f("cases"), "a switch needs at least one case"));
                }
                for (value, list) in &s.cases {
                    self.list(&format!("{at}.cases.{value}"), list, depth + 1)?;
                }
                self.list(&f("default"), &s.default, depth + 1)?;
            }
            StepKind::Fork => {
                if s.branches.is_empty() {
                    return Err(err(f("branches"), "a fork needs at least one branch"));
                }
                for (b, list) in s.branches.iter().enumerate() {
                    if list.is_empty() {
                        return Err(err(format!("{at}.branches[{b}]"), "a branch needs at least one step"));
                    }
                    self.list(&format!("{at}.branches[{b}]"), list, depth + 1)?;
                }
                for (j, name) in s.join_on.iter().enumerate() {
                    if !s.branches.iter().any(|b| b.last().is_some_and(|last| &last.name == name)) {
                        return Err(err(
                            format!("{at}.join_on[{j}]"),
                            format!("{name:?} is not the last step of a branch"),
                        ));
                    }
                }
            }
            StepKind::ForkEach => {
                let items = s.items.as_ref().ok_or_else(|| err(f("items"), "a fork_each needs its items"))?;
                check_template(&f("items"), items)?;
                if let Some(k) = &s.key {
                    check_template(&f("key"), &serde_json::Value::String(k.clone()))?;
                }
                if s.body.is_empty() {
                    return Err(err(f("body"), "a fork_each needs at least one step in its body"));
                }
                self.list(&f("body"), &s.body, depth + 1)?;
            }
            StepKind::DoWhile => {
                let c = s.condition.as_deref().ok_or_else(|| err(f("condition"), "a loop needs a condition"))?;
                check_expr(&f("condition"), c)?;
                if s.body.is_empty() {
                    return Err(err(f("body"), "a loop needs at least one step in its body"));
                }
                if let Some(n) = s.max_iterations
                    && !(1..=MAX_ITERATIONS_CAP).contains(&n)
                {
                    return Err(err(f("max_iterations"), format!("must be 1 to {MAX_ITERATIONS_CAP}")));
                }
                self.list(&f("body"), &s.body, depth + 1)?;
            }
            StepKind::SubWorkflow | StepKind::StartWorkflow => {
                let w = s.workflow.as_deref().ok_or_else(|| err(f("workflow"), "the step names its workflow"))?;
                check_name_or_expr(&f("workflow"), w)?;
                if s.workflow_version == Some(0) {
                    return Err(err(f("workflow_version"), "must be 1 or more"));
                }
                if let Some(v) = &s.workflow_version_from {
                    if s.workflow_version.is_some() {
                        return Err(err(f("workflow_version_from"), "a step has workflow_version or this, not both"));
                    }
                    check_template(&f("workflow_version_from"), &serde_json::Value::String(v.clone()))?;
                }
                if let Some(i) = &s.input {
                    check_template(&f("input"), i)?;
                }
            }
            StepKind::Wait => {
                let set = [s.duration.is_some(), s.duration_from.is_some(), s.until.is_some(), s.signal.is_some()];
                if set.iter().filter(|b| **b).count() != 1 {
                    return Err(err(at, "a wait has exactly one of duration, duration_from, until and signal"));
                }
                if let Some(d) = &s.duration_from {
                    check_template(&f("duration_from"), &serde_json::Value::String(d.clone()))?;
                }
                if let Some(d) = s.duration
                    && (d.is_zero() || d > MAX_TASK_TIMEOUT)
                {
                    return Err(err(f("duration"), "must be more than 0 and at most 366 days"));
                }
                if let Some(u) = &s.until {
                    check_template(&f("until"), &serde_json::Value::String(u.clone()))?;
                }
                if let Some(sig) = &s.signal {
                    check_name(&f("signal"), sig)?;
                }
            }
            StepKind::Terminate => {
                if let Some(o) = &s.output {
                    check_template(&f("output"), o)?;
                }
                if let Some(r) = &s.reason {
                    check_template(&f("reason"), &serde_json::Value::String(r.clone()))?;
                }
            }
            StepKind::Set => {
                if let Some(v) = &s.variables {
                    if !v.is_object() {
                        return Err(err(f("variables"), "must be an object of the variables to set"));
                    }
                    check_template(&f("variables"), v)?;
                }
                if let Some(o) = &s.output {
                    check_template(&f("output"), o)?;
                }
            }
        }
        Ok(())
    }

    fn agent(&mut self, at: &str, s: &'a StepDef) -> Result<(), DefinitionError> {
        let f = |field: &str| format!("{at}.{field}");
        let agent = s.agent.as_deref().ok_or_else(|| err(f("agent"), "an agent step names its agent"))?;
        check_name_or_expr(&f("agent"), agent)?;
        if let Some(d) = s.delay
            && d > MAX_TASK_TIMEOUT
        {
            return Err(err(f("delay"), "must be at most 366 days"));
        }
        let timeout = s.timeout();
        if timeout.is_zero() || timeout > MAX_STEP_TIMEOUT {
            return Err(err(f("timeout"), "must be more than 0 and at most 7 days"));
        }
        if let Some(r) = s.response_timeout
            && (r.is_zero() || r > timeout)
        {
            return Err(err(f("response_timeout"), "must be more than 0 and at most the step's timeout"));
        }
        if let Some(c) = s.claim_timeout
            && (c.is_zero() || c > MAX_TASK_TIMEOUT)
        {
            return Err(err(f("claim_timeout"), "must be more than 0 and at most 366 days"));
        }
        if let Some(t) = s.total_timeout
            && (t.is_zero() || t > MAX_TASK_TIMEOUT)
        {
            return Err(err(f("total_timeout"), "must be more than 0 and at most 366 days"));
        }
        if let Some(p) = &s.retry {
            p.validate().map_err(|e| err(f("retry"), e.to_string()))?;
        }
        if let Some(d) = &s.domain {
            check_name(&f("domain"), d)?;
        } else if s.domain_fallback.is_some() {
            return Err(err(f("domain_fallback"), "only a step with a domain falls back"));
        }
        if let Some(i) = &s.input {
            check_template(&f("input"), i)?;
        }
        if let Some(c) = &s.compensate {
            let cat = f("compensate");
            if c.kind != StepKind::Agent {
                return Err(err(format!("{cat}.kind"), "a compensation is an agent step"));
            }
            if c.compensate.is_some() {
                return Err(err(format!("{cat}.compensate"), "a compensation has no compensation of its own"));
            }
            self.count += 1;
            check_name(&format!("{cat}.name"), &c.name)?;
            if !self.names.insert(c.name.as_str()) {
                return Err(err(format!("{cat}.name"), format!("{:?} is used by another step", c.name)));
            }
            if let Some(field) = misplaced(c).first() {
                return Err(err(format!("{cat}.{field}"), format!("an agent step has no {field}")));
            }
            self.agent(&cat, c)?;
        }
        Ok(())
    }
}

/// The fields set on a step that its kind does not use.
fn misplaced(s: &StepDef) -> Vec<&'static str> {
    let set: [(&'static str, bool, &[StepKind]); 31] = {
        use StepKind::*;
        [
            ("agent", s.agent.is_some(), &[Agent]),
            ("config", !s.config.is_null(), &[Agent]),
            ("input", s.input.is_some(), &[Agent, SubWorkflow, StartWorkflow]),
            ("delay", s.delay.is_some(), &[Agent]),
            ("optional", s.optional, &[Agent, SubWorkflow]),
            ("permissive", s.permissive, &[Agent, SubWorkflow]),
            ("timeout", s.timeout.is_some(), &[Agent]),
            ("response_timeout", s.response_timeout.is_some(), &[Agent]),
            ("claim_timeout", s.claim_timeout.is_some(), &[Agent]),
            ("total_timeout", s.total_timeout.is_some(), &[Agent]),
            ("on_timeout", s.on_timeout != Default::default(), &[Agent]),
            ("retry", s.retry.is_some(), &[Agent]),
            ("priority", s.priority != 0, &[Agent]),
            ("domain", s.domain.is_some(), &[Agent]),
            ("domain_fallback", s.domain_fallback.is_some(), &[Agent]),
            ("compensate", s.compensate.is_some(), &[Agent]),
            ("expression", s.expression.is_some(), &[Switch]),
            ("cases", !s.cases.is_empty(), &[Switch]),
            ("default", !s.default.is_empty(), &[Switch]),
            ("branches", !s.branches.is_empty(), &[Fork]),
            ("join_on", !s.join_on.is_empty(), &[Fork]),
            ("condition", s.condition.is_some(), &[DoWhile]),
            ("body", !s.body.is_empty(), &[DoWhile, ForkEach]),
            ("items", s.items.is_some() || s.key.is_some(), &[ForkEach]),
            ("max_iterations", s.max_iterations.is_some(), &[DoWhile]),
            (
                "workflow",
                s.workflow.is_some() || s.workflow_version.is_some() || s.workflow_version_from.is_some(),
                &[SubWorkflow, StartWorkflow],
            ),
            (
                "duration",
                s.duration.is_some() || s.duration_from.is_some() || s.until.is_some() || s.signal.is_some(),
                &[Wait],
            ),
            ("output", s.output.is_some(), &[Terminate, Set]),
            ("status", s.status.is_some(), &[Terminate]),
            ("reason", s.reason.is_some(), &[Terminate]),
            ("variables", s.variables.is_some(), &[Set]),
        ]
    };
    set.into_iter().filter(|(_, present, kinds)| *present && !kinds.contains(&s.kind)).map(|(f, _, _)| f).collect()
}

/// A name, or one `${expression}` that gives the name when the step starts.
fn check_name_or_expr(path: &str, text: &str) -> Result<(), DefinitionError> {
    if !is_dynamic(text) {
        return check_name(path, text);
    }
    let inner = strip_template(text);
    if inner == text.trim() {
        return Err(err(path, format!("{text:?} is neither a name nor one ${{expression}}")));
    }
    check_expr(path, inner)
}

fn check_expr(path: &str, text: &str) -> Result<(), DefinitionError> {
    // A switch expression or a loop condition may be written bare or as one `${...}`.
    Expr::parse(strip_template(text)).map(|_| ()).map_err(|e| err(path, e.to_string()))
}

fn check_template(path: &str, value: &serde_json::Value) -> Result<(), DefinitionError> {
    Template::parse(value).map(|_| ()).map_err(|e| err(path, e.to_string()))
}

/// `${x}` → `x`; anything else unchanged.
pub fn strip_template(text: &str) -> &str {
    let t = text.trim();
    match t.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(inner) if !inner.contains("${") => inner,
        _ => t,
    }
}

/// Every name an expression reads must be `task` or a step of the workflow: a typo is caught
/// when the definition is applied, not when a task reaches the step.
fn check_roots(def: &WorkflowDef, known: &HashSet<&str>) -> Result<(), DefinitionError> {
    let unknown = |path: String, roots: Vec<&str>| -> Result<(), DefinitionError> {
        match roots.into_iter().find(|r| !known.contains(r)) {
            Some(r) => Err(err(path, format!("{r:?} is neither `task` nor a step of this workflow"))),
            None => Ok(()),
        }
    };
    if let Some(o) = &def.output
        && let Ok(t) = Template::parse(o)
    {
        unknown("output".into(), t.roots())?;
    }
    for s in def.all_steps() {
        let at = |field: &str| format!("step {:?}.{field}", s.name);
        for (field, v) in [("input", &s.input), ("output", &s.output), ("variables", &s.variables), ("items", &s.items)]
        {
            if let Some(v) = v
                && let Ok(t) = Template::parse(v)
            {
                unknown(at(field), t.roots())?;
            }
        }
        for (field, e) in [("expression", &s.expression), ("condition", &s.condition)] {
            if let Some(e) = e
                && let Ok(x) = Expr::parse(strip_template(e))
            {
                unknown(at(field), x.roots())?;
            }
        }
        let dynamic = [("agent", &s.agent), ("workflow", &s.workflow)];
        for (field, e) in dynamic.into_iter().filter_map(|(f, e)| Some((f, e.as_deref().filter(|e| is_dynamic(e))?))) {
            if let Ok(x) = Expr::parse(strip_template(e)) {
                unknown(at(field), x.roots())?;
            }
        }
        let texts = [
            ("until", &s.until),
            ("duration_from", &s.duration_from),
            ("reason", &s.reason),
            ("key", &s.key),
            ("workflow_version_from", &s.workflow_version_from),
        ];
        for (field, text) in texts {
            if let Some(text) = text
                && let Ok(t) = Template::parse(&serde_json::Value::String(text.clone()))
            {
                unknown(at(field), t.roots())?;
            }
        }
    }
    Ok(())
}
