//! Mapping the control tasks: SWITCH (and DECISION), FORK_JOIN with its JOIN, and DO_WHILE.

use super::document::{is_empty, list_of, opt_str};
use super::expressions::{Seg, parse_ref, string_literal, wrap_expr};
use super::importer::Importer;
use super::javascript::{JsBound, is_bare_param, translate_js};
use super::task_type::Type;
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::validate::MAX_ITERATIONS_CAP;
use shiftboss_core::workflow::{DEFAULT_MAX_ITERATIONS, DefinitionError, StepDef};
use std::collections::BTreeSet;

impl Importer {
    /// Checks a JOIN: it must wait for the last tasks of the branches it joins; the branches it
    /// leaves out (the fork's `join_on` names the others) run on.
    pub(super) fn join(
        &mut self,
        fork: &Map<String, Value>,
        fork_at: &str,
        join: &Map<String, Value>,
        at: &str,
    ) -> Result<Vec<String>, DefinitionError> {
        self.common(join, Type::Join, at)?;
        let mut ends = BTreeSet::new();
        if let Some(Value::Array(branches)) = fork.get("forkTasks") {
            for b in branches {
                if let Some(last) = b.as_array().and_then(|l| l.last()).and_then(|t| t.get("taskReferenceName")) {
                    ends.insert(last.as_str().unwrap_or_default().to_owned());
                }
            }
        }
        let joined: BTreeSet<String> = match join.get("joinOn") {
            None | Some(Value::Null) => BTreeSet::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    v.as_str().map(str::to_owned).ok_or_else(|| err(format!("{at}.joinOn[{k}]"), "must be a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err(format!("{at}.joinOn"), "must be an array of task reference names")),
        };
        // A JOIN on some branches waits for those; the others run on (the fork's `join_on`).
        if joined.is_empty() || !joined.is_subset(&ends) {
            let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            return Err(err(
                format!("{at}.joinOn"),
                format!(
                    "joins [{}] but the branches of {fork_at} end with [{}]: joinOn must name the last task of \
                     each branch it waits for",
                    list(&joined),
                    list(&ends)
                ),
            ));
        }
        for field in ["expression", "evaluatorType"] {
            if join.get(field).is_some_and(|v| !is_empty(v)) {
                return Err(err(format!("{at}.{field}"), "a JOIN with a script is not supported"));
            }
        }
        if let Some(name) = join.get("taskReferenceName").and_then(Value::as_str) {
            self.by_name.insert(name.to_owned(), at.to_owned());
        }
        Ok(if joined == ends { Vec::new() } else { joined.into_iter().collect() })
    }

    /// True when the task is a SWITCH (or DECISION) whose JavaScript gets an evaluation step: the
    /// mapping of a list puts that step before the switch.
    pub(super) fn switch_needs_eval(&self, t: &Map<String, Value>) -> bool {
        let text = if t.get("type").and_then(Value::as_str) == Some("DECISION") {
            if t.get("caseValueParam").is_some_and(|v| !is_empty(v)) {
                return false;
            }
            t.get("caseExpression")
        } else {
            match t.get("evaluatorType").and_then(Value::as_str) {
                Some("javascript" | "graaljs") => t.get("expression"),
                _ => return false,
            }
        };
        text.and_then(Value::as_str).is_some_and(|s| !is_bare_param(s))
    }

    pub(super) fn switch(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let legacy = opt_str(t, "type", at)? == Some("DECISION");
        let (js, field) = if legacy {
            if t.get("caseValueParam").is_some_and(|v| !is_empty(v)) {
                (false, "caseValueParam")
            } else if t.get("caseExpression").is_some_and(|v| !is_empty(v)) {
                (true, "caseExpression")
            } else {
                return Err(err(format!("{at}.caseValueParam"), "a DECISION needs caseValueParam or caseExpression"));
            }
        } else {
            match opt_str(t, "evaluatorType", at)? {
                Some("value-param") => (false, "expression"),
                Some("javascript" | "graaljs") => (true, "expression"),
                Some(other) => {
                    return Err(err(
                        format!("{at}.evaluatorType"),
                        format!("{other:?} is not supported: use value-param, or a simple javascript expression"),
                    ));
                }
                None => return Err(err(format!("{at}.evaluatorType"), "a SWITCH needs an evaluatorType")),
            }
        };
        let fpath = format!("{at}.{field}");
        let text = opt_str(t, field, at)?.ok_or_else(|| err(&fpath, "missing"))?;
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let mut eval_step = None;
        let expression = if js {
            // `$.param` reads the same in both languages; anything else is evaluated in JavaScript.
            let fast = if is_bare_param(text) {
                let mut resolve = |root: &str, segs: &[Seg]| self.param_path(&params, root, segs, at, loops);
                translate_js(text, &mut resolve).ok().map(|out| out.text)
            } else {
                None
            };
            match fast {
                Some(text) => text,
                None => {
                    let eval = self.switch_eval_step(t, name, text, &fpath, loops)?;
                    let read = format!("{}.output.result", eval.name);
                    eval_step = Some(eval);
                    read
                }
            }
        } else {
            if !params.contains_key(text) {
                return Err(err(&fpath, format!("{text:?} names no input parameter of the task")));
            }
            self.param_path(&params, text, &[], at, loops).map_err(|e| err(&fpath, e))?
        };
        let mut step = StepDef::switch("", wrap_expr(&expression));
        match t.get("decisionCases") {
            None | Some(Value::Null) => {}
            Some(Value::Object(cases)) => {
                for (k, list) in cases {
                    let cpath = format!("{at}.decisionCases.{k}");
                    let steps = self.list(list_of(list, &cpath)?, &cpath, &format!("{ours}.cases.{k}"), loops)?;
                    step.cases.insert(k.clone(), steps);
                }
            }
            Some(_) => return Err(err(format!("{at}.decisionCases"), "must be an object of task lists")),
        }
        if step.cases.is_empty() {
            return Err(err(format!("{at}.decisionCases"), "a shiftboss switch needs at least one case"));
        }
        if let Some(list) = t.get("defaultCase").filter(|v| !v.is_null()) {
            let dpath = format!("{at}.defaultCase");
            step.default = self.list(list_of(list, &dpath)?, &dpath, &format!("{ours}.default"), loops)?;
        }
        // Put before the switch by the list being mapped (after the cases, whose own lists take
        // what is queued when they are mapped).
        self.before.extend(eval_step);
        Ok(step)
    }

    /// The expression text for `$.<root><segs>` where `root` is an input parameter of a control
    /// task (a switch's value, a loop's input): the parameter's one reference or literal.
    fn param_path(
        &self,
        params: &Map<String, Value>,
        root: &str,
        segs: &[Seg],
        at: &str,
        loops: &[String],
    ) -> Result<String, String> {
        let Some(v) = params.get(root) else {
            return Err(format!("`$.{root}` names no input parameter of the task"));
        };
        let ppath = format!("{at}.inputParameters.{root}");
        match v {
            Value::String(s) => {
                let trimmed = s.trim();
                if let Some(inner) = trimmed.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                    && !inner.contains("${")
                    && !inner.contains('}')
                {
                    let (r, mut path) = parse_ref(inner).map_err(|e| format!("{ppath}: {e}"))?;
                    path.extend_from_slice(segs);
                    return self.resolve(&r, &path, loops, &ppath).map_err(|e| format!("{}: {}", e.path, e.problem));
                }
                if s.contains("${") {
                    return Err(format!("{ppath}: only a single `${{...}}` or a literal can be used here"));
                }
                if !segs.is_empty() {
                    return Err(format!("{ppath} is a literal; it has no fields"));
                }
                Ok(string_literal(s))
            }
            Value::Number(_) | Value::Bool(_) | Value::Null if segs.is_empty() => Ok(v.to_string()),
            _ => Err(format!("{ppath}: only a single `${{...}}` or a literal can be used here")),
        }
    }

    pub(super) fn fork(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let branches = match t.get("forkTasks") {
            Some(Value::Array(b)) if !b.is_empty() => b,
            _ => return Err(err(format!("{at}.forkTasks"), "a FORK_JOIN needs at least one branch")),
        };
        let mut out = Vec::new();
        for (b, list) in branches.iter().enumerate() {
            let bpath = format!("{at}.forkTasks[{b}]");
            let list = list_of(list, &bpath)?;
            if list.is_empty() {
                return Err(err(bpath, "a branch needs at least one task"));
            }
            out.push(self.list(list, &bpath, &format!("{ours}.branches[{b}]"), loops)?);
        }
        if t.get("inputParameters").is_some_and(|v| !is_empty(v)) {
            self.note(format!("{at}.inputParameters"), "ignored: a fork has no input in shiftboss");
        }
        Ok(StepDef::fork("", out))
    }

    pub(super) fn do_while(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        if params.contains_key("items") {
            return Err(err(format!("{at}.inputParameters.items"), "a DO_WHILE over a list of items is not supported"));
        }
        let body = match t.get("loopOver") {
            Some(Value::Array(b)) if !b.is_empty() => b,
            _ => return Err(err(format!("{at}.loopOver"), "a DO_WHILE needs at least one task in loopOver")),
        };
        let inner: Vec<String> = loops.iter().cloned().chain([name.to_owned()]).collect();
        let body = self.list(body, &format!("{at}.loopOver"), &format!("{ours}.body"), &inner)?;
        let cpath = format!("{at}.loopCondition");
        let text = opt_str(t, "loopCondition", at)?.ok_or_else(|| err(&cpath, "a DO_WHILE needs a loopCondition"))?;
        let mut resolve = |root: &str, segs: &[Seg]| -> Result<String, String> {
            if root == name {
                return match segs {
                    [Seg::Name(f)] if f == "iteration" => Ok(format!("{name}.output.iteration")),
                    _ => Err(format!("only `$.{name}['iteration']` of the loop itself can be read")),
                };
            }
            if self.refs.get(root).is_some_and(|r| r.loops.contains(&name.to_owned())) {
                let mut path = vec![Seg::Name("output".into())];
                path.extend_from_slice(segs);
                return self.resolve(root, &path, &inner, &cpath).map_err(|e| e.problem);
            }
            if params.contains_key(root) {
                return self.param_path(&params, root, segs, at, loops);
            }
            Err(format!("`$.{root}` is neither the loop, a task of its loopOver, nor one of its input parameters"))
        };
        // `$.<loop>['iteration'] < N` (or `<=`) reads the same in both languages, and bounds the
        // loop; any other condition is evaluated in JavaScript by a step run last in each pass.
        let fast =
            translate_js(text, &mut resolve).ok().filter(|out| out.bound.as_ref().is_some_and(|b| b.root == name));
        let mut step = match fast {
            Some(out) => {
                let mut step = StepDef::do_while("", wrap_expr(&out.text), DEFAULT_MAX_ITERATIONS, body);
                if let Some(JsBound { inclusive, n, .. }) = out.bound {
                    let passes = if inclusive { n.saturating_add(1) } else { n }.max(1);
                    if passes > i64::from(MAX_ITERATIONS_CAP) {
                        return Err(err(
                            cpath,
                            format!("more than {} passes: shiftboss caps loops there", MAX_ITERATIONS_CAP),
                        ));
                    }
                    step.max_iterations = Some(passes as u32);
                }
                step
            }
            None => {
                let mut body = body;
                let eval = self.condition_eval_step(t, name, text, at, &inner)?;
                let read = format!("${{{}.output.result}}", eval.name);
                body.push(eval);
                self.note(
                    &cpath,
                    format!(
                        "the loop stops with an error after {} passes in shiftboss (Conductor has no cap): set \
                         max_iterations if it needs more",
                        DEFAULT_MAX_ITERATIONS
                    ),
                );
                StepDef::do_while("", read, DEFAULT_MAX_ITERATIONS, body)
            }
        };
        step.max_iterations = step.max_iterations.or(Some(DEFAULT_MAX_ITERATIONS));
        Ok(step)
    }
}
