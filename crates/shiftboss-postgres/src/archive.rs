//! The archiver (leader-only): finished top-level tasks move, with their sub-workflow children,
//! steps and events, from the hot tables to the history tables of the same shape; history past its
//! retention time is deleted. And the way back, for a given-up job resubmitted from history.
//!
//! Locks: the archiver must never move a task that another transaction is deciding. Every decider
//! run holds its task's row lock and its ancestors' (see `lock`), so the archiver picks roots with
//! `FOR UPDATE SKIP LOCKED`: a root someone holds is left for the next pass, and a root changed since
//! the statement's snapshot is checked again (still finished, still old enough) once locked. Holding
//! a root, it locks the root's descendants (which nobody can hold without the root, so this waits
//! for nobody), and moves a tree only if every task in it has ended.
//!
//! History rows are locked the same way by those that move or delete them (a restore, the purge),
//! so two resubmits never restore one task twice.

use crate::expire::check_leader;
use crate::rows::get;
use crate::tx::Tx;
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_store::webhooks::CHANNEL_ARCHIVED;
use shiftboss_store::{Archive, ArchiveReport, StoreError, event_kind as ev};
use std::collections::{HashMap, HashSet};

/// The task states that never change again (but by an operator's retry, which locks the task).
const ENDED: &str = "('completed', 'failed', 'cancelled', 'compensated', 'terminated')";

pub async fn archive(t: &Tx<'_>, p: &Archive) -> Result<ArchiveReport, StoreError> {
    check_leader(t, &p.leader).await?;
    let actor = format!("archiver:{}", p.leader.holder);
    let mut report = ArchiveReport::default();
    let before = t.now.0.saturating_sub(duration_ms(p.after));
    let rows = t
        .query(
            &format!(
                "SELECT id FROM tasks
                 WHERE parent_task_id IS NULL AND updated_at <= $1 AND state IN {ENDED}
                 ORDER BY updated_at, id LIMIT $2
                 FOR UPDATE SKIP LOCKED"
            ),
            &[&before, &i64::from(p.limit)],
        )
        .await?;
    let roots = rows.iter().map(|r| get(r, 0)).collect::<Result<Vec<i64>, _>>()?;
    let ids = ended_trees(t, &roots).await?;
    if !ids.is_empty() {
        // Written before the move, so that each moves with its task.
        t.execute(
            "INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
             SELECT id, NULL, $2, $3, 'info', $4, '{}'
               FROM unnest($1::bigint[]) WITH ORDINALITY AS a(id, n)
              ORDER BY n",
            &[&ids, &t.now.0, &ev::TASK_ARCHIVED, &actor],
        )
        .await?;
        (report.tasks, report.steps, report.events) = move_rows(t, &ids, true).await?;
    }
    let (n, senders) = archive_deliveries(t, t.now.0.saturating_sub(duration_ms(p.after)), p.limit).await?;
    report.deliveries = n;
    rest_channels(t, &ids, &senders).await?;
    if let Some(keep) = p.keep {
        report.purged = purge(t, t.now.0.saturating_sub(duration_ms(keep)), p.limit).await?;
        t.execute(
            "DELETE FROM deliveries_history WHERE id IN
                (SELECT id FROM deliveries_history WHERE updated_at < $1 ORDER BY updated_at LIMIT $2)",
            &[&t.now.0.saturating_sub(duration_ms(keep)), &i64::from(p.limit)],
        )
        .await?;
    }
    Ok(report)
}

/// Delivered messages older than `before` leave the hot table, like finished tasks (pending and
/// dead ones stay: they still need a dispatcher or an operator). Returns how many moved, and the
/// subscriptions they were sent for.
async fn archive_deliveries(t: &Tx<'_>, before: i64, limit: u32) -> Result<(u64, Vec<i64>), StoreError> {
    let row = t
        .query_one(
            "WITH moved AS (
                 DELETE FROM deliveries WHERE id IN
                     (SELECT id FROM deliveries WHERE state = 'delivered' AND updated_at <= $1
                       ORDER BY updated_at LIMIT $2)
                 RETURNING *
             ), kept AS (INSERT INTO deliveries_history SELECT * FROM moved RETURNING subscription_id)
             SELECT count(*), coalesce(array_agg(DISTINCT subscription_id), '{}') FROM kept",
            &[&before, &i64::from(limit)],
        )
        .await?;
    let n: i64 = get(&row, 0)?;
    Ok((n as u64, get(&row, 1)?))
}

