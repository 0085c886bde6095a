//! Group commit for single submissions.
//!
//! An application (or the HTTP API) submits one task per call, and a submission in a transaction
//! of its own costs a commit: on PostgreSQL a WAL flush and its round trips, on SQLite a turn at
//! the single writer. Under many concurrent callers those commits, not the rows, bound the
//! throughput. So a few writers take every submission waiting when they are free and write them
//! with `Store::submit_tasks`, one transaction for all: while one batch commits, the next one
//! gathers. Nobody waits for a batch to fill: a lone submission is written at once, alone.
//!
//! Each submission keeps its own outcome. `submit_tasks` is all or none, so when a batch is
//! refused for one task's sake (a key that conflicts, a workflow that does not exist), the batch
//! is written again one task at a time and each caller gets its own answer. When the store is out
//! of reach, every caller of the batch gets that error, as it would have alone.

use crate::metrics::Metrics;
use shiftboss_store::{Store, StoreError, SubmitTask, Submitted};
use std::sync::{Arc, Weak};
use tokio::sync::{Mutex, mpsc, oneshot};

/// How single submissions are grouped (see the module's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitConfig {
    /// Batches written at once, each in its own transaction; by default the store's
    /// `concurrent_writes` (1 on SQLite, up to 4 on PostgreSQL). 0 turns grouping off: each
    /// submission is its own transaction.
    pub writers: Option<usize>,
    /// The most submissions in one batch.
    pub max_batch: usize,
}

impl Default for SubmitConfig {
    fn default() -> Self {
        SubmitConfig { writers: None, max_batch: 512 }
    }
}

type Answer = oneshot::Sender<Result<Submitted, StoreError>>;

/// The queue in front of the writers, started by the first submission (it needs the runtime).
pub(crate) struct Submitter {
    queue: mpsc::UnboundedSender<(SubmitTask, Answer)>,
}

impl Submitter {
    /// Starts `writers` writers (at least one).
    pub(crate) fn start(store: Arc<dyn Store>, writers: usize, max_batch: usize, metrics: Arc<Metrics>) -> Submitter {
        let (queue, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        let max_batch = max_batch.clamp(1, shiftboss_store::MAX_SUBMIT_BATCH);
        // The writers hold the store weakly: it closes when the engine and its other users let it
        // go, not when a writer task gets round to ending.
        for _ in 0..writers.max(1) {
            tokio::spawn(write_batches(Arc::downgrade(&store), waiting.clone(), max_batch, metrics.clone()));
        }
        Submitter { queue }
    }

    /// Queues a submission and waits for its batch's outcome. The task comes back as `Err` when
    /// the writers are gone (their runtime shut down), for the caller to write it itself.
    pub(crate) async fn submit(&self, task: SubmitTask) -> Result<Result<Submitted, StoreError>, SubmitTask> {
        let (answer, outcome) = oneshot::channel();
        if let Err(mpsc::error::SendError((task, _))) = self.queue.send((task, answer)) {
            return Err(task);
        }
        // A writer that vanished mid-batch (its runtime stopped) leaves the outcome unknown: the
        // task may be written. Submitting again with the same key is safe and tells.
        Ok(outcome.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable("the submission was interrupted; submit it again with the same key".into()))
        }))
    }
}

/// One writer: takes what waits (at least one), writes it, answers, again. Ends when the engine,
/// which holds the queue's sender, is gone.
async fn write_batches(
    store: Weak<dyn Store>,
    waiting: Arc<Mutex<mpsc::UnboundedReceiver<(SubmitTask, Answer)>>>,
    max_batch: usize,
    metrics: Arc<Metrics>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    loop {
        {
            let mut rx = waiting.lock().await;
            if rx.recv_many(&mut batch, max_batch).await == 0 {
                return;
            }
        }
        let Some(store) = store.upgrade() else { return };
        Metrics::add(&metrics.submit_batches, 1);
        Metrics::add(&metrics.submitted, batch.len() as u64);
        write(&*store, std::mem::take(&mut batch)).await;
    }
}

async fn write(store: &dyn Store, batch: Vec<(SubmitTask, Answer)>) {
    if let [_] = batch.as_slice() {
        let (task, answer) = batch.into_iter().next().expect("one");
        let _ = answer.send(store.submit_task(task).await);
        return;
    }
    let tasks = batch.iter().map(|(t, _)| t.clone()).collect();
    match store.submit_tasks(tasks).await {
        Ok(done) => {
            for ((_, answer), s) in batch.into_iter().zip(done) {
                let _ = answer.send(Ok(s));
            }
        }
        // Refused for some task's sake: each on its own, so that only that one is refused.
        Err(StoreError::Conflict(_) | StoreError::InvalidInput(_) | StoreError::NotFound { .. }) => {
            for (task, answer) in batch {
                let _ = answer.send(store.submit_task(task).await);
            }
        }
        Err(e) => {
            for (_, answer) in batch {
                let _ = answer.send(Err(e.clone()));
            }
        }
    }
}
