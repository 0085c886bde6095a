//! Mapping one task: the checks every task gets, then the task types that become one simple step
//! (SIMPLE, SUB_WORKFLOW, WAIT, TERMINATE); HTTP and the control tasks have files of their own.

use super::document::{is_empty, opt_bool, opt_str, opt_u64};
use super::durations::{parse_duration, parse_until};
use super::importer::Importer;
use super::task_type::Type;
use crate::err;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{DefinitionError, EndStatus, MAX_TASK_TIMEOUT, StepDef, StepKind, check_name};

// Field lists: what the importer reads of every task, and the fields of one task type.
const TASK_READ: &[&str] = &[
    "name",
    "taskReferenceName",
    "type",
    "inputParameters",
    "optional",
    "startDelay",
    "asyncComplete",
    "taskDefinition",
    "retryCount",
    "permissive",
    "onStateChange",
    "cacheConfig",
    "description",
    "rateLimited",
];
/// Fields of one task type (or of types the importer refuses: listed with none).
const TASK_TYPED: &[(&str, &[Type])] = &[
    ("evaluatorType", &[Type::Switch]),
    ("expression", &[Type::Switch]),
    ("caseValueParam", &[Type::Switch]),
    ("caseExpression", &[Type::Switch]),
    ("decisionCases", &[Type::Switch]),
    ("defaultCase", &[Type::Switch]),
    ("forkTasks", &[Type::Fork]),
    ("joinOn", &[Type::Join, Type::ExclusiveJoin]),
    ("loopCondition", &[Type::DoWhile]),
    ("loopOver", &[Type::DoWhile]),
    ("subWorkflowParam", &[Type::SubWorkflow]),
    ("sink", &[Type::Event]),
    ("dynamicTaskNameParam", &[Type::Dynamic]),
    ("dynamicForkTasksParam", &[Type::ForkDynamic]),
    ("dynamicForkTasksInputParamName", &[Type::ForkDynamic]),
    ("dynamicForkJoinTasksParam", &[Type::ForkDynamic]),
    ("defaultExclusiveJoinTask", &[Type::ExclusiveJoin]),
    ("scriptExpression", &[Type::Lambda]),
];

impl Importer {
    /// The checks every task gets: fields of other types, and per-task flags with no equivalent.
    pub(super) fn common(&mut self, t: &Map<String, Value>, ty: Type, at: &str) -> Result<(), DefinitionError> {
        for (k, v) in t {
            let k = k.as_str();
            if TASK_READ.contains(&k) {
                continue;
            }
            match TASK_TYPED.iter().find(|(f, _)| *f == k) {
                Some((_, types)) if types.contains(&ty) => {}
                Some(_) if is_empty(v) => {}
                Some(_) => self.note(format!("{at}.{k}"), format!("ignored: a {} task does not use it", ty.name())),
                None if is_empty(v) => {}
                None => self.note(format!("{at}.{k}"), "ignored: not a task field the importer knows"),
            }
        }
        if opt_bool(t, "asyncComplete", at)? == Some(true) {
            if ty == Type::Simple {
                self.note(format!("{at}.asyncComplete"), "ignored, as Conductor does for SIMPLE tasks");
            } else {
                return Err(err(
                    format!("{at}.asyncComplete"),
                    "a task completed from outside is not supported: use a WAIT (a signal) after it",
                ));
            }
        }
        for (field, why) in [
            ("onStateChange", "shiftboss sends no state-change events"),
            ("cacheConfig", "shiftboss caches no results"),
        ] {
            if t.get(field).is_some_and(|v| !is_empty(v)) {
                self.note(format!("{at}.{field}"), format!("ignored: {why}"));
            }
        }
        if !matches!(ty, Type::Simple | Type::Http | Type::Dynamic | Type::Event) {
            for field in ["retryCount", "taskDefinition"] {
                if t.get(field).is_some_and(|v| !is_empty(v)) {
                    self.note(format!("{at}.{field}"), format!("ignored: a {} task is no agent step", ty.name()));
                }
            }
        }
        Ok(())
    }

    pub(super) fn task(
        &mut self,
        t: &Map<String, Value>,
        ty: Type,
        at: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        self.common(t, ty, at)?;
        let name = opt_str(t, "taskReferenceName", at)?.unwrap_or_default().to_owned();
        self.places.push((ours.to_owned(), at.to_owned()));
        self.by_name.insert(name.clone(), at.to_owned());
        // Nested tasks set their own and give this one back.
        let outer = self.current.replace(name.clone());
        let step = self.task_of(t, ty, at, ours, loops, &name);
        self.current = outer;
        let mut step = step?;
        step.name = name;
        self.flags(&mut step, t, ty, at)?;
        Ok(step)
    }

