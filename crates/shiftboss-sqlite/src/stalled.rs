//! Running tasks without progress since a cutoff (see `shiftboss_store::stalled`), in one statement.

use crate::error::map_err;
use crate::rows::{TASK_COLUMN_COUNT, TASK_COLUMNS, task};
use rusqlite::{Connection, params};
use shiftboss_core::Timestamp;
use shiftboss_store::{StalledTask, StalledTasks, StoreError};
use std::sync::LazyLock;

/// The running tasks changed at or before the cutoff, their last step end, and whether one of them
/// waits on purpose: one read, however many tasks wait.
static STALLED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {TASK_COLUMNS}, since FROM (
            SELECT t.*, max(t.updated_at, coalesce(
                       (SELECT max(s.updated_at) FROM steps s
                         WHERE s.task_id = t.id AND s.state NOT IN ('pending', 'processing')), 0)) AS since
              FROM tasks t
             WHERE t.state = 'running' AND t.updated_at <= ?1
               AND NOT EXISTS (SELECT 1 FROM steps s
                                WHERE s.task_id = t.id AND s.state IN ('pending', 'processing')
                                  AND s.kind IN ('wait', 'sub_workflow'))
         )
         WHERE since <= ?1
         ORDER BY since, id
         LIMIT ?2"
    )
});

pub fn find(c: &Connection, p: &StalledTasks) -> Result<Vec<StalledTask>, StoreError> {
    let mut st = c.prepare_cached(&STALLED).map_err(map_err)?;
    let rows = st
        .query_map(params![p.cutoff.0, p.limit], |r| {
            Ok(StalledTask { task: task(r)?, since: Timestamp(r.get(TASK_COLUMN_COUNT)?) })
        })
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map_err)
}
