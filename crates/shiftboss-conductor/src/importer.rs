//! The importer's state, and the walk over the WorkflowDef: its own fields, every task reference
//! name (first), then the task lists.

use super::document::{is_empty, list_of, opt_str, opt_u64};
use super::task_type::Type;
use super::{AgentLimits, ConductorImport};
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::{DefinitionError, MAX_TASK_TIMEOUT, StepDef, WorkflowDef, check_name};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// What the importer knows of a task reference name before it maps any task.
#[derive(Debug, Clone)]
pub(super) struct RefInfo {
    pub(super) ty: Type,
    /// The DO_WHILE loops the task runs in, outermost first.
    pub(super) loops: Vec<String>,
}

pub(super) struct TaskDefIn {
    pub(super) path: String,
    pub(super) def: Map<String, Value>,
    pub(super) used: bool,
}

pub(super) struct Importer {
    pub(super) defs: Vec<TaskDefIn>,
    pub(super) def_index: HashMap<String, usize>,
    pub(super) refs: HashMap<String, RefInfo>,
    notes: Vec<String>,
    pub(super) limits: Vec<AgentLimits>,
    /// Our path of each step made, with the Conductor path of its task: validation errors are
    /// reported at the Conductor place.
    pub(super) places: Vec<(String, String)>,
    /// The Conductor path of each step by name.
    pub(super) by_name: HashMap<String, String>,
    /// Task names already noted as having no TaskDef.
    pub(super) missing_defs: BTreeSet<String>,
    /// The names of the evaluation steps the importer added (not tasks of the document).
    pub(super) generated: BTreeSet<String>,
    /// Steps to put before the next step of the list being mapped (a SWITCH's evaluation).
    pub(super) before: Vec<StepDef>,
    /// The JOIN of each FORK_JOIN_DYNAMIC, by reference name, with the fork's: its output is the
    /// fork_each's.
    pub(super) dynamic_joins: HashMap<String, String>,
    /// The definitions given inline in SUB_WORKFLOW tasks (theirs first).
    pub(super) sub_workflows: Vec<WorkflowDef>,
    /// The reference name of the task being mapped: `${CPEWF_TASK_ID}` names it.
    pub(super) current: Option<String>,
}

/// The most definitions one document may give inline: each is a workflow to register.
const MAX_INLINE_WORKFLOWS: usize = 64;

// Field lists: what the importer reads, what it ignores knowingly, what it notes when set.
const WF_READ: &[&str] = &[
    "name",
    "version",
    "description",
    "tasks",
    "timeoutSeconds",
    "timeoutPolicy",
    "outputParameters",
    "failureWorkflow",
    "variables",
    "inputTemplate",
];
const WF_IGNORED: &[&str] = &[
    "ownerEmail",
    "schemaVersion",
    "inputParameters",
    "createTime",
    "updateTime",
    "createdBy",
    "updatedBy",
    "ownerApp",
    "accessPolicy",
    "tags",
];
const WF_NOTED: &[&str] = &[
    "restartable",
    "workflowStatusListenerEnabled",
    "workflowStatusListenerSink",
    "rateLimitConfig",
    "inputSchema",
    "outputSchema",
    "enforceSchema",
];

impl Importer {
    pub(super) fn new(defs: Vec<Value>) -> Result<Importer, DefinitionError> {
        let mut me = Importer {
            defs: Vec::new(),
            def_index: HashMap::new(),
            refs: HashMap::new(),
            notes: Vec::new(),
            limits: Vec::new(),
            places: Vec::new(),
            by_name: HashMap::new(),
            missing_defs: BTreeSet::new(),
            generated: BTreeSet::new(),
            before: Vec::new(),
            dynamic_joins: HashMap::new(),
            sub_workflows: Vec::new(),
            current: None,
        };
        for (n, d) in defs.into_iter().enumerate() {
            let path = format!("taskDefs[{n}]");
            let Value::Object(def) = d else {
                return Err(err(path, "a TaskDef is a JSON object"));
            };
            let name = opt_str(&def, "name", &path)?
                .ok_or_else(|| err(format!("{path}.name"), "a TaskDef needs a name"))?
                .to_owned();
            if me.def_index.insert(name.clone(), me.defs.len()).is_some() {
                return Err(err(format!("{path}.name"), format!("another TaskDef is also named {name:?}")));
            }
            me.defs.push(TaskDefIn { path, def, used: false });
        }
        Ok(me)
    }

    pub(super) fn note(&mut self, at: impl AsRef<str>, text: impl AsRef<str>) {
        self.notes.push(format!("{}: {}", at.as_ref(), text.as_ref()));
    }