    /// The step a task of this type maps to (named by the caller).
    fn task_of(
        &mut self,
        t: &Map<String, Value>,
        ty: Type,
        at: &str,
        ours: &str,
        loops: &[String],
        name: &str,
    ) -> Result<StepDef, DefinitionError> {
        Ok(match ty {
            Type::Simple => self.simple(t, at, loops)?,
            Type::Http => self.http(t, at, loops)?,
            Type::Switch => self.switch(t, name, at, ours, loops)?,
            Type::Fork => self.fork(t, at, ours, loops)?,
            Type::DoWhile => self.do_while(t, name, at, ours, loops)?,
            Type::SubWorkflow => self.sub_workflow(t, at, loops)?,
            Type::Wait => self.wait(t, name, at, loops)?,
            Type::Terminate => self.terminate(t, at, loops)?,
            Type::Inline => self.inline(t, at, loops)?,
            Type::Lambda => self.lambda(t, at, loops)?,
            Type::JqTransform => self.jq(t, at, loops)?,
            Type::SetVariable => self.set_variable(t, at, loops)?,
            Type::Noop => self.noop(t, at),
            Type::Human => self.human(t, name, at),
            Type::ExclusiveJoin => self.exclusive_join(t, at, loops)?,
            Type::StartWorkflow => self.start_workflow(t, at, loops)?,
            Type::Dynamic => self.dynamic(t, at, loops)?,
            Type::ForkDynamic => self.fork_dynamic(t, name, at, loops)?,
            Type::Event => self.event(t, at, loops)?,
            Type::Join => unreachable!("a JOIN is handled with its FORK_JOIN"),
        })
    }

    /// `optional`, `permissive` and `startDelay`, on the steps that can take them.
    fn flags(&mut self, step: &mut StepDef, t: &Map<String, Value>, ty: Type, at: &str) -> Result<(), DefinitionError> {
        let fails_alone = matches!(step.kind, StepKind::Agent | StepKind::SubWorkflow);
        for field in ["optional", "permissive"] {
            if opt_bool(t, field, at)? != Some(true) {
                continue;
            }
            if !fails_alone {
                self.note(format!("{at}.{field}"), format!("ignored: a {} task does not fail on its own", ty.name()));
            } else if field == "optional" {
                step.optional = true;
            } else {
                step.permissive = true;
            }
        }
        if step.optional && step.permissive {
            self.note(format!("{at}.permissive"), "ignored: the task is optional, so its failure fails nothing");
            step.permissive = false;
        }
        let delay = opt_u64(t, "startDelay", at)?.unwrap_or(0);
        if delay > 0 {
            if step.kind != StepKind::Agent {
                self.note(format!("{at}.startDelay"), format!("ignored: a {} task is not scheduled", ty.name()));
            } else if delay > MAX_TASK_TIMEOUT.as_secs() {
                return Err(err(format!("{at}.startDelay"), "at most 366 days in shiftboss"));
            } else {
                step.delay = Some(std::time::Duration::from_secs(delay));
            }
        }
        Ok(())
    }

