//! Reads for operators and tools.

use crate::error::map_err;
use crate::rows::{EVENT_COLUMNS, STEP_COLUMNS, TASK_COLUMN_COUNT, TASK_COLUMNS};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::{
    ListTasks, StoreError, Summary, TaskDetail, TaskEvents, TaskFilter, WorkflowSummary, event_kind as ev,
};

/// Which tables a read looks at: the hot ones, or history (same columns, `_history` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Hot,
    History,
}

impl Place {
    fn table(self, name: &str) -> String {
        match self {
            Place::Hot => name.to_owned(),
            Place::History => format!("{name}_history"),
        }
    }
}

/// A task with its steps and its first `events` events (all of them when none).
pub fn get_task(
    c: &Connection,
    id: TaskId,
    place: Place,
    events: Option<u32>,
) -> Result<Option<TaskDetail>, StoreError> {
    let task = c
        .query_row(
            &format!("SELECT {TASK_COLUMNS} FROM {} WHERE id = ?1", place.table("tasks")),
            [id.0],
            crate::rows::task,
        )
        .optional()
        .map_err(map_err)?;
    let Some(mut task) = task else { return Ok(None) };
    task.archived = place == Place::History;
    let steps = collect(
        c,
        &format!("SELECT {STEP_COLUMNS} FROM {} WHERE task_id = ?1 ORDER BY id", place.table("steps")),
        [id.0],
        crate::rows::step,
    )?;
    // LIMIT -1 is no limit in SQLite.
    let limit = events.map_or(-1, i64::from);
    let events = collect(
        c,
        &format!("SELECT {EVENT_COLUMNS} FROM {} WHERE task_id = ?1 ORDER BY id LIMIT ?2", place.table("events")),
        [id.0, limit],
        crate::rows::event,
    )?;
    Ok(Some(TaskDetail { task, steps, events }))
}

pub fn find_task_by_key(c: &Connection, key: &str, place: Place) -> Result<Option<TaskRecord>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM {} WHERE task_key = ?1", place.table("tasks"));
    let task = c.query_row(&sql, [key], crate::rows::task).optional().map_err(map_err)?;
    Ok(task.map(|t| TaskRecord { archived: place == Place::History, ..t }))
}

/// A task filter as a WHERE clause over numbered parameters, and their values. Only the filters
/// given are written, so that each shape of filter is planned for the indexes it can use
/// (`tasks_by_state` for a state, the key's unique index for a prefix) instead of one statement
/// of "?1 IS NULL OR ..." that can use none.
#[derive(Default)]
pub struct Where {
    conditions: Vec<String>,
    pub values: Vec<Value>,
}

impl Where {
    pub fn of(f: &TaskFilter, before: Option<TaskId>) -> Where {
        let mut w = Where::default();
        if let Some(s) = f.state {
            w.add("state = ?", Value::Text(s.as_str().into()));
        }
        if let Some(wf) = &f.workflow {
            w.add("workflow = ?", Value::Text(wf.clone()));
        }
        // A range, which SQLite reads from the key's index (text compares as bytes here), where
        // LIKE 'prefix%' would need case-sensitive LIKE turned on to use it.
        if let Some(c) = &f.correlation_id {
            w.add("correlation_id = ?", Value::Text(c.clone()));
        }
        if let Some((lo, hi)) = f.key_range() {
            w.add("task_key >= ?", Value::Text(lo.into()));
            if let Some(hi) = hi {
                w.add("task_key < ?", Value::Text(hi));
            }
        }
        for (column, op, t) in [
            ("created_at", ">=", f.created_from),
            ("created_at", "<", f.created_to),
            ("updated_at", ">=", f.updated_from),
            ("updated_at", "<", f.updated_to),
        ] {
            if let Some(t) = t {
                w.add(&format!("{column} {op} ?"), Value::Integer(t.0));
            }
        }
        if let Some(b) = before {
            w.add("id < ?", Value::Integer(b.0));
        }
        w
    }

    /// `condition` with one `?`, which becomes this value's number.
    fn add(&mut self, condition: &str, value: Value) {
        self.values.push(value);
        self.conditions.push(condition.replace('?', &format!("?{}", self.values.len())));
    }

    /// `WHERE a AND b`, or nothing.
    pub fn clause(&self) -> String {
        if self.conditions.is_empty() { String::new() } else { format!("WHERE {}", self.conditions.join(" AND ")) }
    }
}

/// Live tasks, and with `include_archived` history's too: each table's newest page, merged.
pub fn list_tasks(c: &Connection, p: &ListTasks) -> Result<Vec<TaskRecord>, StoreError> {
    let mut w = Where::of(&p.filter, p.before);
    let filter = w.clause();
    w.values.push(Value::Integer(i64::from(p.limit)));
    let limit = format!("?{}", w.values.len());
    let page = |table: &str, archived: u8| {
        format!("SELECT {TASK_COLUMNS}, {archived} AS archived FROM {table} {filter} ORDER BY id DESC LIMIT {limit}")
    };
    let sql = if p.include_archived {
        format!(
            "SELECT * FROM ({}) UNION ALL SELECT * FROM ({}) ORDER BY id DESC LIMIT {limit}",
            page("tasks", 0),
            page("tasks_history", 1)
        )
    } else {
        page("tasks", 0)
    };
    collect(c, &sql, params_from_iter(w.values), |r| {
        Ok(TaskRecord { archived: r.get::<_, i64>(TASK_COLUMN_COUNT)? != 0, ..crate::rows::task(r)? })
    })
}

