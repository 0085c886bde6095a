//! A write transaction on a pooled connection, opened and ended in as few round trips as the
//! protocol allows: BEGIN and the clock's read go in one message, and the transaction's last
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
use tokio_postgres::{Client, SimpleQueryMessage};

/// A write transaction in progress on a connection of the pool.
pub struct WriteConn {
    /// The connection; `None` once it was taken out of the pool.
    obj: Option<Object>,
    /// True from BEGIN until COMMIT or ROLLBACK succeeded.
    open: bool,
}

impl WriteConn {
    /// Begins a READ COMMITTED transaction and reads the store's time with it.
    pub async fn begin(obj: Object, clock: &Clock) -> Result<(WriteConn, Timestamp), StoreError> {
        let w = WriteConn { obj: Some(obj), open: true };
        let now = match clock {
            Clock::Manual(m) => {
                w.client()?.batch_execute("BEGIN").await.map_err(map_err)?;
                m.now()
            }
            Clock::Database => {
                let messages = w.client()?.simple_query(BEGIN_AND_NOW).await.map_err(map_err)?;
                let row = messages.iter().find_map(|m| match m {
                    SimpleQueryMessage::Row(r) => Some(r),
                    _ => None,
                });
                let text = row.and_then(|r| r.get(0)).ok_or_else(|| {
                    StoreError::Backend(format!("the clock's read ({DB_NOW_EXPR}) returned no value"))
                })?;
                Timestamp(text.parse().map_err(|e| StoreError::Backend(format!("the clock's read {text:?}: {e}")))?)
            }
        };
        Ok((w, now))
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
