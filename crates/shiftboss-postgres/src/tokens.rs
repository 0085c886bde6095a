//! API tokens (issue 16): one row per token, found by its secret's hash. The same rules as the
//! SQLite store's `tokens.rs`.

use crate::rows::{get, parsed};
use crate::tx::{Conn, Tx};
use shiftboss_core::Timestamp;
use shiftboss_store::{ApiToken, NewApiToken, StoreError};
use tokio_postgres::Row;

const COLUMNS: &str = "id, name, scopes, created_at, revoked_at";

fn token(r: &Row) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: get(r, 0)?,
        name: get(r, 1)?,
        scopes: parsed(r, 2, "api_tokens.scopes")?,
        created_at: Timestamp(get(r, 3)?),
        revoked_at: get::<Option<i64>>(r, 4)?.map(Timestamp),
    })
}

/// One statement: the unique indexes (live name, hash) refuse a duplicate, also against a
/// concurrent insert that has not committed (the insert waits for it), and DO NOTHING turns that
/// into no row, a `Conflict`, rather than an error that would abort the transaction.
pub async fn create(t: &Tx<'_>, p: &NewApiToken) -> Result<ApiToken, StoreError> {
    let scopes = p.scopes.to_string();
    let row = t
        .query_opt(
            "INSERT INTO api_tokens (name, scopes, secret_hash, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING RETURNING id",
            &[&p.name, &scopes, &p.secret_hash, &t.now.0],
        )
        .await?;
    let Some(row) = row else {
        // A repeated secret, the other way to be refused, is as good as impossible (256 random bits).
        return Err(StoreError::Conflict(format!(
            "a live API token named {:?} exists; revoke it first or pick another name",
            p.name
        )));
    };
    Ok(ApiToken { id: get(&row, 0)?, name: p.name.clone(), scopes: p.scopes, created_at: t.now, revoked_at: None })
}

pub async fn find(c: Conn<'_>, secret_hash: &str) -> Result<Option<ApiToken>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE secret_hash = $1 AND revoked_at IS NULL");
    c.query_opt(&sql, &[&secret_hash]).await?.as_ref().map(token).transpose()
}

pub async fn list(c: Conn<'_>) -> Result<Vec<ApiToken>, StoreError> {
    c.query(&format!("SELECT {COLUMNS} FROM api_tokens ORDER BY id"), &[]).await?.iter().map(token).collect()
}

pub async fn revoke(t: &Tx<'_>, name: &str) -> Result<bool, StoreError> {
    let n = t
        .execute("UPDATE api_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL", &[&name, &t.now.0])
        .await?;
    Ok(n > 0)
}
