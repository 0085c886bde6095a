//! Named cursors on the event log (see `shiftboss_store::cursors`).

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{Connection, OptionalExtension, params};
use shiftboss_store::StoreError;

pub fn read(c: &Connection, name: &str) -> Result<Option<i64>, StoreError> {
    c.prepare_cached("SELECT position FROM cursors WHERE name = ?1")
        .map_err(map_err)?
        .query_row([name], |r| r.get(0))
        .optional()
        .map_err(map_err)
}

pub fn advance(t: &Tx<'_>, name: &str, to: i64) -> Result<(), StoreError> {
    t.tx.prepare_cached(
        "INSERT INTO cursors (name, position, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET position = excluded.position, updated_at = excluded.updated_at
         WHERE excluded.position > cursors.position",
    )
    .map_err(map_err)?
    .execute(params![name, to, t.now.0])
    .map_err(map_err)?;
    Ok(())
}
