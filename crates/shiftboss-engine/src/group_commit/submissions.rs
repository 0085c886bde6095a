//! Submissions grouped: `submit_tasks` writes the batch. It is all or none, so a batch refused
//! for one task's sake (a key that conflicts, a workflow that does not exist) is written again
//! one task at a time, and each caller gets its own answer; when the store is out of reach, every
//! caller of the batch gets that error, as it would have alone. `Engine::submit` checks each task
//! before it joins a queue, so that a bad one cannot send its batch the slow way.
//!
//! When remote workers' polls wait, the batch's transaction also runs their claims after the
//! submissions (see [`super::handoff`]).

use super::BatchWrite;
use super::handoff::{Handoff, Offer};
use crate::metrics::Metrics;
use async_trait::async_trait;
use shiftboss_core::InstanceId;
use shiftboss_store::{ClaimedStep, RecordReplies, Reply, ReplyResult, Store, StoreError, SubmitTask, Submitted};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Submissions {
    pub(crate) handoff: Arc<Handoff>,
    pub(crate) metrics: Arc<Metrics>,
    /// This process, the actor of a hand-back of steps whose poll had gone.
    pub(crate) instance: InstanceId,
}

#[async_trait]
impl BatchWrite for Submissions {
    type Item = SubmitTask;
    type Out = Submitted;

    async fn write(&self, store: &dyn Store, mut batch: Vec<SubmitTask>) -> Vec<Result<Submitted, StoreError>> {
        let offers = self.handoff.take();
        let written = match offers.is_empty() {
            true if batch.len() == 1 => return vec![store.submit_task(batch.remove(0)).await],
            true => store.submit_tasks(batch.clone()).await,
            false => with_claims(store, batch.clone(), offers, &self.metrics, &self.instance).await,
        };
        match written {
            Ok(done) => done.into_iter().map(Ok).collect(),
            // One task's refusal: each on its own, for its own answer.
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

/// The batch with the waiting polls' claims after it, each poll answered with what its claim
/// took (nothing when the transaction failed: the poll then claims on its own). Steps claimed for
/// a poll that has gone meanwhile are handed back at once.
async fn with_claims(
    store: &dyn Store,
    batch: Vec<SubmitTask>,
    offers: Vec<Offer>,
    metrics: &Metrics,
    instance: &InstanceId,
) -> Result<Vec<Submitted>, StoreError> {
    let claims = offers.iter().map(|o| o.claim.clone()).collect();
    match store.submit_tasks_and_claim(batch, claims).await {
        Ok(done) => {
            let handed: usize = done.claimed.iter().map(Vec::len).sum();
            Metrics::add(&metrics.handed_off, handed as u64);
            let mut unreached = Vec::new();
            for (offer, steps) in
                offers.into_iter().zip(done.claimed.into_iter().chain(std::iter::repeat_with(Vec::new)))
            {
                unreached.extend(offer.answer(steps));
            }
            if !unreached.is_empty() {
                hand_back(store, instance, unreached).await;
            }
            Ok(done.submitted)
        }
        Err(e) => {
            for offer in offers {
                // Nothing was claimed for it: nothing comes back.
                let _ = offer.answer(Vec::new());
            }
            Err(e)
        }
    }
}

/// Hands steps claimed for a poll that went away (its worker's request ended) back to the queue at
/// once, fenced by their lease tokens, instead of leaving them to lapse at complete-by. A failed
/// hand-back leaves them to lapse, as before.
async fn hand_back(store: &dyn Store, instance: &InstanceId, steps: Vec<ClaimedStep>) {
    let n = steps.len();
    let replies = steps
        .into_iter()
        .map(|s| Reply { step_id: s.id, lease_token: s.lease_token, result: ReplyResult::Postponed(Duration::ZERO) })
        .collect();
    let p = RecordReplies { instance: instance.clone(), replies, policies: Default::default() };
    match store.record_replies(p).await {
        Ok(_) => tracing::debug!(steps = n, "a poll went away before its handed steps reached it; handed back"),
        Err(e) => tracing::warn!(
            steps = n,
            error = %e,
            "a poll went away before its handed steps reached it, and handing them back failed; they lapse at complete-by"
        ),
    }
}
