//! Group commit: concurrent single writes (submissions, remote workers' replies) written a batch
//! per transaction.
//!
//! An application (or the HTTP API) submits one task per call, and a remote worker answers for
//! one step per call; each in a transaction of its own costs a commit: on PostgreSQL a WAL flush
//! and its round trips, on SQLite a turn at the single writer. Under many concurrent callers
//! those commits, not the rows, bound the throughput. So a few writers take every write waiting
//! when they are free and write them together, one transaction for all: while one batch commits,
//! the next one gathers. Nobody waits for a batch to fill: a lone write goes at once, alone.
//! Each write keeps its own outcome (see [`submissions`] and [`replies`] for how).
//!
//! A writer that finds a few writes waiting while another batch commits does not rush them into
//! a transaction of their own: it keeps gathering until that batch ends (whose callers come back
//! with their next writes) or until it holds as many as the batch in flight. Under a steady crowd
//! of callers the batches grow instead of the transactions, and each write costs less of the
//! database; a crowd bigger than one batch in flight can carry still has several written at once.

pub mod handoff;
mod in_flight;
pub(crate) mod replies;
pub(crate) mod submissions;

use crate::metrics::Metrics;
use async_trait::async_trait;
use in_flight::InFlight;
use shiftboss_store::{Store, StoreError};
use std::sync::{Arc, Weak};
use tokio::sync::{Mutex, mpsc, oneshot};

/// How single submissions are grouped (see the module's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitConfig {
    /// Batches written at once, each in its own transaction; by default the store's
    /// `concurrent_writes` (1 on SQLite, up to 4 on PostgreSQL). 0 turns grouping off: each
    /// submission is its own transaction (and each remote reply).
    pub writers: Option<usize>,
    /// The most submissions (or replies) in one batch.
    pub max_batch: usize,
}

impl Default for SubmitConfig {
    fn default() -> Self {
        SubmitConfig { writers: None, max_batch: 512 }
    }
}

/// How one kind of write is written as a batch: one outcome per item, in their order.
#[async_trait]
pub(crate) trait BatchWrite: Send + Sync + 'static {
    type Item: Send + 'static;
    type Out: Send + 'static;

    async fn write(&self, store: &dyn Store, batch: Vec<Self::Item>) -> Vec<Result<Self::Out, StoreError>>;

    /// Counts a batch of `n` in the engine's metrics.
    fn count(&self, metrics: &Metrics, n: usize);
}

type Answer<O> = oneshot::Sender<Result<O, StoreError>>;
type Waiting<W> = Arc<Mutex<mpsc::UnboundedReceiver<(<W as BatchWrite>::Item, Answer<<W as BatchWrite>::Out>)>>>;

/// The queue in front of the writers, started by the first write (it needs the runtime).
pub(crate) struct GroupCommit<W: BatchWrite> {
    queue: mpsc::UnboundedSender<(W::Item, Answer<W::Out>)>,
}

impl<W: BatchWrite> GroupCommit<W> {
    /// Starts `writers` writers (at least one).
    pub(crate) fn start(
        store: &Arc<dyn Store>,
        writers: usize,
        max_batch: usize,
        metrics: Arc<Metrics>,
        how: W,
    ) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        let how = Arc::new(how);
        let max_batch = max_batch.clamp(1, shiftboss_store::MAX_SUBMIT_BATCH);
        let in_flight = Arc::new(InFlight::default());
        // The writers hold the store weakly: it closes when the engine and its other users let it
        // go, not when a writer task gets round to ending.
        for _ in 0..writers.max(1) {
            let job = write_batches(
                Arc::downgrade(store),
                waiting.clone(),
                in_flight.clone(),
                max_batch,
                metrics.clone(),
                how.clone(),
            );
            tokio::spawn(job);
        }
        GroupCommit { queue }
    }

    /// Queues a write and waits for its batch's outcome. The item comes back as `Err` when the
    /// writers are gone (their runtime shut down), for the caller to write it itself.
    pub(crate) async fn send(&self, item: W::Item) -> Result<Result<W::Out, StoreError>, W::Item> {
        let (answer, outcome) = oneshot::channel();
        if let Err(mpsc::error::SendError((item, _))) = self.queue.send((item, answer)) {
            return Err(item);
        }
        // A writer that vanished mid-batch (its runtime stopped) leaves the outcome unknown: the
        // write may have committed. Both kinds are safe to send again: a submission by its key, a
        // reply by its lease token.
        Ok(outcome.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable("the write was interrupted; send it again (it is idempotent)".into()))
        }))
    }
}

/// One writer: takes what waits (at least one), writes it, answers, again. Ends when the engine,
/// which holds the queue's sender, is gone.
async fn write_batches<W: BatchWrite>(
    store: Weak<dyn Store>,
    waiting: Waiting<W>,
    in_flight: Arc<InFlight>,
    max_batch: usize,
    metrics: Arc<Metrics>,
    how: Arc<W>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    loop {
        {
            let mut rx = waiting.lock().await;
            if rx.recv_many(&mut batch, max_batch).await == 0 {
                return;
            }
            if !in_flight.gather(&mut rx, &mut batch, max_batch).await {
                return;
            }
        }
        let Some(store) = store.upgrade() else { return };
        how.count(&metrics, batch.len());
        let (items, answers): (Vec<_>, Vec<_>) = std::mem::take(&mut batch).into_iter().unzip();
        let _writing = in_flight.writing(items.len());
        let outcomes = how.write(&*store, items).await;
        debug_assert_eq!(outcomes.len(), answers.len());
        for (answer, outcome) in answers.into_iter().zip(outcomes) {
            let _ = answer.send(outcome);
        }
    }
}