/// A task's own channel rests when the task is in history and nothing is left to send on it
/// (no pending or dead delivery): disabled, with the reason `CHANNEL_ARCHIVED`, so that the
/// outbox trigger and the dispatcher pass over it. Looked at for the tasks archived now and for
/// the subscriptions whose deliveries were archived now (the last of a slow receiver's). A
/// restore wakes it; the purge deletes it.
async fn rest_channels(t: &Tx<'_>, archived: &[i64], senders: &[i64]) -> Result<(), StoreError> {
    if archived.is_empty() && senders.is_empty() {
        return Ok(());
    }
    t.execute(
        "UPDATE subscriptions s SET state = 'disabled', disabled_reason = $3, updated_at = $4
          WHERE (s.task_id = ANY($1) OR s.id = ANY($2)) AND s.task_id IS NOT NULL AND s.state = 'active'
            AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.id = s.task_id)
            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.subscription_id = s.id
                               AND d.state IN ('pending', 'dead'))",
        &[&archived, &senders, &CHANNEL_ARCHIVED, &t.now.0],
    )
    .await?;
    Ok(())
}

/// Locks the descendants of `roots` (held by this transaction) and returns the ids of every tree
/// whose tasks have all ended, parents first. A tree with a live task (a child that did not end
/// with its parent) stays where it is: it still has work to do.
async fn ended_trees(t: &Tx<'_>, roots: &[i64]) -> Result<Vec<i64>, StoreError> {
    if roots.is_empty() {
        return Ok(Vec::new());
    }
    // Ascending ids put a parent before its children (see `lock`).
    let rows = t
        .query(
            &format!(
                "WITH RECURSIVE tree (id) AS (
                     SELECT id FROM tasks WHERE id = ANY($1)
                     UNION ALL
                     SELECT c.id FROM tasks c JOIN tree ON c.parent_task_id = tree.id
                 )
                 SELECT id, parent_task_id, state IN {ENDED} FROM tasks WHERE id IN (SELECT id FROM tree)
                 ORDER BY id FOR UPDATE"
            ),
            &[&roots],
        )
        .await?;
    let mut root_of: HashMap<i64, i64> = HashMap::new();
    let mut live_roots = HashSet::new();
    let mut members = Vec::with_capacity(rows.len());
    for r in &rows {
        let (id, parent, ended): (i64, Option<i64>, bool) = (get(r, 0)?, get(r, 1)?, get(r, 2)?);
        // A parent's id is lower, so it was seen first.
        let root = parent.and_then(|p| root_of.get(&p).copied()).unwrap_or(id);
        root_of.insert(id, root);
        if !ended {
            live_roots.insert(root);
        }
        members.push((id, root));
    }
    Ok(members.into_iter().filter(|(_, root)| !live_roots.contains(root)).map(|(id, _)| id).collect())
}

/// Moves the rows of tasks `ids` from one set of tables to the other, one statement per table
/// (`DELETE ... RETURNING *` feeding an INSERT: the tables have the same columns in the same
/// order); returns the (tasks, steps, events) moved.
async fn move_rows(t: &Tx<'_>, ids: &[i64], to_history: bool) -> Result<(u64, u64, u64), StoreError> {
    // Events this transaction recorded must be in the table before its rows move.
    t.flush_events().await?;
    let mut moved = [0u64; 3];
    // Steps point at their task (a foreign key, checked at the end of each statement): they leave
    // the hot tables before their tasks, and come back after them.
    let order: [(usize, &str, &str); 3] = if to_history {
        [(2, "events", "task_id"), (1, "steps", "task_id"), (0, "tasks", "id")]
    } else {
        [(0, "tasks", "id"), (1, "steps", "task_id"), (2, "events", "task_id")]
    };
    for (slot, table, column) in order {
        let (from, to, overriding) = if to_history {
            (table.to_owned(), format!("{table}_history"), "")
        } else {
            // The hot tables' ids are GENERATED ALWAYS: a row keeps its id on the way back.
            (format!("{table}_history"), table.to_owned(), "OVERRIDING SYSTEM VALUE")
        };
        moved[slot] = t
            .execute(
                &format!(
                    "WITH moved AS (DELETE FROM {from} WHERE {column} = ANY($1) RETURNING *)
                     INSERT INTO {to} {overriding} SELECT * FROM moved ORDER BY id"
                ),
                &[&ids],
            )
            .await?;
    }
    Ok((moved[0], moved[1], moved[2]))
}

