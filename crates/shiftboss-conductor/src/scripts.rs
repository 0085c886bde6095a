//! Mapping Conductor's scripted tasks to steps of the `inline` (JavaScript) and `jq` agents that
//! `shiftboss-scripts` provides and `serve` registers: INLINE, LAMBDA, JSON_JQ_TRANSFORM, and the
//! evaluation steps the importer adds for a SWITCH or a DO_WHILE whose JavaScript is more than
//! the forms whose result is the same in our expression language (see `control.rs`).
//!
//! Each step's input is what Conductor binds the script to (`$` in JavaScript, `.` in jq): the
//! task's input parameters, resolved. Its output is Conductor's: `{result}` for INLINE and
//! LAMBDA, `{result, resultList}` for JSON_JQ_TRANSFORM. The script itself is the step's static
//! config: a `${...}` in it is refused, since Conductor would have replaced it with a value
//! before the script ran, which a static script cannot do.

use super::document::{is_empty, opt_str};
use super::expressions::is_root_name;
use super::importer::{Importer, RefInfo};
use super::task_type::Type;
use crate::err;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{DefinitionError, StepDef};

/// The agent that evaluates JavaScript (`shiftboss_scripts::InlineAgent`).
pub const INLINE_AGENT: &str = "inline";
/// The agent that runs jq filters (`shiftboss_scripts::JqAgent`).
pub const JQ_AGENT: &str = "jq";

/// A script or filter of the document: text without `${` (it is static in shiftboss).
fn script_text<'m>(m: &'m Map<String, Value>, key: &str, at: &str) -> Result<&'m str, DefinitionError> {
    let path = format!("{at}.{key}");
    let text = opt_str(m, key, at)?.filter(|s| !s.trim().is_empty()).ok_or_else(|| err(&path, "missing"))?;
    static_script(text, &path)?;
    Ok(text)
}

/// Refuses a `${...}` in a script, which Conductor would replace before the script runs.
fn static_script(text: &str, path: &str) -> Result<(), DefinitionError> {
    if text.replace("$${", "").contains("${") {
        return Err(err(
            path,
            "a `${...}` in a script is not supported: pass the value as an input parameter and read it as `$.name` \
             (`.name` in jq)",
        ));
    }
    Ok(())
}

/// Conductor's LAMBDA runs its script as a function body, so that it may `return`.
pub(super) fn lambda_script(body: &str) -> String {
    // The newline keeps a `//` comment at the body's end from eating the closing brace.
    format!("(function () {{\n{body}\n}})()")
}

impl Importer {
    /// The task's input parameters with their `${...}` rewritten, except the script fields, which
    /// are kept as they are (a script's `$.x` is not one of ours).
    fn script_input(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
        script_keys: &[&str],
    ) -> Result<Value, DefinitionError> {
        let params = match t.get("inputParameters") {
            None | Some(Value::Null) => return Ok(json!({})),
            Some(Value::Object(p)) => p,
            Some(_) => return Err(err(format!("{at}.inputParameters"), "must be an object")),
        };
        let mut out = Map::new();
        for (k, v) in params {
            let value = if script_keys.contains(&k.as_str()) {
                // Already checked to hold no `${`; a `$${` stays what it is in both languages.
                v.clone()
            } else {
                self.template(v, &format!("{at}.inputParameters.{k}"), loops)?
            };
            out.insert(k.clone(), value);
        }
        Ok(Value::Object(out))
    }

