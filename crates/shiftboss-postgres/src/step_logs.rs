//! A worker's log lines for a step, as `step.log` events (see `shiftboss_store::step_logs`).

use crate::rows::{EVENT_COLUMNS, get};
use crate::tx::{Conn, Tx};
use serde_json::json;
use shiftboss_core::model::{EventLevel, EventRecord};
use shiftboss_core::{StepId, TaskId};
use shiftboss_store::event_kind::STEP_LOG;
use shiftboss_store::step_logs::MAX_LOG_LINES_READ;
use shiftboss_store::{StepLogs, StoreError};

pub async fn append(t: &Tx<'_>, p: &StepLogs) -> Result<(), StoreError> {
    let row = t.query_opt("SELECT task_id FROM steps WHERE id = $1", &[&p.step_id.0]).await?;
    let row = row.ok_or_else(|| StoreError::NotFound { what: "step", id: p.step_id.to_string() })?;
    let task = TaskId(get(&row, 0)?);
    for line in &p.lines {
        t.event(task, Some(p.step_id), STEP_LOG, EventLevel::Info, &p.actor, json!({ "log": line })).await?;
    }
    Ok(())
}

/// A live step's lines by the events' (kind, step) index; an archived one's through its task.
pub async fn read(c: Conn<'_>, step: StepId) -> Result<Vec<EventRecord>, StoreError> {
    let live = format!("SELECT {EVENT_COLUMNS} FROM events WHERE kind = $1 AND step_id = $2 ORDER BY id LIMIT $3");
    let archived = format!(
        "SELECT {EVENT_COLUMNS} FROM events_history
          WHERE task_id = (SELECT task_id FROM steps_history WHERE id = $2) AND kind = $1 AND step_id = $2
          ORDER BY id LIMIT $3"
    );
    let limit = i64::from(MAX_LOG_LINES_READ);
    for sql in [live, archived] {
        let rows = c.query(&sql, &[&STEP_LOG, &step.0, &limit]).await?;
        if !rows.is_empty() {
            return rows.iter().map(crate::rows::event).collect();
        }
    }
    Ok(Vec::new())
}