    /// The task's `inputParameters`, rewritten; an object (empty when absent).
    pub(super) fn input_parameters(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<Value, DefinitionError> {
        match t.get("inputParameters") {
            None | Some(Value::Null) => Ok(json!({})),
            Some(v @ Value::Object(_)) => self.template(v, &format!("{at}.inputParameters"), loops),
            Some(_) => Err(err(format!("{at}.inputParameters"), "must be an object")),
        }
    }

    fn simple(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let agent =
            opt_str(t, "name", at)?.ok_or_else(|| err(format!("{at}.name"), "a SIMPLE task names its task type"))?;
        check_name(&format!("{at}.name"), agent)?;
        // Conductor hands a worker exactly the input parameters, `{}` when there are none; without
        // an input template a shiftboss agent would get the task's input instead.
        let mut step = StepDef::agent("", agent).with_input(self.input_parameters(t, at, loops)?);
        self.apply_task_def(&mut step, t, at, Some(agent), loops)?;
        Ok(step)
    }

    fn sub_workflow(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.subWorkflowParam");
        let p = match t.get("subWorkflowParam") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(&ppath, "a SUB_WORKFLOW needs subWorkflowParam")),
        };
        if let Some(doc) = p.get("workflowDefinition").filter(|v| !is_empty(v)) {
            let dpath = format!("{ppath}.workflowDefinition");
            if !doc.is_object() {
                return Err(err(
                    dpath,
                    "an inline definition is a WorkflowDef object (one computed at run time is not supported)",
                ));
            }
            let (name, version) = self.inline_workflow(doc, &dpath)?;
            let mut step = StepDef::sub_workflow("", name);
            step.workflow_version = Some(version);
            step.input = Some(self.input_parameters(t, at, loops)?);
            return Ok(step);
        }
        let name = opt_str(p, "name", &ppath)?.ok_or_else(|| err(format!("{ppath}.name"), "missing"))?;
        // A name may come from an expression, chosen when the step starts (Conductor's dynamic
        // sub-workflow); its version is then the newest registered, unless given outright.
        let name = self.name_or_expr(name, &format!("{ppath}.name"), loops)?;
        let mut step = StepDef::sub_workflow("", name);
        self.child_version(&mut step, p, &ppath, loops)?;
        for (k, v) in p {
            if !matches!(k.as_str(), "name" | "version" | "workflowDefinition") && !is_empty(v) {
                self.note(format!("{ppath}.{k}"), "ignored: shiftboss has no equivalent");
            }
        }
        step.input = Some(self.input_parameters(t, at, loops)?);
        Ok(step)
    }

    /// A SUB_WORKFLOW's or START_WORKFLOW's `version`: a number (0 or none: the newest), or an
    /// expression read when the step starts.
    pub(super) fn child_version(
        &mut self,
        step: &mut StepDef,
        p: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<(), DefinitionError> {
        let path = format!("{at}.version");
        match p.get("version") {
            Some(Value::String(v)) if v.contains("${") => {
                let t = self.template(&Value::String(v.clone()), &path, loops)?;
                step.workflow_version_from = t.as_str().map(str::to_owned);
            }
            _ => {
                if let Some(v) = opt_u64(p, "version", at)?
                    && v > 0
                {
                    step.workflow_version = Some(u32::try_from(v).map_err(|_| err(&path, "too large"))?);
                }
            }
        }
        Ok(())
    }

    fn wait(
        &mut self,
        t: &Map<String, Value>,
        name: &str,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(err(format!("{at}.inputParameters"), "must be an object")),
        };
        let ppath = format!("{at}.inputParameters");
        let duration = params.get("duration").filter(|v| !is_empty(v));
        let until = params.get("until").filter(|v| !is_empty(v));
        let mut step = StepDef { kind: StepKind::Wait, ..StepDef::default() };
        match (duration, until) {
            (Some(_), Some(_)) => return Err(err(ppath, "a WAIT has a duration or an until, not both")),
            (Some(d), None) => {
                let dpath = format!("{ppath}.duration");
                let text = d.as_str().ok_or_else(|| err(&dpath, "must be text such as \"10s\" or \"2 minutes\""))?;
                if text.contains("${") {
                    step.duration_from = Some(self.text(text, &dpath, loops)?);
                    self.note(dpath, "computed at run time: it must give words such as \"10s\" or milliseconds");
                } else {
                    let d = parse_duration(text).map_err(|e| err(&dpath, e))?;
                    if d.is_zero() || d > MAX_TASK_TIMEOUT {
                        return Err(err(dpath, "must be more than 0 and at most 366 days"));
                    }
                    step.duration = Some(d);
                }
            }
            (None, Some(u)) => {
                let upath = format!("{ppath}.until");
                let text = u.as_str().ok_or_else(|| err(&upath, "must be a date and time"))?;
                if text.contains("${") {
                    let v = self.template(&Value::String(text.to_owned()), &upath, loops)?;
                    step.until = v.as_str().map(str::to_owned);
                    self.note(upath, "computed at run time: it must give RFC 3339 text or epoch milliseconds");
                } else {
                    step.until = Some(parse_until(text).map_err(|e| err(&upath, e))?);
                }
            }
            (None, None) => {
                step.signal = Some(name.to_owned());
                self.note(at, format!("waits for the signal {name:?} (send it with `shiftboss tasks signal`)"));
            }
        }
        for k in params.keys().filter(|k| !matches!(k.as_str(), "duration" | "until")) {
            self.note(format!("{ppath}.{k}"), "dropped: a wait has no input in shiftboss");
        }
        Ok(step)
    }

    fn terminate(&mut self, t: &Map<String, Value>, at: &str, loops: &[String]) -> Result<StepDef, DefinitionError> {
        let ppath = format!("{at}.inputParameters");
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(format!("{ppath}.terminationStatus"), "a TERMINATE needs a terminationStatus")),
        };
        let spath = format!("{ppath}.terminationStatus");
        let status = match opt_str(params, "terminationStatus", &ppath)? {
            Some("COMPLETED") => EndStatus::Completed,
            Some("FAILED") => EndStatus::Failed,
            Some(other) => {
                return Err(err(spath, format!("{other:?} is not supported: use COMPLETED or FAILED")));
            }
            None => return Err(err(spath, "a TERMINATE needs a terminationStatus")),
        };
        let output = match params.get("workflowOutput") {
            None | Some(Value::Null) => json!({}),
            Some(o) => self.template(o, &format!("{ppath}.workflowOutput"), loops)?,
        };
        let mut step = StepDef::terminate("", status, output);
        for (k, v) in params {
            match k.as_str() {
                "terminationStatus" | "workflowOutput" => {}
                "terminationReason" if !is_empty(v) => {
                    let rpath = format!("{ppath}.terminationReason");
                    let text = v.as_str().ok_or_else(|| err(&rpath, "must be text"))?;
                    step.reason = Some(self.text(text, &rpath, loops)?);
                }
                _ if is_empty(v) => {}
                _ => self.note(format!("{ppath}.{k}"), "dropped: a terminate step has no input"),
            }
        }
        Ok(step)
    }
}
