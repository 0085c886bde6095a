//! Reads for operators and tools.

use crate::error::map_err;
use crate::rows::{EVENT_COLUMNS, STEP_COLUMNS, TASK_COLUMNS};
use rusqlite::{Connection, OptionalExtension, params};
use shiftboss_core::model::TaskRecord;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::{ListTasks, StoreError, Summary, TaskDetail, WorkflowSummary, event_kind as ev};

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

pub fn get_task(c: &Connection, id: TaskId, place: Place) -> Result<Option<TaskDetail>, StoreError> {
    let task = c
        .query_row(
            &format!("SELECT {TASK_COLUMNS} FROM {} WHERE id = ?1", place.table("tasks")),
            [id.0],
            crate::rows::task,
        )
        .optional()
        .map_err(map_err)?;
    let Some(task) = task else { return Ok(None) };
    let steps = collect(
        c,
        &format!("SELECT {STEP_COLUMNS} FROM {} WHERE task_id = ?1 ORDER BY id", place.table("steps")),
        [id.0],
        crate::rows::step,
    )?;
    let events = collect(
        c,
        &format!("SELECT {EVENT_COLUMNS} FROM {} WHERE task_id = ?1 ORDER BY id", place.table("events")),
        [id.0],
        crate::rows::event,
    )?;
    Ok(Some(TaskDetail { task, steps, events }))
}

pub fn find_task_by_key(c: &Connection, key: &str, place: Place) -> Result<Option<TaskRecord>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM {} WHERE task_key = ?1", place.table("tasks"));
    c.query_row(&sql, [key], crate::rows::task).optional().map_err(map_err)
}

pub fn list_tasks(c: &Connection, p: &ListTasks) -> Result<Vec<TaskRecord>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks
         WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR workflow = ?2) AND (?3 IS NULL OR id < ?3)
         ORDER BY id DESC LIMIT ?4"
    );
    collect(
        c,
        &sql,
        params![p.state.map(TaskState::as_str), p.workflow, p.before.map(|b| b.0), p.limit],
        crate::rows::task,
    )
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
