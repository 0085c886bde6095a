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
//! A write also rings this store's own subscribers in process, right after its COMMIT
//! ([`OwnRings`]), and its notification carries the store's nonce, which the store's own listeners
//! skip: a process hears its own writes at once and once, not again a round trip later. Each echo
//! cost every waiting poll and the scheduler a claim that found nothing, on the same cores as the
//! claim that took the work.
//!
//! The listening connection is not from the pool: it is held for as long as the subscription
//! lives. When it drops (a restart, `pg_terminate_backend`), it reconnects with backoff and rings
//! once on every reconnect, because notifications sent while it was away are lost. A server that
//! goes silent (a frozen primary, a cut network) ends nothing and sends nothing, so a connection
//! that heard nothing for a while asks the server for an answer, and reconnects (host by host,
//! finding a promoted standby) when none comes within the store's bound.

use crate::connect::Hosts;
use shiftboss_store::{Subscription, WakeFn};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

/// The channel of a schema's due-work notifications.
pub fn channel(schema: &str) -> String {
    format!("shiftboss_due_{schema}")
}

/// Sends the due-work notification in a transaction of its own, committed without waiting for its
/// WAL flush (a notification is lost in a crash anyway, so there is nothing to make durable): it
/// holds PostgreSQL's notification lock only for as long as the commit takes to write. Best effort,
/// like every wake-up: an error is logged, and listeners poll.
/// Its payload is the store's nonce (see [`OwnRings`]).
pub async fn ring_after_commit(client: &tokio_postgres::Client, channel: &str, nonce: &str) {
    let ring = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)";
    let text = tokio_postgres::types::Type::TEXT;
    // Typed: parsed, bound and run in one message, with no statement to prepare first.
    if let Err(e) = client.query_typed(ring, &[(&channel, text.clone()), (&nonce, text)]).await {
        tracing::debug!(error = %e, "due-work notification not sent");
    }
}

/// The due-work subscribers of one store (one process's), rung in process when a write of this
/// store that queued work has committed. The nonce, random per store, marks the notifications
/// this store sends, so that its listeners skip them. Notifications sent from inside a caller's
/// own transaction (`submit_task_in`) carry none: the store does not see that commit, so every
/// listener, its own included, hears it from the server.
pub struct OwnRings {
    nonce: String,
    wakes: Mutex<Vec<Weak<WakeFn>>>,
}

impl Default for OwnRings {
    fn default() -> Self {
        OwnRings { nonce: format!("{:016x}", fastrand::u64(..)), wakes: Mutex::default() }
    }
}

impl OwnRings {
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Rings every live subscriber.
    pub fn ring(&self) {
        let live: Vec<Arc<WakeFn>> = {
            let mut w = self.wakes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            w.retain(|x| x.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        // Outside the lock: a wake may subscribe or drop a subscription.
        for wake in live {
            wake();
        }
    }

    /// Adds a subscriber for as long as the returned handle lives.
    fn add(&self, wake: WakeFn) -> Arc<WakeFn> {
        let held = Arc::new(wake);
        let mut w = self.wakes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        w.retain(|x| x.strong_count() > 0);
        w.push(Arc::downgrade(&held));
        held
    }
}

/// Aborts a task when dropped, so that no listener outlives its subscription.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a LISTEN connection waits on its server.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// One host's connect (see `connect`).
    pub connect: Duration,
    /// How long it waits for the server's answer (to its LISTEN, and to the question below).
    pub answer: Duration,
    /// How long it stays quiet before it asks the server for an answer (a `SELECT 1`: one
    /// transaction each time, counted in an idle process's load).
    pub quiet: Duration,
}

/// Listens on `channel` and rings `wake` for every notification but those `own` sent, which it
/// rings in process at their commit. Without `own` (a channel that the store's writes do not ring
/// after their commit, such as the outbox's, notified by its trigger), every notification rings.
pub fn subscribe(
    config: tokio_postgres::Config,
    bounds: Bounds,
    hosts: Arc<Hosts>,
    channel: String,
    own: Option<&OwnRings>,
    wake: WakeFn,
) -> Subscription {
    let held = own.map(|o| o.add(wake.clone()));
    let nonce = own.map(|o| o.nonce.clone());
    let task = tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            if listen(&config, bounds, &hosts, &channel, nonce.as_deref(), &wake).await {
                backoff = Duration::from_millis(50);
            }
            // While no connection listens, notifications are lost: look once, then reconnect.
            wake();
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
    // Dropped together: the listener stops, and so do the in-process rings.
    let s = Subscription::new((AbortOnDrop(task), held));
    if own.is_some() { s.ringing_own_writes() } else { s }
}

/// Listens until the connection ends. True if it got as far as listening.
async fn listen(
    config: &tokio_postgres::Config,
    bounds: Bounds,
    hosts: &Hosts,
    channel: &str,
    own: Option<&str>,
    wake: &WakeFn,
) -> bool {
    let Ok((client, mut connection)) = crate::connect::connect(config, bounds.connect, hosts).await else {
        return false;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    // The connection must be driven for LISTEN to run and for notifications to arrive.
    let own = own.map(str::to_owned);
    let _driver = AbortOnDrop(tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                // This store's own write: its subscribers were rung at its commit.
                Some(Ok(AsyncMessage::Notification(n))) if own.as_deref() == Some(n.payload()) => {}
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
    let listen = format!("LISTEN \"{channel}\"");
    if !matches!(tokio::time::timeout(bounds.answer, client.batch_execute(&listen)).await, Ok(Ok(()))) {
        return false;
    }
    // Listening now: anything that became due before this point is found by one look.
    wake();
    loop {
        tokio::select! {
            rung = rx.recv() => match rung {
                Some(()) => wake(),
                None => return true,
            },
            () = tokio::time::sleep(bounds.quiet) => {
                let asked = tokio::time::timeout(bounds.answer, client.simple_query("SELECT 1")).await;
                if !matches!(asked, Ok(Ok(_))) {
                    hosts.suspect(config);
                    tracing::warn!(channel, "a listening connection's server did not answer; reconnecting");
                    return true;
                }
            }
        }
    }
}
