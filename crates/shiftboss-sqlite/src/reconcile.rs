//! The reconciler (C6), leader-only: ends timed waits, fails tasks past their workflow's timeout,
//! and decides again live tasks that have nothing live and have not changed for a while (a decide
//! lost to a bug or a hand edit; every normal decide commits with the change that caused it).

use crate::error::map_err;
use crate::expire::check_leader;
use crate::tx::Tx;
use crate::writes::{run_now, update_step};
use rusqlite::params;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_core::{StepState, TaskId};
use shiftboss_store::advance::{advance_task, time_out};
use shiftboss_store::{Reconcile, ReconcileReport, StoreError, event_kind as ev};

/// Live tasks past their workflow's timeout, by `tasks_deadline` (its condition word for word).
pub(crate) const LATE_TASKS: &str = "SELECT id FROM tasks INDEXED BY tasks_deadline
     WHERE deadline_at <= ?1 AND deadline_at IS NOT NULL
       AND (state = 'running' OR state = 'paused' OR state = 'compensating')
     ORDER BY deadline_at LIMIT ?2";

/// Live tasks unchanged for a while with no step pending or processing, by `tasks_stale`.
pub(crate) const STALLED_TASKS: &str = "SELECT id FROM tasks INDEXED BY tasks_stale
     WHERE (state = 'running' OR state = 'compensating') AND updated_at <= ?1
       AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.task_id = tasks.id AND s.state IN ('pending', 'processing'))
     ORDER BY updated_at LIMIT ?2";

pub fn reconcile(t: &Tx<'_>, p: &Reconcile) -> Result<ReconcileReport, StoreError> {
    check_leader(t, &p.leader)?;
    let actor = format!("reconciler:{}", p.leader.holder);
    let mut report = ReconcileReport::default();

    let waits: Vec<(i64, String)> = select(
        t,
        "SELECT task_id, name FROM steps WHERE kind = 'wait' AND state = 'processing' AND due_at <= ?1
         ORDER BY due_at LIMIT ?2",
        params![t.now.0, p.limit],
    )?;
    for (task, name) in waits {
        let task = TaskId(task);
        let id = update_step(t, task, &name, StepState::Processed, Some(&json!({})), None)?;
        t.event(task, id, ev::WAIT_ENDED, EventLevel::Info, &actor, json!({"step": name}))?;
        run_now(advance_task(t, task, &actor))?;
        report.waits_ended += 1;
    }

    let late: Vec<(i64,)> = select(t, LATE_TASKS, params![t.now.0, p.limit])?;
    for (task,) in late {
        // Cleared whatever happens, so that a task is looked at once; a compensating task runs its
        // compensations to the end and does not count.
        if run_now(time_out(t, TaskId(task), &actor))? {
            report.timed_out += 1;
        }
        t.tx.execute("UPDATE tasks SET deadline_at = NULL WHERE id = ?1", [task]).map_err(map_err)?;
    }

    let stalled: Vec<(i64,)> = select(t, STALLED_TASKS, params![t.now.0 - duration_ms(p.stale_after), p.limit])?;
    for (task,) in stalled {
        let task = TaskId(task);
        t.event(task, None, ev::TASK_REDECIDED, EventLevel::Alert, &actor, json!({}))?;
        run_now(advance_task(t, task, &actor))?;
        t.tx.execute("UPDATE tasks SET updated_at = ?2 WHERE id = ?1", params![task.0, t.now.0]).map_err(map_err)?;
        report.redecided += 1;
    }
    Ok(report)
}

fn select<T: FromRow>(t: &Tx<'_>, sql: &str, p: impl rusqlite::Params) -> Result<Vec<T>, StoreError> {
    let mut st = t.tx.prepare_cached(sql).map_err(map_err)?;
    let rows = st.query_map(p, T::from_row).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

trait FromRow: Sized {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

impl FromRow for (i64, String) {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok((r.get(0)?, r.get(1)?))
    }
}

impl FromRow for (i64,) {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok((r.get(0)?,))
    }
}
