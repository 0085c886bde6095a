//! LISTEN/NOTIFY: a write that queues work sends `pg_notify` on the schema's channel, and each
//! subscriber keeps one connection that LISTENs and rings its bell on every notification.
//!
//! The store's own writes notify right after their COMMIT, in a statement of its own pipelined
//! behind it ([`ring_after_commit`]), not inside the transaction: PostgreSQL serialises the
//! commits of notifying transactions on one lock held until the commit is flushed, so with the
//! NOTIFY inside, concurrent writes could not share a WAL flush (measured: 64 submitting clients
//! spent most of their time waiting on that lock, one fsync per submission). The notification is a
//! wake-up, not state: the work is in the tables, so a crash between the two only delays it until
//! the listeners' poll. A caller's own transaction (`submit_task_in`, `enqueue_jobs_in`) still
//! notifies inside it, since the store does not see its commit.
//!
//! The listening connection is not from the pool: it is held for as long as the subscription
//! lives. When it drops (a restart, `pg_terminate_backend`), it reconnects with backoff and rings
//! once on every reconnect, because notifications sent while it was away are lost.

use shiftboss_store::{Subscription, WakeFn};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

/// The channel of a schema's due-work notifications.
pub fn channel(schema: &str) -> String {
    format!("shiftboss_due_{schema}")
}

/// Sends the due-work notification in a transaction of its own, committed without waiting for its
/// WAL flush (a notification is lost in a crash anyway, so there is nothing to make durable): it
/// holds PostgreSQL's notification lock only for as long as the commit takes to write. Best effort,
/// like every wake-up: an error is logged, and listeners poll.
pub async fn ring_after_commit(client: &tokio_postgres::Client, channel: &str) {
    let ring = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')";
    // Typed: parsed, bound and run in one message, with no statement to prepare first.
    if let Err(e) = client.query_typed(ring, &[(&channel, tokio_postgres::types::Type::TEXT)]).await {
        tracing::debug!(error = %e, "due-work notification not sent");
    }
}

/// Aborts a task when dropped, so that no listener outlives its subscription.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub fn subscribe(config: tokio_postgres::Config, channel: String, wake: WakeFn) -> Subscription {
    let task = tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            if listen(&config, &channel, &wake).await {
                backoff = Duration::from_millis(50);
            }
            // While no connection listens, notifications are lost: look once, then reconnect.
            wake();
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
    Subscription::new(AbortOnDrop(task))
}

/// Listens until the connection ends. True if it got as far as listening.
async fn listen(config: &tokio_postgres::Config, channel: &str, wake: &WakeFn) -> bool {
    let Ok((client, mut connection)) = config.connect(NoTls).await else { return false };
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    // The connection must be driven for LISTEN to run and for notifications to arrive.
    let _driver = AbortOnDrop(tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => {
                    if tx.send(()).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    }));
    if client.batch_execute(&format!("LISTEN \"{channel}\"")).await.is_err() {
        return false;
    }
    // Listening now: anything that became due before this point is found by one look.
    wake();
    while rx.recv().await.is_some() {
        wake();
    }
    true
}
