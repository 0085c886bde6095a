//! The handoff: a remote worker's poll that waits for work offers its claim to the next
//! submissions' transaction, which runs it after the submissions (`Store::submit_tasks_and_claim`)
//! and hands the claimed steps to the poll after its commit. Without it, a new step reached a
//! waiting poll in two commits: the submission's, then the claim of the poll it rang. Only on
//! stores where that pays (`Store::hands_off_claims`: SQLite, where a claim of its own is another
//! turn at the one writer; on PostgreSQL the claim before the COMMIT delayed the submission more
//! than it sped the pickup).
//!
//! The claim is the store's own claim verb, run in another transaction, not a shortcut: it takes
//! what is due for the poll's agent types and domains, highest priority first, within the poll's
//! capacity, fenced and recorded as any claim. Offers come only from claims whose agent types have
//! no concurrency or rate limit (those lock the limits' rows, which submissions must not queue
//! behind). A writer takes one offer per set of agent types and domains, the oldest: one claim
//! takes all that is due for them up to its capacity, and the others of that set would find
//! nothing.
//!
//! A poll that stops waiting (its store ring, its due time, its deadline) takes its offer back; if
//! a writer had taken it, the poll waits for that writer's answer instead, so that steps claimed
//! for it are handed out, not dropped. A poll whose HTTP request ended (the worker went away)
//! after a writer took its offer is found gone when the writer answers it: the writer hands the
//! steps claimed for it back to the queue at once (a postponement of 0, fenced by their tokens).
//! What is still lost is a poll that goes after it took its steps and before its HTTP answer left:
//! those come back when their lease lapses at complete-by, as for any claim whose answer was lost.

use shiftboss_store::{ClaimDueSteps, ClaimedStep};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The offers of waiting polls.
#[derive(Default)]
pub(crate) struct Handoff {
    offers: Mutex<Vec<Offer>>,
    next_id: AtomicU64,
}

/// A waiting poll's claim, and where its steps go.
pub(crate) struct Offer {
    id: u64,
    pub(crate) claim: ClaimDueSteps,
    answer: oneshot::Sender<Vec<ClaimedStep>>,
}

impl Offer {
    /// Hands the claimed steps to the poll; gives them back when the poll has gone, for the
    /// writer to return to the queue (see the module's text).
    #[must_use = "steps a poll did not take must be handed back"]
    pub(crate) fn answer(self, steps: Vec<ClaimedStep>) -> Vec<ClaimedStep> {
        self.answer.send(steps).err().unwrap_or_default()
    }
}

