//! Documents the API keeps beside the definitions (see `shiftboss_store::documents`).

use crate::rows::get;
use crate::tx::{Conn, Tx};
use serde_json::Value;
use shiftboss_store::StoreError;
use shiftboss_store::documents::{DocumentKind, MAX_DOCUMENTS_LISTED};

/// One statement for the whole list: its names and bodies as two arrays.
pub async fn put(t: &Tx<'_>, kind: DocumentKind, docs: &[(String, Value)]) -> Result<(), StoreError> {
    // A name twice in one put: the last one wins, as one at a time would leave it (one INSERT
    // cannot touch a row twice).
    let mut last = std::collections::BTreeMap::new();
    for (name, body) in docs {
        last.insert(name.as_str(), body.to_string());
    }
    let names: Vec<&str> = last.keys().copied().collect();
    let bodies: Vec<String> = last.into_values().collect();
    t.execute(
        "INSERT INTO documents (kind, name, body, updated_at)
         SELECT $1, n, b, $4 FROM unnest($2::text[], $3::text[]) AS d(n, b)
         ON CONFLICT (kind, name) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        &[&kind.as_str(), &names, &bodies, &t.now.0],
    )
    .await?;
    Ok(())
}

pub async fn list(c: Conn<'_>, kind: DocumentKind) -> Result<Vec<(String, Value)>, StoreError> {
    let rows = c
        .query(
            "SELECT name, body FROM documents WHERE kind = $1 ORDER BY name LIMIT $2",
            &[&kind.as_str(), &i64::from(MAX_DOCUMENTS_LISTED)],
        )
        .await?;
    rows.iter().map(|r| Ok((get::<String>(r, 0)?, parse(get(r, 1)?)?))).collect()
}

pub async fn get_one(c: Conn<'_>, kind: DocumentKind, name: &str) -> Result<Option<Value>, StoreError> {
    let row = c.query_opt("SELECT body FROM documents WHERE kind = $1 AND name = $2", &[&kind.as_str(), &name]).await?;
    row.as_ref().map(|r| parse(get(r, 0)?)).transpose()
}

pub async fn delete(t: &Tx<'_>, kind: DocumentKind, name: &str) -> Result<bool, StoreError> {
    Ok(t.execute("DELETE FROM documents WHERE kind = $1 AND name = $2", &[&kind.as_str(), &name]).await? > 0)
}

fn parse(body: &str) -> Result<Value, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Backend(format!("documents.body is not JSON: {e}")))
}
