//! `shiftboss tasks bulk ...`: cancel, retry or resubmit every live task a filter matches, after
//! a dry run that counts them. Each task is acted on alone; refusals are listed, not fatal.

use super::jobs::parse_time;
use super::tasks::Who;
use crate::backend::Backend;
use clap::ValueEnum;
use shiftboss_core::{TaskState, Timestamp};
use shiftboss_store::{BulkCommand, BulkOperate, MAX_BULK_TASKS, TaskFilter};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BulkAction {
    /// Cancel each task (its completed steps compensated if its workflow says so).
    Cancel,
    /// Retry each failed task: its steps in error run again.
    Retry,
    /// Resubmit each task's steps in error, with their failure counts reset.
    Resubmit,
}

#[derive(Debug, clap::Args)]
pub struct BulkArgs {
    /// What to do to each matched task.
    action: BulkAction,
    #[command(flatten)]
    filter: FilterArgs,
    /// Only count the tasks that match; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// At most this many tasks, oldest first [default: 10000 on the store; with --server the
    /// API's most, 1000].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_BULK_TASKS)))]
    limit: Option<u32>,
    #[command(flatten)]
    who: Who,
}

/// Which tasks: every filter given must match.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// Only tasks in this state.
    #[arg(long)]
    state: Option<TaskState>,
    /// Only tasks of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only tasks whose key starts with this text (case sensitive, no wildcards).
    #[arg(long)]
    key_prefix: Option<String>,
    /// Submitted at or after this: an RFC 3339 time, or a duration ago (`2h`).
    #[arg(long, value_parser = parse_time)]
    created_since: Option<Timestamp>,
    /// Submitted before this: an RFC 3339 time, or a duration ago.
    #[arg(long, value_parser = parse_time)]
    created_until: Option<Timestamp>,
    /// Last changed at or after this: an RFC 3339 time, or a duration ago.
    #[arg(long, value_parser = parse_time)]
    updated_since: Option<Timestamp>,
    /// Last changed before this: an RFC 3339 time, or a duration ago.
    #[arg(long, value_parser = parse_time)]
    updated_until: Option<Timestamp>,
}

impl From<FilterArgs> for TaskFilter {
    fn from(f: FilterArgs) -> TaskFilter {
        TaskFilter {
            correlation_id: None,
            state: f.state,
            workflow: f.workflow,
            key_prefix: f.key_prefix,
            created_from: f.created_since,
            created_to: f.created_until,
            updated_from: f.updated_since,
            updated_to: f.updated_until,
        }
    }
}

impl BulkArgs {
    pub async fn run(self, b: &dyn Backend) -> anyhow::Result<()> {
        let command = match self.action {
            BulkAction::Cancel => BulkCommand::Cancel,
            BulkAction::Retry => BulkCommand::Retry,
            BulkAction::Resubmit => BulkCommand::Resubmit,
        };
        let (actor, reason) = self.who.into_parts(b)?;
        let limit = self.limit.unwrap_or_else(|| b.max_bulk());
        let p = BulkOperate { filter: self.filter.into(), command, actor, reason, dry_run: self.dry_run, limit };
        let r = b.bulk(p).await?;
        if r.dry_run {
            println!("{} (dry run): {} tasks match; nothing changed", r.action, r.matched);
        } else {
            println!("{}: {} tasks matched, {} done, {} refused", r.action, r.matched, r.acted, r.failed);
            for f in &r.failures {
                println!("  task {}: {}", f.task_id, f.detail);
            }
            if r.failed > r.failures.len() as u64 {
                println!("  ... and {} more refused", r.failed - r.failures.len() as u64);
            }
        }
        if r.more {
            println!(
                "more tasks match than --limit {limit}: only the oldest {limit} were taken; run again for the rest"
            );
        }
        Ok(())
    }
}