/// The ids of the live tasks a filter matches, oldest first, at most `limit`.
pub fn task_ids(c: &Connection, f: &TaskFilter, limit: u32) -> Result<Vec<TaskId>, StoreError> {
    let mut w = Where::of(f, None);
    let filter = w.clause();
    w.values.push(Value::Integer(i64::from(limit)));
    let sql = format!("SELECT id FROM tasks {filter} ORDER BY id LIMIT ?{}", w.values.len());
    collect(c, &sql, params_from_iter(w.values), |r| Ok(TaskId(r.get(0)?)))
}

/// One page of a task's events, from whichever table holds them (a task's events are all in
/// one: the archiver moves them with it, in one transaction).
pub fn task_events(c: &Connection, p: &TaskEvents) -> Result<Vec<EventRecord>, StoreError> {
    let page = |table: &str| {
        format!("SELECT {EVENT_COLUMNS} FROM {table} WHERE task_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3")
    };
    let sql = format!(
        "SELECT * FROM ({}) UNION ALL SELECT * FROM ({}) ORDER BY id LIMIT ?3",
        page("events"),
        page("events_history")
    );
    collect(c, &sql, params![p.task_id.0, p.after.unwrap_or(0), p.limit], crate::rows::event)
}

pub fn task_counts(c: &Connection) -> Result<Vec<(TaskState, u64)>, StoreError> {
    collect(c, "SELECT state, count(*) FROM tasks GROUP BY state", [], |r| {
        Ok((crate::rows::parsed::<TaskState>(r, 0, "tasks.state")?, r.get::<_, i64>(1)? as u64))
    })
}

pub fn summarize(c: &Connection) -> Result<Summary, StoreError> {
    let count = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<u64, StoreError> {
        c.query_row(sql, p, |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(map_err)
    };
    let tasks = task_counts(c)?;
    let steps = collect(c, "SELECT state, count(*) FROM steps GROUP BY state", [], |r| {
        Ok((crate::rows::parsed::<StepState>(r, 0, "steps.state")?, r.get::<_, i64>(1)? as u64))
    })?;
    // The kinds are written into the text, not bound: the store plans with the query planner
    // stability guarantee on, so only a literal kind matches the partial index events_lapses.
    let kind = |k: &str| count(&format!("SELECT count(*) FROM events WHERE kind = '{k}'"), &[]);
    let errors = collect(
        c,
        "SELECT coalesce(last_error, '?'), count(*) FROM steps WHERE state = 'error' GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)),
    )?;
    Ok(Summary {
        tasks,
        steps,
        expiries: kind(ev::STEP_EXPIRED)?,
        releases: kind(ev::STEP_RELEASED)?,
        rejected_replies: kind(ev::REPLY_REJECTED)?,
        steps_retried: count("SELECT count(*) FROM steps WHERE attempts > 1", &[])?,
        recovered_after_expiry: count(
            &format!(
                "SELECT count(*) FROM steps WHERE state = 'processed'
                 AND id IN (SELECT step_id FROM events WHERE kind = '{}' OR kind = '{}')",
                ev::STEP_EXPIRED,
                ev::STEP_RELEASED
            ),
            &[],
        )?,
        errors,
    })
}

fn collect<T>(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut st = c.prepare_cached(sql).map_err(map_err)?;
    let rows = st.query_map(p, f).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

pub fn list_workflows(c: &Connection) -> Result<Vec<WorkflowSummary>, StoreError> {
    collect(c, "SELECT name, version, definition, created_at FROM workflows ORDER BY name, version", [], |r| {
        let text: String = r.get(2)?;
        let description = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|d| d["description"].as_str().map(str::to_owned));
        Ok(WorkflowSummary {
            name: r.get(0)?,
            version: r.get(1)?,
            description,
            created_at: shiftboss_core::Timestamp(r.get(3)?),
        })
    })
}

/// The live agent steps by agent type and state (and for pending ones, whether due at `?1`): each
/// state counted through the partial indexes of that state (`steps_error` for steps in Error), so
/// that a scrape reads the live steps only, never the finished ones beside them.
pub const QUEUE_STATS: &str = "
SELECT agent, 'pending', due_at <= ?1, count(*), min(due_at) FROM steps
 WHERE state = 'pending' AND kind = 'agent' GROUP BY agent, due_at <= ?1
UNION ALL
SELECT agent, 'processing', false, count(*), min(due_at) FROM steps
 WHERE state = 'processing' AND kind = 'agent' GROUP BY agent
UNION ALL
SELECT agent, 'error', false, count(*), min(due_at) FROM steps
 WHERE state = 'error' AND kind = 'agent' GROUP BY agent";

/// Each agent type's queue at `now` (see [`shiftboss_store::QueueStats`]): live agent steps only.
pub fn queue_stats(c: &Connection, now: shiftboss_core::Timestamp) -> Result<shiftboss_store::QueueStats, StoreError> {
    let rows = collect(c, QUEUE_STATS, [now.0], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, bool>(2)?,
            r.get::<_, i64>(3)? as u64,
            r.get::<_, Option<i64>>(4)?,
        ))
    })?;
    Ok(shiftboss_store::QueueStats::from_rows(now, rows))
}
