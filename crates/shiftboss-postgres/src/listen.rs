//! LISTEN/NOTIFY: a transaction that makes work due now sends `pg_notify` on the schema's channel
//! just before it commits (PostgreSQL delivers it only if the commit succeeds); each subscriber
//! keeps one connection that LISTENs and rings its bell on every notification.
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
