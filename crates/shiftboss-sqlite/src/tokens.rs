//! API tokens (issue 16): one row per token, found by its secret's hash.

use crate::error::map_err;
use crate::rows::parsed;
use crate::tx::Tx;
use rusqlite::{Connection, OptionalExtension, params};
use shiftboss_core::Timestamp;
use shiftboss_store::{ApiToken, NewApiToken, StoreError};

const COLUMNS: &str = "id, name, scopes, created_at, revoked_at";

fn token(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiToken> {
    Ok(ApiToken {
        id: r.get(0)?,
        name: r.get(1)?,
        scopes: parsed(r, 2, "api_tokens.scopes")?,
        created_at: Timestamp(r.get(3)?),
        revoked_at: r.get::<_, Option<i64>>(4)?.map(Timestamp),
    })
}

/// One statement: the unique indexes (live name, hash) refuse a duplicate, and DO NOTHING turns
/// that into no row, a `Conflict`, rather than a constraint error.
pub fn create(t: &Tx<'_>, p: &NewApiToken) -> Result<ApiToken, StoreError> {
    let id: Option<i64> =
        t.tx.query_row(
            "INSERT INTO api_tokens (name, scopes, secret_hash, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO NOTHING RETURNING id",
            params![p.name, p.scopes.to_string(), p.secret_hash, t.now.0],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    let Some(id) = id else { return Err(conflict(p)) };
    Ok(ApiToken { id, name: p.name.clone(), scopes: p.scopes, created_at: t.now, revoked_at: None })
}

/// What a refused token is told. Its name is taken by a live token: a repeated secret, the other
/// way to be refused, is as good as impossible (256 random bits).
fn conflict(p: &NewApiToken) -> StoreError {
    StoreError::Conflict(format!("a live API token named {:?} exists; revoke it first or pick another name", p.name))
}

pub fn find(c: &Connection, secret_hash: &str) -> Result<Option<ApiToken>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE secret_hash = ?1 AND revoked_at IS NULL");
    c.prepare_cached(&sql).map_err(map_err)?.query_row([secret_hash], token).optional().map_err(map_err)
}

pub fn list(c: &Connection) -> Result<Vec<ApiToken>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY id");
    let mut st = c.prepare_cached(&sql).map_err(map_err)?;
    let rows = st.query_map([], token).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

pub fn revoke(t: &Tx<'_>, name: &str) -> Result<bool, StoreError> {
    let n = t
        .tx
        .execute("UPDATE api_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL", params![name, t.now.0])
        .map_err(map_err)?;
    Ok(n > 0)
}
