//! The system tasks that the engine does itself, without an agent: SET_VARIABLE and NOOP (set
//! steps), HUMAN (a wait for a signal), EXCLUSIVE_JOIN (a set step whose output is the joined
//! task's), START_WORKFLOW (a start_workflow step), DYNAMIC (an agent step whose agent is
//! chosen at run time), and EVENT (a step of the [`EVENT_AGENT`], provided by `shiftboss-events`).

/// The agent that publishes EVENT tasks' messages (`shiftboss-events`, registered by `serve`).
pub const EVENT_AGENT: &str = "event";

use super::document::{is_empty, opt_str};
use super::expressions::{Seg, wrap_expr};
use super::importer::Importer;
use crate::err;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{DefinitionError, StepDef, StepKind, check_name};

impl Importer {
    /// SET_VARIABLE: its input parameters are the variables it sets.
    pub(super) fn set_variable(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let vars = self.input_parameters(t, at, loops)?;
        Ok(StepDef::set("", Some(vars), None))
    }

    /// NOOP: a set step that sets nothing; its output is `{}`, as Conductor's.
    pub(super) fn noop(&mut self, t: &Map<String, Value>, at: &str) -> StepDef {
        if t.get("inputParameters").is_some_and(|v| !is_empty(v)) {
            self.note(format!("{at}.inputParameters"), "dropped: a NOOP does nothing with its input");
        }
        StepDef::set("", None, None)
    }

    /// HUMAN: a wait for the signal named after the task reference name; the signal's payload is
    /// the step's output, as the output a person's update gives the task in Conductor.
    pub(super) fn human(&mut self, t: &Map<String, Value>, name: &str, at: &str) -> StepDef {
        if t.get("inputParameters").is_some_and(|v| !is_empty(v)) {
            self.note(format!("{at}.inputParameters"), "dropped: a wait has no input in shiftboss");
        }
        self.note(
            at,
            format!("waits for the signal {name:?} (send it with `shiftboss tasks signal`, or complete the task over the Conductor API)"),
        );
        StepDef { kind: StepKind::Wait, signal: Some(name.to_owned()), ..StepDef::default() }
    }

    /// EXCLUSIVE_JOIN: after a SWITCH, one of `joinOn` ran; the join's output is that task's
    /// output (`defaultExclusiveJoinTask` when none of `joinOn` did).
    pub(super) fn exclusive_join(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let mut refs = self.ref_list(t, "joinOn", at)?;
        if refs.is_empty() {
            return Err(err(format!("{at}.joinOn"), "an EXCLUSIVE_JOIN names the tasks it joins"));
        }
        refs.extend(self.ref_list(t, "defaultExclusiveJoinTask", at)?);
        // The first of them that produced an output: `default(a, default(b, null))`.
        let mut expr = "null".to_owned();
        for r in refs.iter().rev() {
            let read = self.resolve(r, &[Seg::Name("output".into())], loops, &format!("{at}.joinOn"))?;
            expr = format!("default({read}, {expr})");
        }
        Ok(StepDef::set("", None, Some(Value::String(wrap_expr(&expr)))))
    }

