//! The archiver (leader-only): finished top-level tasks move, with their sub-workflow children,
//! steps and events, from the hot tables to the history tables of the same shape; history past
//! its retention time is deleted. And the way back, for a given-up job resubmitted from history.

use crate::error::map_err;
use crate::expire::check_leader;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_store::webhooks::CHANNEL_ARCHIVED as ARCHIVED;
use shiftboss_store::{Archive, ArchiveReport, StoreError, event_kind as ev};

/// A task and its descendants, parents first, from `tasks` or `tasks_history`.
fn tree(t: &Tx<'_>, table: &str, root: TaskId) -> Result<Vec<i64>, StoreError> {
    let sql = format!(
        "WITH RECURSIVE tree(id, depth) AS (
             SELECT id, 0 FROM {table} WHERE id = ?1
             UNION ALL SELECT c.id, tree.depth + 1 FROM {table} c JOIN tree ON c.parent_task_id = tree.id
         ) SELECT id FROM tree ORDER BY depth, id"
    );
    let mut st = t.tx.prepare_cached(&sql).map_err(map_err)?;
    let ids = st.query_map([root.0], |r| r.get(0)).map_err(map_err)?;
    ids.collect::<Result<_, _>>().map_err(map_err)
}

/// Whether any of these tasks has not ended.
fn any_live(t: &Tx<'_>, ids: &[i64]) -> Result<bool, StoreError> {
    let live: i64 =
        t.tx.prepare_cached(
            "SELECT count(*) FROM tasks WHERE id IN (SELECT value FROM json_each(?1))
               AND state IN ('running', 'paused', 'compensating')",
        )
        .and_then(|mut st| st.query_row([json!(ids).to_string()], |r| r.get(0)))
        .map_err(map_err)?;
    Ok(live > 0)
}

/// Moves the rows of tasks `ids` (a JSON array) from one set of tables to the other; returns the
/// (tasks, steps, events) moved.
fn move_rows(t: &Tx<'_>, ids: &str, to_history: bool) -> Result<(u64, u64, u64), StoreError> {
    // The events this transaction recorded move too.
    t.flush_events()?;
    let mut moved = [0u64; 3];
    // Children rows (events, steps) go first one way and last the other, for the foreign keys.
    let order: [(usize, &str, &str); 3] = if to_history {
        [(2, "events", "task_id"), (1, "steps", "task_id"), (0, "tasks", "id")]
    } else {
        [(0, "tasks", "id"), (1, "steps", "task_id"), (2, "events", "task_id")]
    };
    for (slot, table, column) in order {
        let (from, to) = if to_history {
            (table.to_owned(), format!("{table}_history"))
        } else {
            (format!("{table}_history"), table.to_owned())
        };
        let filter = format!("{column} IN (SELECT value FROM json_each(?1))");
        let n =
            t.tx.prepare_cached(&format!("INSERT INTO {to} SELECT * FROM {from} WHERE {filter} ORDER BY id"))
                .and_then(|mut st| st.execute([ids]))
                .map_err(map_err)?;
        t.tx.prepare_cached(&format!("DELETE FROM {from} WHERE {filter}"))
            .and_then(|mut st| st.execute([ids]))
            .map_err(map_err)?;
        moved[slot] = n as u64;
    }
    Ok((moved[0], moved[1], moved[2]))
}

/// Top-level tasks that ended before a time, oldest first, by `tasks_finished` (its condition word
/// for word; the planner, left to itself, read `tasks_by_state` and sorted every finished task).
pub(crate) const FINISHED_ROOTS: &str = "SELECT id FROM tasks INDEXED BY tasks_finished
     WHERE parent_task_id IS NULL AND updated_at <= ?1
       AND (state = 'completed' OR state = 'failed' OR state = 'cancelled' OR state = 'compensated'
            OR state = 'terminated')
     ORDER BY updated_at LIMIT ?2";

