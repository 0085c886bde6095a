//! `shiftboss tasks ...`

use super::json_arg;
use crate::backend::Backend;
use anyhow::bail;
use clap::Subcommand;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{TaskId, TaskState};
use shiftboss_server::wire::{Task, TaskView};
use shiftboss_store::{ListTasks, OperateTask, SubmitTask, TaskCommand, TaskFilter};

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
        /// Print JSON instead of text: the API's task view (GET /v1/tasks/{id}), with every event.
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
        /// Who starts it, for the event log (default: your login name). Not with --server, where
        /// the actor is the token's name.
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
    /// Undo a failed, cancelled or terminated task that was not compensated: the compensations
    /// of its completed steps run, newest first, and it ends compensated.
    Compensate {
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
    /// Who, for the event log (default: your login name). Not with --server, where the actor
    /// is the token's name.
    #[arg(long)]
    actor: Option<String>,
}

impl Who {
    /// The actor as the backend records it, and the reason.
    pub fn into_parts(self, b: &dyn Backend) -> anyhow::Result<(String, String)> {
        Ok((b.actor(self.actor)?, self.reason))
    }
}

impl TasksCommand {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        match self {
            TasksCommand::List { state, workflow, key_prefix, archived, before, limit } => {
                let filter = TaskFilter { state, workflow, key_prefix, ..TaskFilter::default() };
                let p = ListTasks { filter, include_archived: archived, before: before.map(TaskId), limit };
                print_list(&b.list_tasks(p).await?);
            }
            TasksCommand::Show { task, json } => {
                let Some(view) = b.task(&task).await? else { bail!("no task with id or key {task:?}") };
                if json {
                    println!("{}", serde_json::to_string_pretty(&view)?);
                } else {
                    print_detail(&view);
                }
            }
            TasksCommand::Start { workflow, key, input, version, priority, actor } => {
                let input = json_arg::read("--input", &input)?;
                let actor = b.actor(actor)?;
                let s = b
                    .submit_task(SubmitTask {
                        correlation_id: None,
                        notify: None,
                        key,
                        workflow,
                        version,
                        input,
                        priority,
                        actor,
                        domains: Default::default(),
                    })
                    .await?;
                let how = if s.created { "started" } else { "already existed" };
                println!("task {} ({}) {how}", s.id, s.key);
            }
            TasksCommand::Cancel { task, who } => operate(b, &task, who, TaskCommand::Cancel).await?,
            TasksCommand::Pause { task, who } => operate(b, &task, who, TaskCommand::Pause).await?,
            TasksCommand::Resume { task, who } => operate(b, &task, who, TaskCommand::Resume).await?,
            TasksCommand::Terminate { task, who } => operate(b, &task, who, TaskCommand::Terminate).await?,
            TasksCommand::Retry { task, who } => operate(b, &task, who, TaskCommand::Retry).await?,
            TasksCommand::Compensate { task, who } => operate(b, &task, who, TaskCommand::Compensate).await?,
            TasksCommand::Rerun { task, from, who } => {
                operate(b, &task, who, TaskCommand::Rerun { from }).await?;
            }
            TasksCommand::Skip { task, step, output, who } => {
                let output = json_arg::read("--output", &output)?;
                operate(b, &task, who, TaskCommand::Skip { step, output }).await?;
            }
            TasksCommand::Bulk(args) => args.run(b).await?,
            TasksCommand::Signal { task, name, data, who } => {
                let payload = json_arg::read("--data", &data)?;
                operate(b, &task, who, TaskCommand::Signal { name, payload }).await?;
            }
        }
        Ok(())
    }
}

async fn operate(b: &dyn Backend, task: &str, who: Who, command: TaskCommand) -> anyhow::Result<()> {
    let actor = b.actor(who.actor)?;
    let Some(task_id) = b.task_id(task).await? else { bail!("no task with id or key {task:?}") };
    let acted = b.operate(OperateTask { task_id, actor, reason: who.reason, command }).await?;
    println!("task {}: {} done; it is now {}", acted.id, acted.action, acted.state);
    Ok(())
}

fn print_list(tasks: &[Task]) {
    println!("{:>8}  {:<10}  {:<24}  {:<16}  UPDATED", "ID", "STATE", "KEY", "WORKFLOW");
    for t in tasks {
        println!(
            "{:>8}  {:<10}  {:<24}  {:<16}  {}{}",
            t.id,
            t.state,
            t.key,
            format!("{} v{}", t.workflow, t.version),
            t.updated_at,
            if t.archived { "  (archived)" } else { "" }
        );
    }
    if tasks.is_empty() {
        println!("(no tasks)");
    }
}

fn print_detail(v: &TaskView) {
    let t = &v.task;
    if t.archived {
        println!("(archived: read from the history tables)");
    }
    println!("task {} ({}), workflow {} v{}: {}", t.id, t.key, t.workflow, t.version, t.state);
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
    for s in &v.steps {
        let kind = match &s.compensates {
            Some(undone) => format!("undo {undone}"),
            None => s.kind.clone(),
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
    for e in &v.events {
        let step = e.step_id.as_deref().map(|s| format!(" step {s}")).unwrap_or_default();
        let level = if e.level == EventLevel::Alert.as_str() { " ALERT" } else { "" };
        println!("  {}{level} {}{step} by {} {}", e.at, e.kind, e.actor, super::event_text::detail(&e.detail));
    }
}
