//! A worker's log lines for a step, as `step.log` events (see `shiftboss_store::step_logs`).

use crate::error::map_err;
use crate::rows::EVENT_COLUMNS;
use crate::tx::Tx;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use shiftboss_core::model::{EventLevel, EventRecord};
use shiftboss_core::{StepId, TaskId};
use shiftboss_store::event_kind::STEP_LOG;
use shiftboss_store::step_logs::MAX_LOG_LINES_READ;
use shiftboss_store::{StepLogs, StoreError};

pub fn append(t: &Tx<'_>, p: &StepLogs) -> Result<(), StoreError> {
    let task: Option<i64> =
        t.tx.prepare_cached("SELECT task_id FROM steps WHERE id = ?1")
            .map_err(map_err)?
            .query_row([p.step_id.0], |r| r.get(0))
            .optional()
            .map_err(map_err)?;
    let task = task.ok_or_else(|| StoreError::NotFound { what: "step", id: p.step_id.to_string() })?;
    for line in &p.lines {
        t.event(TaskId(task), Some(p.step_id), STEP_LOG, EventLevel::Info, &p.actor, json!({ "log": line }))?;
    }
    Ok(())
}

/// A live step's lines by the events' (kind, step) index; an archived one's through its task.
pub fn read(c: &Connection, step: StepId) -> Result<Vec<EventRecord>, StoreError> {
    let live = format!("SELECT {EVENT_COLUMNS} FROM events WHERE kind = ?1 AND step_id = ?2 ORDER BY id LIMIT ?3");
    let archived = format!(
        "SELECT {EVENT_COLUMNS} FROM events_history
          WHERE task_id = (SELECT task_id FROM steps_history WHERE id = ?2) AND kind = ?1 AND step_id = ?2
          ORDER BY id LIMIT ?3"
    );
    for sql in [live, archived] {
        let mut st = c.prepare_cached(&sql).map_err(map_err)?;
        let rows = st.query_map(params![STEP_LOG, step.0, MAX_LOG_LINES_READ], crate::rows::event).map_err(map_err)?;
        let out = rows.collect::<Result<Vec<_>, _>>().map_err(map_err)?;
        if !out.is_empty() {
            return Ok(out);
        }
    }
    Ok(Vec::new())
}
