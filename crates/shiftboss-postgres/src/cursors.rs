//! Named cursors on the event log (see `shiftboss_store::cursors`).

use crate::rows::get;
use crate::tx::{Conn, Tx};
use shiftboss_store::StoreError;

pub async fn read(c: Conn<'_>, name: &str) -> Result<Option<i64>, StoreError> {
    c.query_opt("SELECT position FROM cursors WHERE name = $1", &[&name]).await?.as_ref().map(|r| get(r, 0)).transpose()
}

pub async fn advance(t: &Tx<'_>, name: &str, to: i64) -> Result<(), StoreError> {
    t.execute(
        "INSERT INTO cursors (name, position, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
         WHERE excluded.position > cursors.position",
        &[&name, &to, &t.now.0],
    )
    .await?;
    Ok(())
}
