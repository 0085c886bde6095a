//! `shiftboss tasks ...`

use super::json_arg;
use crate::target::DbTarget;
use anyhow::{Context, bail};
use clap::Subcommand;
use shiftboss_core::{TaskId, TaskState};
use shiftboss_store::{ListTasks, OperateTask, Store, SubmitTask, TaskCommand, TaskDetail, TaskFilter};

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List tasks, newest first.
    List {
        /// Only tasks in this state: running, paused, compensating, completed, failed, cancelled,
        /// compensated or terminated.
        #[arg(long)]
        state: Option<TaskState>,
        /// Only tasks of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// Only tasks whose key starts with this text (case sensitive, no wildcards).
        #[arg(long)]
        key_prefix: Option<String>,
        /// Also tasks the archiver moved to history (marked "archived").
        #[arg(long)]
        archived: bool,
        /// Only tasks with an id below this: the last id of the page before.
        #[arg(long)]
        before: Option<i64>,
        /// At most this many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
    },
    /// Show a task: its steps (states, attempts, failure counts, errors) and its events.
    Show {
        /// The task's id, or its key (such as an order id).
        task: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a task of a registered workflow (the newest version unless --version is given).
    Start {
        workflow: String,
        /// The task's key: submitting the same key again gives back the same task.
        #[arg(long)]
        key: String,
        /// The task's input, a JSON object: the text itself, @FILE, or @- for standard input.
        #[arg(long, default_value = "{}", value_name = "JSON|@FILE|@-")]
        input: String,
        /// The workflow's version to run (default: the newest registered).
        #[arg(long)]
        version: Option<u32>,
        /// The task's priority: among due steps, claims take those of higher priority first (each
        /// step adds its own `priority` from the definition). Negative numbers run after the default.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
        /// Who starts it, for the event log (default: your login name).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Cancel a task: its pending and processing steps are cancelled, and its completed steps
    /// compensated if its workflow says so.
    Cancel {
        /// The task's id or key.
        task: String,
        #[command(flatten)]
        who: Who,
    },
    /// Pause a running task: no new step is scheduled or claimed until it is resumed.
    Pause {
        task: String,
        #[command(flatten)]
        who: Who,
    },
    /// Resume a paused task.
    Resume {
        task: String,
        #[command(flatten)]
        who: Who,
    },
    /// End a task at once, without compensation: its live steps are cancelled.
    Terminate {
        task: String,
        #[command(flatten)]
        who: Who,
    },
    /// Run a failed task's steps in error again (a failed compensation: compensating goes on).
    Retry {
        task: String,
        #[command(flatten)]
        who: Who,
    },
    /// Run a stopped task again from a step: that step and every step started after it run again.
    Rerun {
        task: String,
        /// The step's name as `tasks show` lists it (`charge`, or `charge#2` in a loop's second pass).
        #[arg(long)]
        from: String,
        #[command(flatten)]
        who: Who,
    },
    /// Count a step as done without running it, with the given output.
    Skip {
        task: String,
        step: String,
        /// The step's output, as JSON: the text itself, @FILE, or @- for standard input.
        #[arg(long, default_value = "null", value_name = "JSON|@FILE|@-")]
        output: String,
        #[command(flatten)]
        who: Who,
    },
    /// Send a signal to a task: the wait step of this name, or waiting for a signal of this name, ends.
    Signal {
        task: String,
        name: String,
        /// The signal's payload, as JSON (the text itself, @FILE, or @- for standard input): the
        /// wait step's output.
        #[arg(long, default_value = "{}", value_name = "JSON|@FILE|@-")]
        data: String,
        #[command(flatten)]
        who: Who,
    },
    /// Cancel, retry or resubmit every live task a filter matches (try --dry-run first). Each task
    /// is acted on alone: one whose state forbids the action is listed and the others go on.
    Bulk(super::bulk::BulkArgs),
}

/// Who acts and why, for the event log.
#[derive(Debug, clap::Args)]
pub struct Who {
    /// Why, for the event log.
    #[arg(long, default_value = "by an operator")]
    reason: String,
    /// Who, for the event log (default: your login name).
    #[arg(long)]
    actor: Option<String>,
}

impl Who {
    /// The actor (`--actor`, else the login name) and the reason.
    pub fn into_parts(self) -> (String, String) {
        (self.actor.unwrap_or_else(super::default_actor), self.reason)
    }
}

impl TasksCommand {
    pub async fn run(self, db: &DbTarget) -> anyhow::Result<()> {
        let store = db.open(false).await?;
        match self {
            TasksCommand::List { state, workflow, key_prefix, archived, before, limit } => {
                let filter = TaskFilter { state, workflow, key_prefix, ..TaskFilter::default() };
                let p = ListTasks { filter, include_archived: archived, before: before.map(TaskId), limit };
                let tasks = store.list_tasks(p).await?;
                println!("{:>8}  {:<10}  {:<24}  {:<16}  UPDATED", "ID", "STATE", "KEY", "WORKFLOW");
                for t in &tasks {
                    println!(
                        "{:>8}  {:<10}  {:<24}  {:<16}  {}{}",
                        t.id,
                        t.state,
                        t.key,
                        format!("{} v{}", t.workflow, t.workflow_version),
                        t.updated_at,
                        if t.archived { "  (archived)" } else { "" }
                    );
                }
                if tasks.is_empty() {
                    println!("(no tasks)");
                }
            }
            TasksCommand::Show { task, json } => {
                let (detail, archived) = match resolve(&*store, &task).await {
                    Ok(id) => match store.get_task(id).await? {
                        Some(d) => (d, false),
                        None => (archived_task(&*store, &task).await?, true),
                    },
                    Err(_) => (archived_task(&*store, &task).await?, true),
                };
                if json {
                    let mut v = detail_json(&detail);
                    v["archived"] = archived.into();
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else {
                    if archived {
                        println!("(archived: read from the history tables)");
                    }
                    print_detail(&detail);
                }
            }
            TasksCommand::Start { workflow, key, input, version, priority, actor } => {
                let input = json_arg::read("--input", &input)?;
                let actor = actor.unwrap_or_else(super::default_actor);
                let p = SubmitTask { key: key.clone(), workflow, version, input, priority, actor };
                let s = store.submit_task(p).await?;
                let how = if s.created { "started" } else { "already existed" };
                println!("task {} ({key}) {how}", s.task_id);
            }
            TasksCommand::Cancel { task, who } => operate(&*store, &task, who, TaskCommand::Cancel).await?,
            TasksCommand::Pause { task, who } => operate(&*store, &task, who, TaskCommand::Pause).await?,
            TasksCommand::Resume { task, who } => operate(&*store, &task, who, TaskCommand::Resume).await?,
            TasksCommand::Terminate { task, who } => operate(&*store, &task, who, TaskCommand::Terminate).await?,
            TasksCommand::Retry { task, who } => operate(&*store, &task, who, TaskCommand::Retry).await?,
            TasksCommand::Rerun { task, from, who } => {
                operate(&*store, &task, who, TaskCommand::Rerun { from }).await?;
            }
            TasksCommand::Skip { task, step, output, who } => {
                let output = json_arg::read("--output", &output)?;
                operate(&*store, &task, who, TaskCommand::Skip { step, output }).await?;
            }
            TasksCommand::Bulk(args) => args.run(&*store).await?,
            TasksCommand::Signal { task, name, data, who } => {
                let payload = json_arg::read("--data", &data)?;
                operate(&*store, &task, who, TaskCommand::Signal { name, payload }).await?;
            }
        }
        Ok(())
    }
}

/// A task by id, or by key when the text is not a number.
async fn resolve(store: &dyn Store, task: &str) -> anyhow::Result<TaskId> {
    if let Ok(id) = task.parse::<i64>() {
        return Ok(TaskId(id));
    }
    match store.find_task_by_key(task).await? {
        Some(t) => Ok(t.id),
        None => bail!("no task with id or key {task:?}"),
    }
}

/// A task in history, by id or key.
async fn archived_task(store: &dyn Store, task: &str) -> anyhow::Result<TaskDetail> {
    let id = match task.parse::<i64>() {
        Ok(id) => Some(TaskId(id)),
        Err(_) => store.find_archived_task_by_key(task).await?.map(|t| t.id),
    };
    match id {
        Some(id) => store.get_archived_task(id).await?.with_context(|| format!("no task with id or key {task:?}")),
        None => bail!("no task with id or key {task:?}"),
    }
}

async fn operate(store: &dyn Store, task: &str, who: Who, command: TaskCommand) -> anyhow::Result<()> {
    let task_id = resolve(store, task).await?;
    let what = command.as_str();
    let actor = who.actor.unwrap_or_else(super::default_actor);
    store.operate_task(OperateTask { task_id, actor, reason: who.reason, command }).await?;
    let state = store.get_task(task_id).await?.map(|d| d.task.state.to_string()).unwrap_or_default();
    println!("task {task_id}: {what} done; it is now {state}");
    Ok(())
}

fn detail_json(d: &TaskDetail) -> serde_json::Value {
    serde_json::json!({"task": d.task, "steps": d.steps, "events": d.events})
}

fn print_detail(d: &TaskDetail) {
    let t = &d.task;
    println!("task {} ({}), workflow {} v{}: {}", t.id, t.key, t.workflow, t.workflow_version, t.state);
    println!("  created {}, updated {}", t.created_at, t.updated_at);
    println!("  input  {}", t.input);
    if let Some(o) = &t.output {
        println!("  output {o}");
    }
    println!("steps:");
    println!(
        "  {:>8}  {:<16}  {:<12}  {:<10}  {:>8}  {:>8}  {:<12}  ERROR",
        "ID", "NAME", "KIND", "STATE", "ATTEMPTS", "FAILURES", "LOCKED BY"
    );
    for s in &d.steps {
        let kind = match &s.compensates {
            Some(undone) => format!("undo {undone}"),
            None => s.kind.as_str().to_owned(),
        };
        println!(
            "  {:>8}  {:<16}  {:<12}  {:<10}  {:>8}  {:>8}  {:<12}  {}",
            s.id,
            s.name,
            kind,
            s.state,
            s.attempts,
            s.failure_count,
            s.locked_by.as_deref().unwrap_or("-"),
            s.last_error.as_deref().unwrap_or("")
        );
    }
    println!("events:");
    for e in &d.events {
        let step = e.step_id.map(|s| format!(" step {s}")).unwrap_or_default();
        let level = if e.level == shiftboss_core::model::EventLevel::Alert { " ALERT" } else { "" };
        println!("  {}{level} {}{step} by {} {}", e.at, e.kind, e.actor, super::event_text::detail(&e.detail));
    }
}
