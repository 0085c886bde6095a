//! FORK_JOIN_DYNAMIC and its JOIN: a `fork_each` whose items come from the input.
//!
//! Two forms, as Conductor documents them:
//! - `dynamicForkTasksParam` names the input parameter holding the list of tasks to run (each a
//!   WorkflowTask: `name` the SIMPLE task type, `taskReferenceName`), and
//!   `dynamicForkTasksInputParamName` the one holding each task's input by reference name. The
//!   body's agent is the item's `name`, its input the inputs map at the item's reference name, and
//!   the fork's output is keyed by reference name, as Conductor's JOIN output is.
//! - `forkTaskName` (a task type, or one `${...}`) and `forkTaskInputs` (a list: one task per
//!   element, the element as its input); the output is the list of outputs, in order.

use super::document::{is_empty, opt_str};
use super::importer::Importer;
use crate::err;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{DefinitionError, StepDef, StepKind};

impl Importer {
    pub(super) fn fork_dynamic(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => return Err(err(&ppath, "a FORK_JOIN_DYNAMIC needs inputParameters")),
        };
        let body_name = self.eval_step_name(name, "each", loops);
        let item = |field: &str| format!("{name}.item.{field}");
        let (items, mut body, key) = if let Some(tasks_param) = opt_str(t, "dynamicForkTasksParam", at)? {
            let tpath = format!("{ppath}.{tasks_param}");
            let tasks = self.one_expression(params.get(tasks_param), &tpath, loops)?;
            let ipath = format!("{at}.dynamicForkTasksInputParamName");
            let inputs_param = opt_str(t, "dynamicForkTasksInputParamName", at)?
                .ok_or_else(|| err(&ipath, "names the input parameter holding each task's input"))?;
            let inputs = self.one_expression(params.get(inputs_param), &format!("{ppath}.{inputs_param}"), loops)?;
            let agent = format!("${{{}}}", item("name"));
            let input = format!("${{{inputs}[{}]}}", item("taskReferenceName"));
            let body = StepDef::agent(body_name.as_str(), agent).with_input(json!(input));
            (json!(format!("${{{tasks}}}")), body, Some(format!("${{{}}}", item("taskReferenceName"))))
        } else if let Some(task_name) = params.get("forkTaskName").and_then(Value::as_str) {
            let agent = self.name_or_expr(task_name, &format!("{ppath}.forkTaskName"), loops)?;
            let items = match params.get("forkTaskInputs") {
                Some(v @ Value::Array(_)) => self.template(v, &format!("{ppath}.forkTaskInputs"), loops)?,
                v => json!(format!("${{{}}}", self.one_expression(v, &format!("{ppath}.forkTaskInputs"), loops)?)),
            };
            let body = StepDef::agent(body_name.as_str(), agent).with_input(json!(format!("${{{name}.item}}")));
            (items, body, None)
        } else {
            return Err(err(
                at,
                "a FORK_JOIN_DYNAMIC needs dynamicForkTasksParam (with dynamicForkTasksInputParamName), or \
                 inputParameters.forkTaskName with forkTaskInputs",
            ));
        };
        if t.get("dynamicForkJoinTasksParam").is_some_and(|v| !is_empty(v)) {
            return Err(err(format!("{at}.dynamicForkJoinTasksParam"), "the legacy form is not supported"));
        }
        self.apply_task_def(&mut body, &Map::new(), at, None, loops)?;
        self.note(
            at,
            format!("each item runs as step {body_name:?} of the agent the item names (SIMPLE task types only)"),
        );
        Ok(StepDef { kind: StepKind::ForkEach, items: Some(items), key, body: vec![body], ..StepDef::default() })
    }

    /// The JOIN after a FORK_JOIN_DYNAMIC: it waits for every item (a `joinOn` is noted and
    /// ignored, as Conductor's dynamic JOIN joins the tasks it forked); its output reads as the
    /// fork's.
    pub(super) fn dynamic_join(
        &mut self,
        join: &Map<String, Value>,
        at: &str,
        fork: &str,
    ) -> Result<(), DefinitionError> {
        self.common(join, super::task_type::Type::Join, at)?;
        if join.get("joinOn").is_some_and(|v| !is_empty(v)) {
            self.note(
                format!("{at}.joinOn"),
                "ignored: the JOIN of a FORK_JOIN_DYNAMIC waits for every task it forked",
            );
        }
        if let Some(name) = join.get("taskReferenceName").and_then(Value::as_str) {
            self.by_name.insert(name.to_owned(), at.to_owned());
            self.dynamic_joins.insert(name.to_owned(), fork.to_owned());
        }
        Ok(())
    }

    /// A parameter that must be exactly one `${...}`: our expression text, without `${ }`.
    fn one_expression(&mut self, v: Option<&Value>, path: &str, loops: &[String]) -> Result<String, DefinitionError> {
        let text = v.and_then(Value::as_str).ok_or_else(|| err(path, "must be one ${...} giving the value"))?;
        let ours = self.text(text, path, loops)?;
        let t = ours.trim();
        match t.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
            Some(inner) if !inner.contains("${") => Ok(inner.to_owned()),
            _ => Err(err(path, "must be exactly one ${...}")),
        }
    }
}