pub fn archive(t: &Tx<'_>, p: &Archive) -> Result<ArchiveReport, StoreError> {
    check_leader(t, &p.leader)?;
    let actor = format!("archiver:{}", p.leader.holder);
    let mut report = ArchiveReport::default();
    let roots: Vec<i64> = {
        let mut st = t.tx.prepare_cached(FINISHED_ROOTS).map_err(map_err)?;
        let rows = st.query_map(params![t.now.0 - duration_ms(p.after), p.limit], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    let mut ids = Vec::new();
    for root in &roots {
        let tree = tree(t, "tasks", TaskId(*root))?;
        // A finished task's children have ended too; should one not have, the tree waits.
        if !any_live(t, &tree)? {
            ids.extend(tree);
        }
    }
    if !ids.is_empty() {
        for id in &ids {
            t.event(TaskId(*id), None, ev::TASK_ARCHIVED, EventLevel::Info, &actor, json!({}))?;
        }
        let (tasks, steps, events) = move_rows(t, &json!(ids).to_string(), true)?;
        report.tasks = tasks;
        report.steps = steps;
        report.events = events;
    }
    let (n, senders) = archive_deliveries(t, t.now.0 - duration_ms(p.after), p.limit)?;
    report.deliveries = n;
    rest_channels(t, &ids, &senders)?;
    if let Some(keep) = p.keep {
        report.purged = purge(t, t.now.0 - duration_ms(keep), p.limit)?;
        t.tx.prepare_cached(
            "DELETE FROM deliveries_history WHERE id IN
                (SELECT id FROM deliveries_history WHERE updated_at < ?1 ORDER BY updated_at LIMIT ?2)",
        )
        .and_then(|mut st| st.execute(params![t.now.0 - duration_ms(keep), p.limit]))
        .map_err(map_err)?;
    }
    Ok(report)
}

/// Delivered messages older than `before` leave the hot table, like finished tasks (pending and
/// dead ones stay: they still need a dispatcher or an operator).
/// Returns how many moved, and the subscriptions they were sent for.
fn archive_deliveries(t: &Tx<'_>, before: i64, limit: u32) -> Result<(u64, Vec<i64>), StoreError> {
    let ids: Vec<i64> = {
        let mut st =
            t.tx.prepare_cached(
                "SELECT id FROM deliveries INDEXED BY deliveries_delivered
                  WHERE state = 'delivered' AND updated_at <= ?1 ORDER BY updated_at LIMIT ?2",
            )
            .map_err(map_err)?;
        let rows = st.query_map(params![before, limit], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }
    let ids = json!(ids).to_string();
    let senders: Vec<i64> = {
        let mut st =
            t.tx.prepare_cached(
                "SELECT DISTINCT subscription_id FROM deliveries WHERE id IN (SELECT value FROM json_each(?1))",
            )
            .map_err(map_err)?;
        let rows = st.query_map([&ids], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    let n =
        t.tx.prepare_cached(
            "INSERT INTO deliveries_history SELECT * FROM deliveries WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .and_then(|mut st| st.execute([&ids]))
        .map_err(map_err)?;
    t.tx.prepare_cached("DELETE FROM deliveries WHERE id IN (SELECT value FROM json_each(?1))")
        .and_then(|mut st| st.execute([&ids]))
        .map_err(map_err)?;
    Ok((n as u64, senders))
}

/// A task's own channel rests when the task is in history and nothing is left to send on it
/// (no pending or dead delivery): disabled, with the reason [`ARCHIVED`], so that the outbox
/// trigger and the dispatcher pass over it. Looked at for the tasks archived now and for the
/// subscriptions whose deliveries were archived now (the last of a slow receiver's). A restore
/// wakes it; the purge deletes it.
fn rest_channels(t: &Tx<'_>, archived: &[i64], senders: &[i64]) -> Result<(), StoreError> {
    if archived.is_empty() && senders.is_empty() {
        return Ok(());
    }
    t.tx.prepare_cached(
        "UPDATE subscriptions SET state = 'disabled', disabled_reason = ?3, updated_at = ?4
          WHERE (task_id IN (SELECT value FROM json_each(?1)) OR id IN (SELECT value FROM json_each(?2)))
            AND task_id IS NOT NULL AND state = 'active'
            AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.id = subscriptions.task_id)
            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.subscription_id = subscriptions.id
                               AND d.state IN ('pending', 'dead'))",
    )
    .and_then(|mut st| st.execute(params![json!(archived).to_string(), json!(senders).to_string(), ARCHIVED, t.now.0]))
    .map_err(map_err)?;
    Ok(())
}

/// Deletes history of top-level tasks that ended before `before`, children included.
fn purge(t: &Tx<'_>, before: i64, limit: u32) -> Result<u64, StoreError> {
    let roots: Vec<i64> = {
        let mut st =
            t.tx.prepare_cached(
                "SELECT id FROM tasks_history WHERE parent_task_id IS NULL AND updated_at < ?1
                 ORDER BY updated_at LIMIT ?2",
            )
            .map_err(map_err)?;
        let rows = st.query_map(params![before, limit], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    let mut ids = Vec::new();
    for root in roots {
        ids.extend(tree(t, "tasks_history", TaskId(root))?);
    }
    let ids = json!(ids).to_string();
    // Their own channels go with them, and what a channel still held unsent (a dead delivery
    // nobody redelivered in all that time): nothing is left to tell about.
    for sql in [
        "DELETE FROM deliveries WHERE subscription_id IN
            (SELECT id FROM subscriptions WHERE task_id IN (SELECT value FROM json_each(?1)))",
        "DELETE FROM subscriptions WHERE task_id IN (SELECT value FROM json_each(?1))",
    ] {
        t.tx.prepare_cached(sql).and_then(|mut st| st.execute([&ids])).map_err(map_err)?;
    }
    let mut purged = 0;
    for (table, column) in [("events_history", "task_id"), ("steps_history", "task_id"), ("tasks_history", "id")] {
        let n =
            t.tx.prepare_cached(&format!("DELETE FROM {table} WHERE {column} IN (SELECT value FROM json_each(?1))"))
                .and_then(|mut st| st.execute([&ids]))
                .map_err(map_err)?;
        if table == "tasks_history" {
            purged = n as u64;
        }
    }
    Ok(purged)
}

/// Brings an archived task (and its children) back to the hot tables, to run again.
pub fn restore_tree(t: &Tx<'_>, root: TaskId, actor: &str) -> Result<(), StoreError> {
    let ids = tree(t, "tasks_history", root)?;
    if ids.is_empty() {
        return Err(StoreError::NotFound { what: "archived task", id: root.to_string() });
    }
    // The events moved back were messages once already: they bypass `Tx::flush_events`, and with
    // it the outbox.
    move_rows(t, &json!(ids).to_string(), false)?;
    t.tx.prepare_cached(
        "UPDATE subscriptions SET state = 'active', disabled_reason = NULL, updated_at = ?3
          WHERE task_id IN (SELECT value FROM json_each(?1)) AND state = 'disabled' AND disabled_reason = ?2",
    )
    .and_then(|mut st| st.execute(params![json!(ids).to_string(), ARCHIVED, t.now.0]))
    .map_err(map_err)?;
    t.event(root, None, ev::TASK_RESTORED, EventLevel::Info, actor, json!({}))
}

/// One finished top-level task and its children to history, at an operator's word.
pub fn archive_task(t: &Tx<'_>, p: &shiftboss_store::ArchiveTask) -> Result<ArchiveReport, StoreError> {
    let id = p.task_id;
    let row: Option<(String, Option<i64>)> =
        t.tx.prepare_cached("SELECT state, parent_task_id FROM tasks WHERE id = ?1")
            .and_then(|mut st| st.query_row([id.0], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(map_err)?;
    let (state, parent) = row.ok_or_else(|| StoreError::NotFound { what: "task", id: id.to_string() })?;
    if let Some(parent) = parent {
        return Err(StoreError::Conflict(format!("task {id} is a child of task {parent}: it moves with its parent")));
    }
    if matches!(state.as_str(), "running" | "paused" | "compensating") {
        return Err(StoreError::Conflict(format!("task {id} is {state}: only a finished task moves to history")));
    }
    let tree = tree(t, "tasks", id)?;
    if any_live(t, &tree)? {
        return Err(StoreError::Conflict(format!("task {id} has a child that still runs")));
    }
    for member in &tree {
        t.event(TaskId(*member), None, ev::TASK_ARCHIVED, EventLevel::Info, &p.actor, json!({}))?;
    }
    let (tasks, steps, events) = move_rows(t, &json!(tree).to_string(), true)?;
    rest_channels(t, &tree, &[])?;
    Ok(ArchiveReport { tasks, steps, events, ..ArchiveReport::default() })
}
