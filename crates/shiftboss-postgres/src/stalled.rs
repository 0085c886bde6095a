//! Running tasks without progress since a cutoff (see `shiftboss_store::stalled`), in one statement.

use crate::rows::{TASK_COLUMN_COUNT, TASK_COLUMNS, get, task};
use crate::tx::Conn;
use shiftboss_core::Timestamp;
use shiftboss_store::{StalledTask, StalledTasks, StoreError};
use std::sync::LazyLock;

/// The running tasks changed at or before the cutoff (`tasks_stale`), their last step end, and
/// whether one of them waits on purpose: one read, however many tasks wait.
static STALLED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {TASK_COLUMNS}, since FROM (
            SELECT t.*, greatest(t.updated_at, coalesce(
                       (SELECT max(s.updated_at) FROM steps s
                         WHERE s.task_id = t.id AND s.state NOT IN ('pending', 'processing')), 0)) AS since
              FROM tasks t
             WHERE t.state = 'running' AND t.updated_at <= $1
               AND NOT EXISTS (SELECT 1 FROM steps s
                                WHERE s.task_id = t.id AND s.state IN ('pending', 'processing')
                                  AND s.kind IN ('wait', 'sub_workflow'))
         ) stalled
         WHERE since <= $1
         ORDER BY since, id
         LIMIT $2"
    )
});

pub async fn find(c: Conn<'_>, p: &StalledTasks) -> Result<Vec<StalledTask>, StoreError> {
    let rows = c.query(STALLED.as_str(), &[&p.cutoff.0, &i64::from(p.limit)]).await?;
    rows.iter().map(|r| Ok(StalledTask { task: task(r)?, since: Timestamp(get(r, TASK_COLUMN_COUNT)?) })).collect()
}
