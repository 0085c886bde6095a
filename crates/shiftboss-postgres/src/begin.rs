//! A write transaction on a pooled connection, opened and ended in as few round trips as the
//! protocol allows: BEGIN and the clock's read go in one message (with, for submissions, the
//! newest versions of the workflows they run behind it, in the same write), and the transaction's last
//! statements are sent together with its COMMIT (see `Tx::finish_with`). tokio-postgres's own
//! `Transaction` sends BEGIN alone and waits for it, a round trip of its own on every write.
//!
//! A transaction that is neither committed nor rolled back (its future dropped mid-flight, or a
//! ROLLBACK that failed) takes its connection out of the pool and closes it, so the server rolls it
//! back and no later caller can run inside it.

use crate::error::map_err;
use crate::tx::{BEGIN_AND_NOW, DB_NOW_EXPR};
use deadpool_postgres::{Object, StatementCache};
use shiftboss_core::Timestamp;
use shiftboss_store::{Clock, StoreError};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, SimpleQueryMessage};

/// A write transaction in progress on a connection of the pool.
pub struct WriteConn {
    /// The connection; `None` once it was taken out of the pool.
    obj: Option<Object>,
    /// True from BEGIN until COMMIT or ROLLBACK succeeded.
    open: bool,
}

impl WriteConn {
    /// Begins a READ COMMITTED transaction and reads the store's time with it; and, in the same
    /// round trip, the newest registered version of each of `workflows` (those a submission runs
    /// when it names no version): sent right behind the BEGIN, that read runs inside the
    /// transaction, as a lookup after it would, without a round trip of its own. Workflows with
    /// no version are left out.
    pub async fn begin(
        obj: Object,
        clock: &Clock,
        workflows: &[&str],
    ) -> Result<(WriteConn, Timestamp, Vec<(String, u32)>), StoreError> {
        let w = WriteConn { obj: Some(obj), open: true };
        let client = w.client()?;
        let begin = async {
            match clock {
                Clock::Manual(m) => {
                    client.batch_execute("BEGIN").await.map_err(map_err)?;
                    Ok(m.now())
                }
                Clock::Database => {
                    let messages = client.simple_query(BEGIN_AND_NOW).await.map_err(map_err)?;
                    let row = messages.iter().find_map(|m| match m {
                        SimpleQueryMessage::Row(r) => Some(r),
                        _ => None,
                    });
                    let text = row.and_then(|r| r.get(0)).ok_or_else(|| {
                        StoreError::Backend(format!("the clock's read ({DB_NOW_EXPR}) returned no value"))
                    })?;
                    text.parse()
                        .map(Timestamp)
                        .map_err(|e| StoreError::Backend(format!("the clock's read {text:?}: {e}")))
                }
            }
        };
        let versions = async {
            if workflows.is_empty() {
                return Ok(Vec::new());
            }
            // Typed: parsed, bound and run in one message, with no statement to prepare first.
            let sql = "SELECT name, max(version) FROM workflows WHERE name = ANY($1) GROUP BY name";
            let rows = client.query_typed(sql, &[(&workflows, Type::TEXT_ARRAY)]).await.map_err(map_err)?;
            rows.iter()
                .map(|r| {
                    let version: i32 = r.try_get(1).map_err(map_err)?;
                    let version = u32::try_from(version)
                        .map_err(|_| StoreError::Backend(format!("workflows.version {version} is negative")))?;
                    Ok((r.try_get::<_, String>(0).map_err(map_err)?, version))
                })
                .collect::<Result<Vec<_>, StoreError>>()
        };
        // `join` polls in order, and tokio-postgres sends each request at its future's first
        // poll: the BEGIN goes first, the read behind it in the same write.
        let (now, versions) = futures_util::future::join(begin, versions).await;
        let now = now?;
        Ok((w, now, versions?))
    }

    pub fn client(&self) -> Result<&Client, StoreError> {
        self.obj.as_deref().map(|c| &**c).ok_or_else(|| StoreError::Backend("the connection was closed".into()))
    }

    pub fn cache(&self) -> Option<&StatementCache> {
        self.obj.as_deref().map(|c| &*c.statement_cache)
    }

    /// The COMMIT itself: what `Tx::finish_with` sends after the transaction's last statements.
    /// The caller marks the transaction [`WriteConn::ended`] when it succeeded.
    pub async fn commit(client: &Client) -> Result<(), StoreError> {
        client.batch_execute("COMMIT").await.map_err(map_err)
    }

    /// The transaction ended (committed): the connection goes back to the pool as it is.
    pub fn ended(&mut self) {
        self.open = false;
    }

    /// Rolls back after an error. A rollback that fails leaves the connection to be closed.
    pub async fn rollback(mut self) {
        if let Ok(c) = self.client()
            && c.batch_execute("ROLLBACK").await.is_ok()
        {
            self.open = false;
        }
    }
}

impl Drop for WriteConn {
    fn drop(&mut self) {
        if self.open
            && let Some(obj) = self.obj.take()
        {
            // Out of the pool, and dropped: the connection closes and the server rolls back.
            drop(Object::take(obj));
        }
    }
}