    pub(super) fn workflow(mut self, wf: &Value) -> Result<ConductorImport, DefinitionError> {
        let def = self.define(wf)?;
        let unused: Vec<(String, String)> = self
            .defs
            .iter()
            .filter(|d| !d.used)
            .map(|d| (d.path.clone(), d.def.get("name").and_then(Value::as_str).unwrap_or("").to_owned()))
            .collect();
        for (path, name) in unused {
            self.note(path, format!("the TaskDef {name:?} is used by no task of this workflow"));
        }
        Ok(ConductorImport { workflow: def, sub_workflows: self.sub_workflows, limits: self.limits, notes: self.notes })
    }

    /// A sub-workflow's definition given inline (`subWorkflowParam.workflowDefinition`), imported
    /// with the same TaskDefs; errors and notes at its place in this document. Its definition (and
    /// any inline in it) is registered before this one. Its name and version.
    pub(super) fn inline_workflow(&mut self, doc: &Value, at: &str) -> Result<(String, u32), DefinitionError> {
        let mut child = Importer::new(self.defs.iter().map(|d| Value::Object(d.def.clone())).collect())?;
        let def = child.define(doc).map_err(|e| err(format!("{at}.{}", e.path), e.problem))?;
        for (mine, theirs) in self.defs.iter_mut().zip(&child.defs) {
            mine.used |= theirs.used;
        }
        self.notes.extend(child.notes.into_iter().map(|n| format!("{at}.{n}")));
        self.limits.extend(child.limits);
        if self.sub_workflows.len() + child.sub_workflows.len() >= MAX_INLINE_WORKFLOWS {
            return Err(err(at, format!("at most {MAX_INLINE_WORKFLOWS} workflows may be given inline")));
        }
        self.sub_workflows.extend(child.sub_workflows);
        let named = (def.name.clone(), def.version);
        self.sub_workflows.push(def);
        Ok(named)
    }