/// Deletes history of top-level tasks that ended before `before`, children included.
async fn purge(t: &Tx<'_>, before: i64, limit: u32) -> Result<u64, StoreError> {
    let rows = t
        .query(
            "SELECT id FROM tasks_history WHERE parent_task_id IS NULL AND updated_at < $1
             ORDER BY updated_at, id LIMIT $2
             FOR UPDATE SKIP LOCKED",
            &[&before, &i64::from(limit)],
        )
        .await?;
    let roots = rows.iter().map(|r| get(r, 0)).collect::<Result<Vec<i64>, _>>()?;
    if roots.is_empty() {
        return Ok(0);
    }
    let ids = history_tree(t, &roots).await?;
    // Their own channels go with them, and what a channel still held unsent (a dead delivery
    // nobody redelivered in all that time): nothing is left to tell about.
    t.execute(
        "DELETE FROM deliveries WHERE subscription_id IN (SELECT id FROM subscriptions WHERE task_id = ANY($1))",
        &[&ids],
    )
    .await?;
    t.execute("DELETE FROM subscriptions WHERE task_id = ANY($1)", &[&ids]).await?;
    let mut purged = 0;
    for (table, column) in [("events_history", "task_id"), ("steps_history", "task_id"), ("tasks_history", "id")] {
        let n = t.execute(&format!("DELETE FROM {table} WHERE {column} = ANY($1)"), &[&ids]).await?;
        if table == "tasks_history" {
            purged = n;
        }
    }
    Ok(purged)
}

/// Archived tasks and their descendants, parents first.
async fn history_tree(t: &Tx<'_>, roots: &[i64]) -> Result<Vec<i64>, StoreError> {
    let rows = t
        .query(
            "WITH RECURSIVE tree (id) AS (
                 SELECT id FROM tasks_history WHERE id = ANY($1)
                 UNION ALL
                 SELECT c.id FROM tasks_history c JOIN tree ON c.parent_task_id = tree.id
             )
             SELECT id FROM tree ORDER BY id",
            &[&roots],
        )
        .await?;
    rows.iter().map(|r| get(r, 0)).collect()
}

/// Brings an archived task (and its children) back to the hot tables, to run again. False when it
/// is no longer in history (another resubmit brought it back, or the purge deleted it, since the
/// caller found it there).
pub async fn restore_tree(t: &Tx<'_>, root: TaskId, actor: &str) -> Result<bool, StoreError> {
    // Waits for a restore or purge of the same task that is under way, then sees whether it is left.
    let held = t.query_opt("SELECT id FROM tasks_history WHERE id = $1 FOR UPDATE", &[&root.0]).await?;
    if held.is_none() {
        return Ok(false);
    }
    let ids = history_tree(t, &[root.0]).await?;
    // The events moved back were messages once already: the outbox trigger lets them pass.
    t.execute("SELECT set_config('shiftboss.outbox_muted', 'on', true)", &[]).await?;
    move_rows(t, &ids, false).await?;
    t.execute("SELECT set_config('shiftboss.outbox_muted', 'off', true)", &[]).await?;
    t.execute(
        "UPDATE subscriptions SET state = 'active', disabled_reason = NULL, updated_at = $3
          WHERE task_id = ANY($1) AND state = 'disabled' AND disabled_reason = $2",
        &[&ids, &CHANNEL_ARCHIVED, &t.now.0],
    )
    .await?;
    t.event(root, None, ev::TASK_RESTORED, EventLevel::Info, actor, json!({})).await?;
    Ok(true)
}

/// One finished top-level task and its children to history, at an operator's word. The task's
/// row lock first, as the archiver takes it: a decider run on it is waited for, not raced.
pub async fn archive_task(t: &Tx<'_>, p: &shiftboss_store::ArchiveTask) -> Result<ArchiveReport, StoreError> {
    let id = p.task_id;
    let row = t.query_opt("SELECT state, parent_task_id FROM tasks WHERE id = $1 FOR UPDATE", &[&id.0]).await?;
    let row = row.ok_or_else(|| StoreError::NotFound { what: "task", id: id.to_string() })?;
    let (state, parent): (String, Option<i64>) = (get(&row, 0)?, get(&row, 1)?);
    if let Some(parent) = parent {
        return Err(StoreError::Conflict(format!("task {id} is a child of task {parent}: it moves with its parent")));
    }
    if matches!(state.as_str(), "running" | "paused" | "compensating") {
        return Err(StoreError::Conflict(format!("task {id} is {state}: only a finished task moves to history")));
    }
    let ids = ended_trees(t, &[id.0]).await?;
    if ids.is_empty() {
        return Err(StoreError::Conflict(format!("task {id} has a child that still runs")));
    }
    t.execute(
        "INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
         SELECT id, NULL, $2, $3, 'info', $4, '{}'
           FROM unnest($1::bigint[]) WITH ORDINALITY AS a(id, n)
          ORDER BY n",
        &[&ids, &t.now.0, &ev::TASK_ARCHIVED, &p.actor],
    )
    .await?;
    let (tasks, steps, events) = move_rows(t, &ids, true).await?;
    rest_channels(t, &ids, &[]).await?;
    Ok(ArchiveReport { tasks, steps, events, ..ArchiveReport::default() })
}
