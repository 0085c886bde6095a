//! Mapping the control tasks: SWITCH (and DECISION), FORK_JOIN with its JOIN, and DO_WHILE.

use super::document::{is_empty, list_of, opt_str};
use super::expressions::{Seg, parse_ref, string_literal, wrap_expr};
use super::importer::Importer;
use super::javascript::{JsBound, js_note, translate_js};
use super::task_type::Type;
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::validate::MAX_ITERATIONS_CAP;
use shiftboss_core::workflow::{DEFAULT_MAX_ITERATIONS, DefinitionError, StepDef};
use std::collections::BTreeSet;

impl Importer {
    /// Checks a JOIN: it must wait for the last task of every branch, as our fork does.
    pub(super) fn join(
        &mut self,
        fork: &Map<String, Value>,
        fork_at: &str,
        join: &Map<String, Value>,
        at: &str,
    ) -> Result<(), DefinitionError> {
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
        if joined != ends {
            let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            return Err(err(
                format!("{at}.joinOn"),
                format!(
                    "joins [{}] but the branches of {fork_at} end with [{}]: a shiftboss fork joins all its branches, \
                     so joinOn must name the last task of every branch",
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
        Ok(())
    }

    pub(super) fn switch(
        &mut self,
        t: &Map<String, Value>,
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
        let expression = if js {
            let mut resolve = |root: &str, segs: &[Seg]| self.param_path(&params, root, segs, at, loops);
            let out = translate_js(text, &mut resolve).map_err(|e| err(&fpath, e))?;
            if out.js {
                self.note(&fpath, js_note(&out.text));
            }
            out.text
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
        let out = translate_js(text, &mut resolve).map_err(|e| err(&cpath, e))?;
        let mut step = StepDef::do_while("", wrap_expr(&out.text), DEFAULT_MAX_ITERATIONS, body);
        match out.bound {
            Some(JsBound { root, inclusive, n }) if root == name => {
                let passes = if inclusive { n.saturating_add(1) } else { n }.max(1);
                if passes > i64::from(MAX_ITERATIONS_CAP) {
                    return Err(err(
                        cpath,
                        format!("more than {} passes: shiftboss caps loops there", MAX_ITERATIONS_CAP),
                    ));
                }
                step.max_iterations = Some(passes as u32);
            }
            _ => self.note(
                &cpath,
                format!(
                    "the loop stops with an error after {} passes in shiftboss (Conductor has no cap): set \
                     max_iterations if it needs more",
                    DEFAULT_MAX_ITERATIONS
                ),
            ),
        }
        if out.js {
            self.note(&cpath, js_note(&out.text));
        }
        Ok(step)
    }
}