    /// Reads a WorkflowDef into ours, checked.
    fn define(&mut self, wf: &Value) -> Result<WorkflowDef, DefinitionError> {
        let m = wf.as_object().ok_or_else(|| err("document", "a Conductor WorkflowDef is a JSON object"))?;
        for (k, v) in m {
            let k = k.as_str();
            if WF_READ.contains(&k) || WF_IGNORED.contains(&k) {
                continue;
            }
            let set = match k {
                "restartable" => v == &Value::Bool(false),
                _ => !is_empty(v),
            };
            if set {
                if k == "restartable" {
                    self.note(k, "ignored: shiftboss operators can always rerun a task");
                } else if WF_NOTED.contains(&k) {
                    self.note(k, "ignored: shiftboss has no equivalent");
                } else {
                    self.note(k, "ignored: not a WorkflowDef field the importer knows");
                }
            }
        }
        let name = opt_str(m, "name", "")?.ok_or_else(|| err("name", "a workflow needs a name"))?;
        check_name("name", name)?;
        let version = match opt_u64(m, "version", "")? {
            None => 1,
            Some(v) => u32::try_from(v).map_err(|_| err("version", "too large"))?,
        };
        let tasks = match m.get("tasks") {
            Some(Value::Array(t)) if !t.is_empty() => t,
            Some(Value::Array(_)) => return Err(err("tasks", "a workflow needs at least one task")),
            Some(_) => return Err(err("tasks", "must be an array of tasks")),
            None => return Err(err("tasks", "a workflow needs tasks")),
        };
        self.scan(tasks, "tasks", &[])?;
        let steps = self.list(tasks, "tasks", "steps", &[])?;
        let mut def = WorkflowDef::new(name, version, steps);
        def.description = opt_str(m, "description", "")?.filter(|d| !d.is_empty()).map(str::to_owned);
        if let Some(f) = opt_str(m, "failureWorkflow", "")?.map(str::trim).filter(|f| !f.is_empty()) {
            check_name("failureWorkflow", f)?;
            def.on_failure = Some(f.to_owned());
        }
        for (field, slot) in [("variables", &mut def.variables), ("inputTemplate", &mut def.input_defaults)] {
            match m.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Object(o)) if o.is_empty() => {}
                Some(v @ Value::Object(_)) => *slot = Some(v.clone()),
                Some(_) => return Err(err(field, "must be an object")),
            }
        }
        let timeout = opt_u64(m, "timeoutSeconds", "")?.unwrap_or(0);
        if timeout > 0 {
            let t = Duration::from_secs(timeout);
            if t > MAX_TASK_TIMEOUT {
                return Err(err("timeoutSeconds", "at most 366 days in shiftboss"));
            }
            def.timeout = Some(t);
        }
        match opt_str(m, "timeoutPolicy", "")?.unwrap_or("TIME_OUT_WF") {
            "TIME_OUT_WF" => {}
            "ALERT_ONLY" => {
                if def.timeout.take().is_some() {
                    self.note(
                        "timeoutPolicy",
                        "ALERT_ONLY: shiftboss fails a task past its timeout and cannot only alert, so the workflow's \
                         timeout was dropped",
                    );
                }
            }
            other => return Err(err("timeoutPolicy", format!("{other:?} is neither TIME_OUT_WF nor ALERT_ONLY"))),
        }
        match m.get("outputParameters") {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) if o.is_empty() => {}
            Some(o @ Value::Object(_)) => def.output = Some(self.template(o, "outputParameters", &[])?),
            Some(_) => return Err(err("outputParameters", "must be an object")),
        }
        def.validate().map_err(|e| self.relocate(e))?;
        Ok(def)
    }

    /// Records every task reference name (type and enclosing loops) before any task is mapped, so
    /// that expressions can be checked wherever they read.
    fn scan(&mut self, tasks: &[Value], path: &str, loops: &[String]) -> Result<(), DefinitionError> {
        for (i, t) in tasks.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let t = t.as_object().ok_or_else(|| err(&at, "a task is a JSON object"))?;
            let ty = Type::parse(&at, t)?;
            let rpath = format!("{at}.taskReferenceName");
            let name = opt_str(t, "taskReferenceName", &at)?.ok_or_else(|| err(&rpath, "a task needs one"))?;
            check_name(&rpath, name)?;
            if name == "task" {
                return Err(err(rpath, "\"task\" is the root of the task in shiftboss expressions: rename the task"));
            }
            if self.refs.insert(name.to_owned(), RefInfo { ty, loops: loops.to_vec() }).is_some() {
                return Err(err(rpath, format!("{name:?} is used by another task")));
            }
            match ty {
                Type::Switch => {
                    if let Some(Value::Object(cases)) = t.get("decisionCases") {
                        for (k, list) in cases {
                            self.scan(
                                list_of(list, &format!("{at}.decisionCases.{k}"))?,
                                &format!("{at}.decisionCases.{k}"),
                                loops,
                            )?;
                        }
                    }
                    if let Some(list) = t.get("defaultCase").filter(|v| !v.is_null()) {
                        self.scan(list_of(list, &format!("{at}.defaultCase"))?, &format!("{at}.defaultCase"), loops)?;
                    }
                }
                Type::Fork => {
                    if let Some(Value::Array(branches)) = t.get("forkTasks") {
                        for (b, list) in branches.iter().enumerate() {
                            let bpath = format!("{at}.forkTasks[{b}]");
                            self.scan(list_of(list, &bpath)?, &bpath, loops)?;
                        }
                    }
                }
                Type::DoWhile => {
                    if let Some(list) = t.get("loopOver").filter(|v| !v.is_null()) {
                        let inner: Vec<String> = loops.iter().cloned().chain([name.to_owned()]).collect();
                        self.scan(list_of(list, &format!("{at}.loopOver"))?, &format!("{at}.loopOver"), &inner)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Maps a list of tasks; a FORK_JOIN takes the JOIN after it along.
    pub(super) fn list(
        &mut self,
        tasks: &[Value],
        path: &str,
        ours: &str,
        loops: &[String],
    ) -> Result<Vec<StepDef>, DefinitionError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < tasks.len() {
            let at = format!("{path}[{i}]");
            let t = tasks[i].as_object().ok_or_else(|| err(&at, "a task is a JSON object"))?;
            let ty = Type::parse(&at, t)?;
            let our_at = format!("{ours}[{}]", out.len());
            match ty {
                Type::Join => {
                    return Err(err(format!("{at}.type"), "a JOIN must come right after its FORK_JOIN"));
                }
                Type::Fork | Type::ForkDynamic => {
                    let mut step = self.task(t, ty, &at, &our_at, loops)?;
                    let join_at = format!("{path}[{}]", i + 1);
                    let join = tasks.get(i + 1).and_then(Value::as_object);
                    let join = match join {
                        Some(j) if Type::parse(&join_at, j)? == Type::Join => j,
                        _ => return Err(err(&at, format!("a {} must be followed by its JOIN", ty.name()))),
                    };
                    if ty == Type::Fork {
                        step.join_on = self.join(t, &at, join, &join_at)?;
                    } else {
                        self.dynamic_join(join, &join_at, &step.name)?;
                    }
                    out.push(step);
                    i += 2;
                }
                _ => {
                    // A SWITCH evaluated in JavaScript is preceded by its evaluation step.
                    let our_at = if ty == Type::Switch && self.switch_needs_eval(t) {
                        format!("{ours}[{}]", out.len() + 1)
                    } else {
                        our_at
                    };
                    let step = self.task(t, ty, &at, &our_at, loops)?;
                    out.append(&mut self.before);
                    out.push(step);
                    i += 1;
                }
            }
        }
        Ok(out)
    }
}
