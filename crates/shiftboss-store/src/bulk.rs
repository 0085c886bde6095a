//! Bulk operator actions over a task filter (issue 16): cancel, retry or resubmit every task that
//! matches, or count them first with a dry run. Each task is acted on in a transaction of its own,
//! so one task that refuses (its state forbids the action) is reported and the others go on.

use crate::listing::TaskFilter;
use crate::params::check_actor_and_reason;
use crate::{Result, StoreError};
use futures_util::stream::{self, StreamExt};
use shiftboss_core::TaskId;
use std::future::Future;

/// The most tasks one bulk call acts on.
pub const MAX_BULK_TASKS: u32 = 10_000;

/// The most failures a report lists one by one (all are counted).
pub const MAX_BULK_FAILURES: usize = 100;

/// How many tasks' transactions run at once: enough for SQLite's group commit to share commits and
/// for PostgreSQL's round trips to overlap, few enough to leave the pool's other connections to the
/// rest of the process. Tasks are locked one at a time each, with their ancestors in id order, so
/// concurrent actions cannot deadlock (see the PostgreSQL store's `lock`).
const CONCURRENCY: usize = 4;

/// What to do to each matched task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkCommand {
    /// As `TaskCommand::Cancel`: live steps cancelled, completed ones compensated if the workflow
    /// says so. An ended task refuses.
    Cancel,
    /// As `TaskCommand::Retry`: a failed task runs its steps in Error again. Any other refuses.
    Retry,
    /// As `resubmit_step` on each of the task's agent steps in Error (their failure counts reset),
    /// all in the task's one transaction. A task with no step in Error refuses.
    Resubmit,
}

impl BulkCommand {
    pub fn as_str(self) -> &'static str {
        match self {
            BulkCommand::Cancel => "cancel",
            BulkCommand::Retry => "retry",
            BulkCommand::Resubmit => "resubmit",
        }
    }
}

/// An operator action on every live task matching a filter (history is not acted on: its tasks
/// have ended).
#[derive(Debug, Clone, PartialEq)]
pub struct BulkOperate {
    /// Which tasks.
    pub filter: TaskFilter,
    /// What to do to each.
    pub command: BulkCommand,
    /// Who acts, for each task's event log (1 to `MAX_OPERATOR_TEXT` bytes).
    pub actor: String,
    /// Why, for each task's event log.
    pub reason: String,
    /// Only count the tasks that match, and change nothing.
    pub dry_run: bool,
    /// At most this many tasks, oldest (lowest id) first; 1 to [`MAX_BULK_TASKS`].
    pub limit: u32,
}

impl BulkOperate {
    /// Checks what does not need the database; stores call it before they read or write.
    pub fn validate(&self) -> Result<()> {
        self.filter.validate()?;
        check_actor_and_reason(&self.actor, &self.reason)?;
        if self.limit == 0 || self.limit > MAX_BULK_TASKS {
            return Err(StoreError::InvalidInput(format!("a bulk action takes 1 to {MAX_BULK_TASKS} tasks")));
        }
        Ok(())
    }
}

/// What a bulk action found and did.
#[derive(Debug, Clone, Default)]
pub struct BulkReport {
    /// Tasks that matched, at most the limit.
    pub matched: u64,
    /// More tasks matched than the limit: the ones above it (by id) were not counted nor touched.
    pub more: bool,
    /// Tasks acted on (0 on a dry run).
    pub acted: u64,
    /// Tasks whose action was refused or failed; each changed nothing.
    pub failed: u64,
    /// The first [`MAX_BULK_FAILURES`] of those, by task id, with why.
    pub failures: Vec<BulkFailure>,
}

/// One task a bulk action could not act on.
#[derive(Debug, Clone)]
pub struct BulkFailure {
    pub task_id: TaskId,
    /// Why: `Conflict` when the task's state forbids the action, `NotFound` when it was archived
    /// meanwhile, anything else as the store reported it.
    pub error: StoreError,
}

/// The part of a bulk action every store shares: given the ids the filter matched (the store reads
/// up to `limit + 1`, so that `more` can be told), counts them, and unless it is a dry run, acts on
/// each with `act`, which runs one task's action in a transaction of its own.
pub async fn run_bulk<F, Fut>(p: &BulkOperate, mut ids: Vec<TaskId>, act: F) -> BulkReport
where
    F: Fn(TaskId) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let more = ids.len() > p.limit as usize;
    ids.truncate(p.limit as usize);
    let mut report = BulkReport { matched: ids.len() as u64, more, ..BulkReport::default() };
    if p.dry_run {
        return report;
    }
    let outcomes: Vec<(TaskId, Result<()>)> = stream::iter(ids)
        .map(|id| {
            let acted = act(id);
            async move { (id, acted.await) }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut failures: Vec<BulkFailure> = outcomes
        .into_iter()
        .filter_map(|(task_id, r)| match r {
            Ok(()) => {
                report.acted += 1;
                None
            }
            Err(error) => Some(BulkFailure { task_id, error }),
        })
        .collect();
    report.failed = failures.len() as u64;
    failures.sort_by_key(|f| f.task_id);
    failures.truncate(MAX_BULK_FAILURES);
    report.failures = failures;
    report
}