impl Handoff {
    /// Offers a waiting poll's claim to the next submissions' transaction.
    pub(crate) fn offer(self: &Arc<Self>, claim: ClaimDueSteps) -> Offered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, handed) = oneshot::channel();
        self.lock().push(Offer { id, claim, answer });
        Offered { id, handoff: self.clone(), handed: Some(handed) }
    }

    /// What a writer takes for its transaction: the oldest offer of each set of agent types and
    /// domains. The others stay.
    pub(crate) fn take(&self) -> Vec<Offer> {
        let mut offers = self.lock();
        if offers.is_empty() {
            return Vec::new();
        }
        let mut taken: Vec<Offer> = Vec::new();
        let mut kept = Vec::with_capacity(offers.len());
        for o in offers.drain(..) {
            if taken.iter().any(|t| same_set(&t.claim, &o.claim)) {
                kept.push(o);
            } else {
                taken.push(o);
            }
        }
        *offers = kept;
        taken
    }

    /// How many offers wait for a writer.
    pub(crate) fn waiting(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Offer>> {
        self.offers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether two claims ask for the same agent types and domains (in any order).
fn same_set(a: &ClaimDueSteps, b: &ClaimDueSteps) -> bool {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    };
    a.buckets == b.buckets && sorted(&a.agents) == sorted(&b.agents) && sorted(&a.domains) == sorted(&b.domains)
}

/// A poll's offer, while it waits. Dropped, it is taken back.
pub struct Offered {
    id: u64,
    handoff: Arc<Handoff>,
    /// `None` once answered.
    handed: Option<oneshot::Receiver<Vec<ClaimedStep>>>,
}

impl Offered {
    /// Resolves when a writer has run the claim: the steps it took for the poll (none when it
    /// found nothing, or its transaction failed). Pending for ever once answered.
    pub async fn handed(&mut self) -> Vec<ClaimedStep> {
        match self.handed.as_mut() {
            Some(rx) => {
                let steps = rx.await.unwrap_or_default();
                self.handed = None;
                steps
            }
            None => std::future::pending().await,
        }
    }

    /// Takes the offer back: no steps when no writer had taken it. When one had, waits for its
    /// answer until `until` (its transaction is bounded by the store's own timeout; past `until`
    /// the writer finds the poll gone and hands its steps, if any, back to the queue).
    pub async fn withdraw(mut self, until: tokio::time::Instant) -> Vec<ClaimedStep> {
        if self.take_back() {
            return Vec::new();
        }
        match self.handed.take() {
            Some(rx) => tokio::time::timeout_at(until, rx).await.ok().and_then(Result::ok).unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Removes the offer if no writer has taken it; whether it did.
    fn take_back(&self) -> bool {
        let mut offers = self.handoff.lock();
        match offers.iter().position(|o| o.id == self.id) {
            Some(i) => {
                offers.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

impl Drop for Offered {
    fn drop(&mut self) {
        if self.handed.is_some() {
            self.take_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiftboss_core::InstanceId;

    fn claim(worker: &str, agents: &[&str], domains: &[&str]) -> ClaimDueSteps {
        ClaimDueSteps {
            instance: InstanceId::new(format!("worker:{worker}")).unwrap(),
            limit: 4,
            agents: agents.iter().map(|a| a.to_string()).collect(),
            buckets: None,
            domains: domains.iter().map(|d| d.to_string()).collect(),
            limits: vec![],
        }
    }

    fn instances(offers: &[Offer]) -> Vec<&str> {
        offers.iter().map(|o| o.claim.instance.as_str()).collect()
    }

    #[tokio::test]
    async fn a_writer_takes_the_oldest_offer_of_each_set_of_agents_and_domains() {
        let h = Arc::new(Handoff::default());
        let _a = h.offer(claim("a", &["pay", "ship"], &[]));
        let _b = h.offer(claim("b", &["ship", "pay"], &[]));
        let _c = h.offer(claim("c", &["pay"], &[]));
        let _d = h.offer(claim("d", &["pay", "ship"], &["eu"]));
        assert_eq!(instances(&h.take()), ["worker:a", "worker:c", "worker:d"]);
        assert_eq!(instances(&h.take()), ["worker:b"], "the one left waits for the next writer");
        assert!(h.take().is_empty());
    }

    #[tokio::test]
    async fn a_taken_offer_is_answered_and_an_untaken_one_taken_back() {
        let h = Arc::new(Handoff::default());
        let untaken = h.offer(claim("a", &["pay"], &[]));
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        // Not taken: withdrawn at once, and no writer sees it afterwards.
        assert!(untaken.withdraw(far).await.is_empty());
        assert!(h.take().is_empty());

        // Taken: withdrawing waits for the writer's answer, which carries the steps.
        let taken = h.offer(claim("b", &["pay"], &[]));
        let offers = h.take();
        assert_eq!(instances(&offers), ["worker:b"]);
        let waiting = tokio::spawn(taken.withdraw(far));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the poll waits for the writer that took its offer");
        let answered = offers.into_iter().next().unwrap();
        assert!(answered.answer(Vec::new()).is_empty(), "a waiting poll takes what it is handed");
        assert!(waiting.await.unwrap().is_empty());

        // A dropped offer is taken back.
        drop(h.offer(claim("c", &["pay"], &[])));
        assert!(h.take().is_empty());
    }

    #[tokio::test]
    async fn steps_for_a_poll_that_went_away_come_back_to_the_writer() {
        let h = Arc::new(Handoff::default());
        let gone = h.offer(claim("a", &["pay"], &[]));
        let offers = h.take();
        drop(gone);
        let step = ClaimedStep {
            id: shiftboss_core::StepId(7),
            task_id: shiftboss_core::TaskId(3),
            task_key: "order-3".into(),
            name: "pay".into(),
            agent: "pay".into(),
            lease_token: shiftboss_core::LeaseToken(2),
            complete_by: shiftboss_core::Timestamp(10_000),
            claimed_at: shiftboss_core::Timestamp(0),
            attempt: 1,
            input: serde_json::json!({}),
            config: serde_json::json!({}),
            idempotency_key: "k".into(),
            progress: None,
        };
        let back = offers.into_iter().next().unwrap().answer(vec![step]);
        assert_eq!(back.iter().map(|s| s.id).collect::<Vec<_>>(), [shiftboss_core::StepId(7)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_withdrawal_waits_for_a_silent_writer_only_until_its_bound() {
        let h = Arc::new(Handoff::default());
        let o = h.offer(claim("a", &["pay"], &[]));
        let offers = h.take();
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        assert!(o.withdraw(until).await.is_empty());
        assert_eq!(tokio::time::Instant::now(), until);
        drop(offers);
    }
}