    pub(super) fn inline(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(format!("{ppath}.expression"), "an INLINE task needs evaluatorType and expression")),
        };
        let expression = script_text(params, "expression", &ppath)?;
        let script = match opt_str(params, "evaluatorType", &ppath)? {
            Some("javascript" | "graaljs") => expression.to_owned(),
            // `expression` names an input parameter whose value is the result.
            Some("value-param") => {
                if !params.contains_key(expression) {
                    return Err(err(format!("{ppath}.expression"), format!("{expression:?} names no input parameter")));
                }
                format!("$[{}]", json!(expression))
            }
            Some(other) => {
                return Err(err(
                    format!("{ppath}.evaluatorType"),
                    format!("{other:?} is not supported: use javascript, graaljs or value-param"),
                ));
            }
            None => return Err(err(format!("{ppath}.evaluatorType"), "an INLINE task needs an evaluatorType")),
        };
        let input = self.script_input(t, at, loops, &["expression", "evaluatorType"])?;
        Ok(StepDef::agent("", INLINE_AGENT).with_config(json!({"script": script})).with_input(input))
    }

    pub(super) fn lambda(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let in_params =
            t.get("inputParameters").and_then(Value::as_object).filter(|p| p.contains_key("scriptExpression"));
        let body = match in_params {
            Some(p) => script_text(p, "scriptExpression", &ppath)?,
            // Old definitions carry it on the task itself.
            None if t.get("scriptExpression").is_some_and(|v| !is_empty(v)) => script_text(t, "scriptExpression", at)?,
            None => return Err(err(format!("{ppath}.scriptExpression"), "a LAMBDA task needs a scriptExpression")),
        };
        let script = lambda_script(body);
        let input = self.script_input(t, at, loops, &["scriptExpression"])?;
        Ok(StepDef::agent("", INLINE_AGENT).with_config(json!({"script": script})).with_input(input))
    }

    pub(super) fn jq(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => {
                return Err(err(
                    format!("{ppath}.queryExpression"),
                    "a JSON_JQ_TRANSFORM task needs a queryExpression",
                ));
            }
        };
        let filter = script_text(params, "queryExpression", &ppath)?.to_owned();
        let input = self.script_input(t, at, loops, &["queryExpression"])?;
        Ok(StepDef::agent("", JQ_AGENT).with_config(json!({"filter": filter})).with_input(input))
    }

    /// A step name for an evaluation the importer adds for the task `base`: an expression name
    /// (letters, digits, `_`) that no task of the document uses, taken from then on.
    pub(super) fn eval_step_name(&mut self, base: &str, what: &str, loops: &[String]) -> String {
        let mut stem: String =
            base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        if !stem.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            stem.insert_str(0, "t_");
        }
        stem.truncate(80);
        let mut name = format!("{stem}_{what}");
        let mut n = 2;
        while self.refs.contains_key(&name) || !is_root_name(&name) {
            name = format!("{stem}_{what}{n}");
            n += 1;
        }
        self.refs.insert(name.clone(), RefInfo { ty: Type::Inline, loops: loops.to_vec() });
        self.generated.insert(name.clone());
        name
    }

    /// The evaluation step of a SWITCH's JavaScript: the case value, from the switch's inputs.
    pub(super) fn switch_eval_step(
        &mut self,
        t: &Map<String, Value>,
        switch: &str,
        script: &str,
        field_path: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        static_script(script, field_path)?;
        let at = field_path.rsplit_once('.').map_or(field_path, |(a, _)| a).to_owned();
        let input = self.script_input(t, &at, loops, &[])?;
        let name = self.eval_step_name(switch, "case", loops);
        self.note(
            field_path,
            format!(
                "evaluated in JavaScript by the `{INLINE_AGENT}` agent in the step {name:?}, run before the switch"
            ),
        );
        Ok(StepDef::agent(name, INLINE_AGENT).with_config(json!({"script": script})).with_input(input))
    }

    /// The evaluation step of a DO_WHILE's JavaScript condition, run last in each pass. Its `$` is
    /// Conductor's: the loop's input parameters, `$.<loop>.iteration`, and the output of each
    /// task of the loop body under its reference name.
    pub(super) fn condition_eval_step(
        &mut self,
        t: &Map<String, Value>,
        lp: &str,
        script: &str,
        at: &str,
        inner: &[String],
    ) -> Result<StepDef, DefinitionError> {
        static_script(script, &format!("{at}.loopCondition"))?;
        let outer = &inner[..inner.len().saturating_sub(1)];
        let mut input = match self.script_input(t, at, outer, &[])? {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut body: Vec<String> = self
            .refs
            .iter()
            // The tasks of this pass (not those of a loop nested in it, which have an instance per pass of their own).
            .filter(|(name, r)| r.loops == inner && is_root_name(name) && !self.generated.contains(*name))
            .map(|(name, _)| name.clone())
            .collect();
        body.sort();
        if is_root_name(lp) {
            input.insert(lp.to_owned(), json!({"iteration": format!("${{{lp}.output.iteration}}")}));
        }
        for name in body {
            let r = &self.refs[&name];
            // Control tasks have no output to read here.
            if matches!(r.ty, Type::Switch | Type::Fork | Type::Join | Type::DoWhile | Type::Terminate) {
                continue;
            }
            input.insert(name.clone(), Value::String(format!("${{{name}.output}}")));
        }
        let name = self.eval_step_name(lp, "condition", inner);
        self.note(
            format!("{at}.loopCondition"),
            format!(
                "evaluated in JavaScript by the `{INLINE_AGENT}` agent in the step {name:?}, run last in each pass"
            ),
        );
        Ok(StepDef::agent(name, INLINE_AGENT)
            .with_config(json!({"script": script, "as": "bool"}))
            .with_input(Value::Object(input)))
    }
}
