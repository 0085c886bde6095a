//! What the server says of its replication (issue 26): whether a commit waits for a standby.

use crate::rows::get;
use crate::tx::Conn;
use shiftboss_store::{Replication, StoreError};

/// One statement. `pg_stat_replication` lists the standbys streaming from this server; its
/// `sync_state` is readable with `pg_monitor` (or as a superuser) only, and NULL otherwise, in
/// which case no standby counts as synchronous and the warning errs on the side of telling.
pub async fn read(c: Conn<'_>) -> Result<Replication, StoreError> {
    let row = c
        .query_one(
            "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
                    (SELECT count(*) FROM pg_stat_replication)::int,
                    (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int",
            &[],
        )
        .await?;
    Ok(Replication {
        synchronous_commit: get(&row, 0)?,
        synchronous_standby_names: get(&row, 1)?,
        standbys: crate::rows::count(&row, 2, "pg_stat_replication")?,
        synchronous_standbys: crate::rows::count(&row, 3, "pg_stat_replication.sync_state")?,
    })
}
