//! The task lock (C7): two deciders never run on one task at once, in this process or another.
//!
//! Every operation that runs the decider, or changes a step on a task's behalf, locks the task row
//! (`SELECT ... FOR UPDATE`) before it reads the task's steps, and holds it until it commits.
//!
//! Sub-workflows make tasks a tree, and a change may move up it (a child that ends moves its
//! parent's step on) or down it (a parent that is cancelled cancels its children). So the locks
//! are taken top-down:
//!
//! - Whoever locks a task locks all its ancestors with it. A parent is always created before its
//!   children, so its id is lower, and all of them are locked in one statement in ascending id
//!   order. Locks of several trees (a batch of replies) are taken in that one order too, so these
//!   operations never wait on each other in a cycle.
//! - Below a task it holds, a transaction locks children as it reaches them ([`lock_child`]). That
//!   never joins a cycle either: holding a task's lock means holding its ancestors', so nobody
//!   else can hold a descendant of a task this transaction holds.
//!
//! `parent_task_id` never changes once a task is written, so the ancestors are read without locks.

use crate::rows::get;
use crate::tx::Tx;
use shiftboss_core::TaskId;
use shiftboss_store::StoreError;

/// Locks these tasks and every ancestor of theirs until the transaction ends. A task that does not
/// exist is left out (the caller finds it missing when it reads it). Tasks this transaction holds
/// already cost nothing.
pub async fn lock_tasks(t: &Tx<'_>, ids: &[TaskId]) -> Result<(), StoreError> {
    // The locking clause sits above the sort in the plan, so rows are locked in the ORDER BY's
    // order: ancestors (lower ids) before their descendants.
    const WITH_ANCESTORS: &str = "WITH RECURSIVE line (id, parent) AS (
             SELECT id, parent_task_id FROM tasks WHERE id = ANY($1)
             UNION
             SELECT up.id, up.parent_task_id FROM tasks up JOIN line ON up.id = line.parent
         )
         SELECT id FROM tasks WHERE id IN (SELECT id FROM line) ORDER BY id FOR UPDATE";
    lock_in_order(t, ids, WITH_ANCESTORS).await
}

/// Locks top-level tasks (the caller read that none has a parent), in ascending id order as
/// [`lock_tasks`] does, without its walk up the tree: a reply batch of retry jobs locks hundreds.
pub async fn lock_roots(t: &Tx<'_>, ids: &[TaskId]) -> Result<(), StoreError> {
    lock_in_order(t, ids, "SELECT id FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE").await
}

/// Runs `sql` (which locks in ascending id order and returns the locked ids) for the tasks not
/// held yet, and records what it locked.
async fn lock_in_order(t: &Tx<'_>, ids: &[TaskId], sql: &str) -> Result<(), StoreError> {
    let mut ids: Vec<i64> = {
        let held = t.locked.lock().unwrap_or_else(|p| p.into_inner());
        // A task held was locked with its ancestors (or below one of them), so they are held too.
        ids.iter().filter(|id| !held.contains(id)).map(|id| id.0).collect()
    };
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    let rows = t.query(sql, &[&ids]).await?;
    let locked = rows.iter().map(|r| get(r, 0).map(TaskId)).collect::<Result<Vec<_>, _>>()?;
    t.locked.lock().unwrap_or_else(|p| p.into_inner()).extend(locked);
    Ok(())
}

/// Locks a child of a task this transaction holds (see the module's rules: this never waits on a
/// decider, since whoever decides on the child holds the parent first).
pub async fn lock_child(t: &Tx<'_>, child: TaskId) -> Result<(), StoreError> {
    if t.locked.lock().unwrap_or_else(|p| p.into_inner()).contains(&child) {
        return Ok(());
    }
    t.query_opt("SELECT id FROM tasks WHERE id = $1 FOR UPDATE", &[&child.0]).await?;
    held(t, child);
    Ok(())
}

/// Records a task this transaction wrote: nobody else sees it before the commit.
pub fn held(t: &Tx<'_>, task: TaskId) {
    t.locked.lock().unwrap_or_else(|p| p.into_inner()).insert(task);
}
