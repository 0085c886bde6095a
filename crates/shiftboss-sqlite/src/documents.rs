//! Documents the API keeps beside the definitions (see `shiftboss_store::documents`).

use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use shiftboss_store::StoreError;
use shiftboss_store::documents::{DocumentKind, MAX_DOCUMENTS_LISTED};

pub fn put(t: &Tx<'_>, kind: DocumentKind, docs: &[(String, Value)]) -> Result<(), StoreError> {
    let mut st =
        t.tx.prepare_cached(
            "INSERT INTO documents (kind, name, body, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (kind, name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        )
        .map_err(map_err)?;
    for (name, body) in docs {
        st.execute(params![kind.as_str(), name, body.to_string(), t.now.0]).map_err(map_err)?;
    }
    Ok(())
}

pub fn list(c: &Connection, kind: DocumentKind) -> Result<Vec<(String, Value)>, StoreError> {
    let mut st =
        c.prepare_cached("SELECT name, body FROM documents WHERE kind = ?1 ORDER BY name LIMIT ?2").map_err(map_err)?;
    let rows = st
        .query_map(params![kind.as_str(), MAX_DOCUMENTS_LISTED], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(map_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (name, body) = row.map_err(map_err)?;
        out.push((name, parse(&body)?));
    }
    Ok(out)
}

pub fn get(c: &Connection, kind: DocumentKind, name: &str) -> Result<Option<Value>, StoreError> {
    let body: Option<String> = c
        .prepare_cached("SELECT body FROM documents WHERE kind = ?1 AND name = ?2")
        .map_err(map_err)?
        .query_row(params![kind.as_str(), name], |r| r.get(0))
        .optional()
        .map_err(map_err)?;
    body.as_deref().map(parse).transpose()
}

pub fn delete(t: &Tx<'_>, kind: DocumentKind, name: &str) -> Result<bool, StoreError> {
    let n =
        t.tx.prepare_cached("DELETE FROM documents WHERE kind = ?1 AND name = ?2")
            .map_err(map_err)?
            .execute(params![kind.as_str(), name])
            .map_err(map_err)?;
    Ok(n > 0)
}

fn parse(body: &str) -> Result<Value, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Backend(format!("documents.body is not JSON: {e}")))
}
