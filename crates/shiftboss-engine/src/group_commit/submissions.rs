//! Submissions grouped: `submit_tasks` writes the batch. It is all or none, so a batch refused
//! for one task's sake (a key that conflicts, a workflow that does not exist) is written again
//! one task at a time, and each caller gets its own answer; when the store is out of reach, every
//! caller of the batch gets that error, as it would have alone. `Engine::submit` checks each task
//! before it joins a queue, so that a bad one cannot send its batch the slow way.

use super::BatchWrite;
use crate::metrics::Metrics;
use async_trait::async_trait;
use shiftboss_store::{Store, StoreError, SubmitTask, Submitted};

pub(crate) struct Submissions;

#[async_trait]
impl BatchWrite for Submissions {
    type Item = SubmitTask;
    type Out = Submitted;

    async fn write(&self, store: &dyn Store, mut batch: Vec<SubmitTask>) -> Vec<Result<Submitted, StoreError>> {
        if batch.len() == 1 {
            return vec![store.submit_task(batch.remove(0)).await];
        }
        match store.submit_tasks(batch.clone()).await {
            Ok(done) => done.into_iter().map(Ok).collect(),
            Err(StoreError::Conflict(_) | StoreError::InvalidInput(_) | StoreError::NotFound { .. }) => {
                let mut out = Vec::with_capacity(batch.len());
                for task in batch {
                    out.push(store.submit_task(task).await);
                }
                out
            }
            Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn count(&self, metrics: &Metrics, n: usize) {
        Metrics::add(&metrics.submit_batches, 1);
        Metrics::add(&metrics.submitted, n as u64);
    }
}
