//! `shiftboss tasks ...`

use crate::target::DbTarget;
use anyhow::bail;
use clap::Subcommand;
use shiftboss_core::{TaskId, TaskState};
use shiftboss_store::{CancelTask, ListTasks, TaskDetail};

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List tasks, newest first.
    List {
        /// Only tasks in this state: running, completed, failed or cancelled.
        #[arg(long)]
        state: Option<TaskState>,
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
    /// Cancel a task: its pending and processing steps are cancelled.
    Cancel {
        id: i64,
        #[arg(long, default_value = "cancelled by an operator")]
        reason: String,
        #[arg(long)]
        actor: Option<String>,
    },
}

impl TasksCommand {
    pub async fn run(self, db: &DbTarget) -> anyhow::Result<()> {
        let store = db.open(false).await?;
        match self {
            TasksCommand::List { state, limit } => {
                let tasks = store.list_tasks(ListTasks { state, limit, ..ListTasks::default() }).await?;
                println!("{:>8}  {:<10}  {:<24}  {:<16}  UPDATED", "ID", "STATE", "KEY", "WORKFLOW");
                for t in &tasks {
                    println!(
                        "{:>8}  {:<10}  {:<24}  {:<16}  {}",
                        t.id,
                        t.state,
                        t.key,
                        format!("{} v{}", t.workflow, t.workflow_version),
                        t.updated_at
                    );
                }
                if tasks.is_empty() {
                    println!("(no tasks)");
                }
            }
            TasksCommand::Show { task, json } => {
                let id = match task.parse::<i64>() {
                    Ok(id) => TaskId(id),
                    Err(_) => match store.find_task_by_key(&task).await? {
                        Some(t) => t.id,
                        None => bail!("no task with id or key {task:?}"),
                    },
                };
                let Some(detail) = store.get_task(id).await? else { bail!("no task with id {id}") };
                if json {
                    println!("{}", serde_json::to_string_pretty(&detail_json(&detail))?);
                } else {
                    print_detail(&detail);
                }
            }
            TasksCommand::Cancel { id, reason, actor } => {
                let actor = actor.unwrap_or_else(super::default_actor);
                store.cancel_task(CancelTask { task_id: TaskId(id), actor, reason }).await?;
                println!("task {id} cancelled");
            }
        }
        Ok(())
    }
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
        "  {:>8}  {:<16}  {:<10}  {:>8}  {:>8}  {:<12}  ERROR",
        "ID", "NAME", "STATE", "ATTEMPTS", "FAILURES", "LOCKED BY"
    );
    for s in &d.steps {
        println!(
            "  {:>8}  {:<16}  {:<10}  {:>8}  {:>8}  {:<12}  {}",
            s.id,
            s.name,
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
        println!("  {}{level} {}{step} by {} {}", e.at, e.kind, e.actor, e.detail);
    }
}
