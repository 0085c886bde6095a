//! Step heartbeats: a long-running agent reports progress, and each report moves its claim's
//! complete-by on by the step's response timeout (never past the step's timeout). The runtime's
//! own deadline follows, so the call is not dropped while it is still reporting.

use shiftboss_core::{LeaseToken, StepId, Timestamp};
use shiftboss_store::{ExtendLease, Store, StoreError};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// Handed to an agent with each call.
#[derive(Clone)]
pub struct Progress {
    deadline: watch::Receiver<Instant>,
    reporter: Option<Arc<Reporter>>,
}

struct Reporter {
    store: Arc<dyn Store>,
    step_id: StepId,
    lease_token: LeaseToken,
    /// The claim's start by the store's clock and by this process's, to turn complete-by into a deadline.
    claimed_at: Timestamp,
    claim_started: Instant,
    deadline: watch::Sender<Instant>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress").field("deadline", &*self.deadline.borrow()).finish()
    }
}

impl Progress {
    /// Progress for a claimed step.
    pub fn for_claim(
        store: Arc<dyn Store>,
        step_id: StepId,
        lease_token: LeaseToken,
        claimed_at: Timestamp,
        claim_started: Instant,
        deadline: Instant,
    ) -> Progress {
        let (tx, rx) = watch::channel(deadline);
        let reporter = Reporter { store, step_id, lease_token, claimed_at, claim_started, deadline: tx };
        Progress { deadline: rx, reporter: Some(Arc::new(reporter)) }
    }

    /// A fixed deadline with nowhere to report to (tests of agents and of the runtime).
    pub fn fixed(deadline: Instant) -> Progress {
        let (_tx, rx) = watch::channel(deadline);
        Progress { deadline: rx, reporter: None }
    }

    /// A deadline the test moves by hand.
    #[cfg(test)]
    pub fn manual(deadline: Instant) -> (Progress, watch::Sender<Instant>) {
        let (tx, rx) = watch::channel(deadline);
        (Progress { deadline: rx, reporter: None }, tx)
    }

    /// When the runtime drops the call, on this process's clock.
    pub fn deadline(&self) -> Instant {
        *self.deadline.borrow()
    }

    /// Reports progress; returns the new complete-by. A `Conflict` means the claim was lost (it
    /// lapsed, or the task was cancelled): the agent should stop, its reply will be refused.
    pub async fn report(&self) -> Result<Timestamp, StoreError> {
        self.send(None).await
    }

    /// Reports progress with what the agent says of its work so far (JSON, such as
    /// `{"copied": 3400, "of": 10000}`): kept on the step, shown by the API and the console, and
    /// handed to the step's next attempt with its claim. Otherwise as [`Progress::report`].
    pub async fn report_with(&self, progress: serde_json::Value) -> Result<Timestamp, StoreError> {
        self.send(Some(progress)).await
    }

    async fn send(&self, progress: Option<serde_json::Value>) -> Result<Timestamp, StoreError> {
        let Some(r) = &self.reporter else {
            return Err(StoreError::Conflict("this call has no claim to report progress on".into()));
        };
        let at = r.store.extend_lease(ExtendLease { step_id: r.step_id, lease_token: r.lease_token, progress }).await?;
        // Measured from before the claim was sent, so this side never outlives the store's complete-by.
        r.deadline.send_replace(r.claim_started + at.since(r.claimed_at));
        Ok(at)
    }
}