    fn ref_list(&self, t: &Map<String, Value>, field: &str, at: &str) -> Result<Vec<String>, DefinitionError> {
        match t.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    v.as_str().map(str::to_owned).ok_or_else(|| err(format!("{at}.{field}[{k}]"), "must be a string"))
                })
                .collect(),
            Some(_) => Err(err(format!("{at}.{field}"), "must be an array of task reference names")),
        }
    }

    /// START_WORKFLOW: `inputParameters.startWorkflow` names the workflow (a name or one
    /// `${...}`), its version and input; the step's output is `{task_id}` (Conductor's
    /// `workflowId`).
    pub(super) fn start_workflow(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let spath = format!("{ppath}.startWorkflow");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(&spath, "a START_WORKFLOW needs inputParameters.startWorkflow")),
        };
        let Some(Value::Object(sw)) = params.get("startWorkflow") else {
            return Err(err(&spath, "a START_WORKFLOW needs inputParameters.startWorkflow, an object"));
        };
        for k in params.keys().filter(|k| k.as_str() != "startWorkflow") {
            self.note(format!("{ppath}.{k}"), "dropped: only startWorkflow is read");
        }
        let name = opt_str(sw, "name", &spath)?.ok_or_else(|| err(format!("{spath}.name"), "missing"))?;
        let workflow = self.name_or_expr(name, &format!("{spath}.name"), loops)?;
        let mut step = StepDef::start_workflow("", workflow);
        self.child_version(&mut step, sw, &spath, loops)?;
        step.input = Some(match sw.get("input") {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => self.template(v, &format!("{spath}.input"), loops)?,
            Some(_) => return Err(err(format!("{spath}.input"), "must be an object")),
        });
        for (k, v) in sw {
            if !matches!(k.as_str(), "name" | "version" | "input") && !is_empty(v) {
                self.note(format!("{spath}.{k}"), "dropped: shiftboss has no equivalent");
            }
        }
        Ok(step)
    }

    /// DYNAMIC: `dynamicTaskNameParam` names the input parameter whose value is the task type to
    /// run; it becomes an agent step whose agent is that value, chosen when the step starts.
    pub(super) fn dynamic(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.dynamicTaskNameParam");
        let param = opt_str(t, "dynamicTaskNameParam", at)?.ok_or_else(|| err(&ppath, "a DYNAMIC task needs one"))?;
        let Some(Value::Object(params)) = t.get("inputParameters") else {
            return Err(err(format!("{at}.inputParameters.{param}"), "names no input parameter"));
        };
        let vpath = format!("{at}.inputParameters.{param}");
        let chosen = params
            .get(param)
            .and_then(Value::as_str)
            .ok_or_else(|| err(&vpath, "the parameter dynamicTaskNameParam names must give the task type, as text"))?;
        let agent = self.name_or_expr(chosen, &vpath, loops)?;
        let mut step = StepDef::agent("", agent).with_input(self.input_parameters(t, at, loops)?);
        self.apply_task_def(&mut step, t, at, None, loops)?;
        self.note(at, "the agent is the task type the input gives when the step starts (SIMPLE task types only)");
        Ok(step)
    }

    /// EVENT: the input parameters are the message; `sink` says where it goes. Conductor's
    /// `nats:` sink maps as it is, `nats_stream:` (NATS Streaming, whose successor is JetStream)
    /// to `jetstream:`; shiftboss's own `jetstream:` and `webhook:` are taken too.
    pub(super) fn event(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let spath = format!("{at}.sink");
        let sink = opt_str(t, "sink", at)?
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| err(&spath, "an EVENT task names its sink"))?;
        if sink.contains("${") {
            return Err(err(spath, "a sink computed at run time is not supported: name it in the definition"));
        }
        let sink = match sink.split_once(':') {
            Some(("nats" | "jetstream" | "webhook", _)) => sink.to_owned(),
            Some(("nats_stream", subject)) => {
                self.note(
                    &spath,
                    "NATS Streaming is retired: the message goes to JetStream (a stream must capture the subject)",
                );
                format!("jetstream:{subject}")
            }
            _ => {
                return Err(err(
                    spath,
                    format!(
                        "the sink {sink:?} is not supported: use nats:<subject>, nats_stream:<subject> (JetStream), or shiftboss's jetstream:<subject> or webhook:<url>"
                    ),
                ));
            }
        };
        let input = self.input_parameters(t, at, loops)?;
        Ok(StepDef::agent("", EVENT_AGENT).with_config(json!({"sink": sink})).with_input(input))
    }

    /// A name given outright, or one `${...}` rewritten to ours.
    pub(super) fn name_or_expr(&mut self, text: &str, path: &str, loops: &[String]) -> Result<String, DefinitionError> {
        if !text.contains("${") {
            check_name(path, text)?;
            return Ok(text.to_owned());
        }
        let ours = self.text(text, path, loops)?;
        let t = ours.trim();
        if !(t.starts_with("${") && t.ends_with('}') && t[2..].find("${").is_none()) {
            return Err(err(path, "must be a name or exactly one ${...}"));
        }
        Ok(t.to_owned())
    }
}
