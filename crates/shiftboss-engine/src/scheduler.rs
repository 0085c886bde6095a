//! The scheduler (P9, P14, P15): claims due steps in batches, runs each through its agent, and
//! writes the replies in batches, each fenced by its claim's lease token.
//!
//! On start it first returns the steps its own instance id held before a crash (P9), so they run
//! again at once instead of waiting for the supervisor.

use crate::agent::{AgentCall, AgentRegistry};
use crate::config::{BucketPolicy, PollMode, SchedulerConfig};
use crate::metrics::Metrics;
use crate::progress::Progress;
use crate::runtime::{Breakers, run_step};
use crate::slot_limit::{CallClock, SlotLimit};
use crate::throttle::{self, Throttle};
use shiftboss_core::InstanceId;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{
    ClaimDueSteps, ClaimedStep, Heartbeat, RecordReplies, ReleaseInstanceClaims, Reply, ReplyOutcome, ReplyResult,
    Store,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep, sleep_until};

pub struct Scheduler {
    pub store: Arc<dyn Store>,
    pub agents: AgentRegistry,
    pub config: SchedulerConfig,
    pub instance: InstanceId,
    pub policies: Arc<RetryPolicies>,
    pub metrics: Arc<Metrics>,
    /// Rung when new work may be due: a submission in this process, a step whose reply scheduled
    /// the next one (or a retry), or the store's due-work channel. Between rings the scheduler
    /// sleeps until the next due time the claim reported, capped by its poll.
    pub wake: Arc<Notify>,
    /// Rung after every claim that took steps: this process's supervisor then learns the new
    /// complete-by at once instead of at its next idle sweep.
    pub claimed: Arc<Notify>,
    /// True when the store rings `wake` for every process's queued work (the engine holds the
    /// subscription): the scheduler then polls only every `idle_poll`.
    pub notified: bool,
    /// One circuit breaker per remote service, shared by all steps of this scheduler.
    pub breakers: Arc<Breakers>,
    /// Rung after every batch of replies written: this process's event readers (streams,
    /// `Engine::wait_for`) read at once.
    pub events: tokio::sync::watch::Sender<()>,
}

/// The buckets this scheduler claims from now, and when it next says it is alive.
struct Owned {
    /// `None` claims from every bucket.
    buckets: Option<Vec<u16>>,
    next_heartbeat: Option<Instant>,
    /// Failed claims and heartbeats, logged once per interval while they go on.
    claim_failures: Throttle,
    heartbeat_failures: Throttle,
}

impl Owned {
    fn new(policy: &BucketPolicy) -> Self {
        let buckets = match policy {
            BucketPolicy::All => None,
            BucketPolicy::List(l) => Some(l.clone()),
            // Nothing until the first heartbeat says what the share is.
            BucketPolicy::Share { .. } => Some(Vec::new()),
        };
        Owned {
            buckets,
            next_heartbeat: None,
            claim_failures: Throttle::new(throttle::EVERY),
            heartbeat_failures: Throttle::new(throttle::EVERY),
        }
    }
}

/// A reply waiting to be recorded. Its step's slot is free already (the agent has answered); it
/// holds a place among the replies not yet recorded, of which there are never more than the
/// concurrency.
struct Pending {
    reply: Reply,
    /// Held only to be dropped when the reply is recorded.
    _place: OwnedSemaphorePermit,
}

/// Under a backlog, the longest a claim waits for half a batch of slots to free (see `run`).
const GATHER: Duration = Duration::from_millis(2);

/// How long to wait after a store error before trying again.
const STORE_RETRY: Duration = Duration::from_millis(200);

/// At shutdown, past the write deadline: the time the writers get to drop what is left and end
/// by themselves before they are stopped, and then the sign-off's.
pub(crate) const WIND_UP: Duration = Duration::from_millis(500);

/// Resolves once shutdown is asked for (at once if it already was). A store call raced against it
/// is dropped mid-flight: its transaction commits or not, and either way every claim it made is
/// fenced, so a dropped claim's steps come back when their leases lapse.
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    if shutdown.wait_for(|s| *s).await.is_err() {
        // The engine is gone without saying stop: nothing will ask again.
        std::future::pending::<()>().await;
    }
}

/// Resolves when the shutdown's write deadline passes; never before shutdown sets one.
async fn write_deadline_passed(deadline: &mut watch::Receiver<Option<Instant>>) {
    let at = match deadline.wait_for(Option::is_some).await {
        Ok(d) => *d,
        Err(_) => None,
    };
    match at {
        Some(at) => sleep_until(at).await,
        // The scheduler is gone without setting one: nothing will.
        None => std::future::pending().await,
    }
}

impl Scheduler {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let this = Arc::new(self);
        this.release_own_claims(&mut shutdown).await;
        tokio::select! {
            _ = sleep(this.config.first_delay) => {}
            _ = shutdown.changed() => {}
        }
        let period = this.config.poll_period(this.notified);
        let mut rate = interval_at(Instant::now() + period, period);
        rate.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let (reply_tx, reply_rx) = mpsc::channel::<Pending>(this.config.reply_places());
        let reply_rx = Arc::new(tokio::sync::Mutex::new(reply_rx));
        let waiting = Arc::new(AtomicBool::new(false));
        // Set at shutdown: the time after which the writers drop what they could not write.
        let (deadline_tx, deadline_rx) = watch::channel(None);
        let mut writers: JoinSet<()> = JoinSet::new();
        for _ in 0..this.config.reply_writers {
            writers.spawn(this.clone().write_replies(reply_rx.clone(), waiting.clone(), deadline_rx.clone()));
        }
        // Permits for the most steps ever allowed at once; the slot limit says how many of them
        // may be held now.
        let ceiling = this.config.concurrency as usize;
        let slots = Arc::new(Semaphore::new(ceiling));
        // Places for replies waiting to be recorded: a step frees its slot once its reply has one.
        let unrecorded = Arc::new(Semaphore::new(this.config.reply_places()));
        let mut limit = SlotLimit::new(this.config.min_concurrency as usize, ceiling);
        this.metrics.slot_limit.store(limit.now() as u64, Ordering::Relaxed);
        let calls = Arc::new(CallClock::default());
        // Whether the last claim took every step it asked for, and when it was sent.
        let mut backlog = false;
        let mut last_claim: Option<Instant> = None;
        let mut running = JoinSet::new();
        let agents = this.config.agents.clone().unwrap_or_else(|| this.agents.names());
        let mut owned = Owned::new(&this.config.buckets);
        while !*shutdown.borrow() {
            tokio::select! {
                _ = this.heartbeat_if_due(&mut owned) => {}
                _ = stopping(&mut shutdown) => break,
            }
            let in_flight = ceiling - slots.available_permits();
            let batch = limit.now().min(this.config.claim_batch as usize);
            let free = limit.now().saturating_sub(in_flight).min(batch);
            // Under a backlog, with steps running, a claim gathers: it waits until half a batch of
            // slots is free, or GATHER since the last claim. Steps free their slots one by one as
            // their agents answer, and a claim per freed slot would cost a round trip per step;
            // work that is not backlogged (a ring, a due time) is claimed at once.
            let gathering = backlog
                && in_flight > 0
                && free < batch.div_ceil(2)
                && last_claim.is_some_and(|t| t.elapsed() < GATHER);
            let mut more_due = false;
            let mut idle = false;
            // When the next step this scheduler could claim falls due, by its own clock.
            let mut next_due = None;
            if free > 0 && !gathering {
                let before = Instant::now();
                last_claim = Some(before);
                let p = ClaimDueSteps {
                    instance: this.instance.clone(),
                    limit: free as u32,
                    agents: agents.clone(),
                    buckets: owned.buckets.clone(),
                    domains: this.config.domains.clone(),
                    limits: this.config.limits.clone(),
                };
                let claim = this.store.claim_due_work(p);
                tokio::pin!(claim);
                let claimed = tokio::select! {
                    r = &mut claim => r,
                    _ = stopping(&mut shutdown) => {
                        // A claim in flight commits or not; one that commits holds steps that
                        // only a lapsed lease would give back (as a failure, after the retry
                        // delay). It gets the grace period to answer, and its steps run in it.
                        match tokio::time::timeout(this.config.shutdown_grace, claim).await {
                            Ok(r) => r,
                            Err(_) => break,
                        }
                    }
                };
                match claimed {
                    Ok(work) => {
                        if let Some(n) = owned.claim_failures.succeeded() {
                            tracing::info!(failures = n, "claims succeed again");
                        }
                        more_due = work.steps.len() == free;
                        backlog = more_due;
                        idle = work.steps.is_empty() && in_flight == 0;
                        // Measured from after the claim, so the wake is never early (an early
                        // wake costs a claim that finds nothing); the store's clock counts whole
                        // milliseconds, hence one more.
                        let after = Instant::now() + Duration::from_millis(1);
                        next_due = work.next_due.map(|at| after + at.since(work.now));
                        if !work.steps.is_empty() {
                            this.claimed.notify_one();
                        }
                        Metrics::add(&this.metrics.claims, 1);
                        Metrics::add(&this.metrics.claimed, work.steps.len() as u64);
                        for step in work.steps {
                            let permit =
                                slots.clone().try_acquire_owned().expect("claimed no more than the free slots");
                            let (me, tx, calls, places) =
                                (this.clone(), reply_tx.clone(), calls.clone(), unrecorded.clone());
                            running
                                .spawn(async move { me.run_claimed(step, before, permit, places, tx, &calls).await });
                        }
                    }
                    Err(e) => {
                        if let Some(held) = owned.claim_failures.failed(Instant::now()) {
                            tracing::warn!(error = %e, not_logged = held, "claim failed; trying again (logged once per 10 s while it lasts)");
                        }
                        tokio::select! {
                            _ = sleep(STORE_RETRY) => {}
                            _ = stopping(&mut shutdown) => break,
                        }
                    }
                }
            }
            while running.try_join_next().is_some() {}
            limit.adjust(backlog, idle, &calls);
            this.metrics.slot_limit.store(limit.now() as u64, Ordering::Relaxed);
            // Out of slots, or the claim was full: freed slots may find work due now, so the reply
            // writers ring once they free some. Raised before looking at the slots again, so that a
            // writer freeing slots in between either is seen here or sees the flag.
            if more_due || free == 0 {
                waiting.store(true, Ordering::SeqCst);
                if ceiling - slots.available_permits() < limit.now() {
                    continue;
                }
            }
            let saturated = ceiling - slots.available_permits() >= limit.now();
            let fixed_rate = this.config.poll_mode == PollMode::FixedRate;
            // Sleep until the next due step, the next heartbeat or the poll, whichever is first.
            let gathered = last_claim.filter(|_| gathering).map(|t| t + GATHER);
            let soonest = [next_due, owned.next_heartbeat, gathered].into_iter().flatten().min();
            let poll = Instant::now() + period;
            tokio::select! {
                _ = this.wake.notified() => {}
                _ = sleep_until(soonest.map_or(poll, |t| t.min(poll))), if !fixed_rate => {}
                _ = sleep_until(soonest.unwrap_or(poll)), if fixed_rate && soonest.is_some() => {}
                _ = rate.tick(), if fixed_rate => {}
                _ = shutdown.changed() => {}
                Some(_) = running.join_next(), if saturated || gathering => {}
            }
        }
        // Shutdown: no new claims; give running steps a grace period, then leave the rest to be
        // released at the next start (or expired by the supervisor).
        let drained =
            tokio::time::timeout(this.config.shutdown_grace, async { while running.join_next().await.is_some() {} })
                .await;
        if drained.is_err() {
            tracing::warn!(left = running.len(), "shutdown grace passed with steps still running");
            running.abort_all();
        }
        // The replies of the steps that ended get a bounded time to be written, whatever the
        // store does: at the deadline the writers drop what is left (and say so); one still
        // running a little later is stopped.
        let deadline = Instant::now() + this.config.shutdown_writes;
        let _ = deadline_tx.send(Some(deadline));
        drop(reply_tx);
        let joined =
            tokio::time::timeout_at(deadline + WIND_UP, async { while writers.join_next().await.is_some() {} }).await;
        if joined.is_err() {
            tracing::warn!("shutdown: the reply writers did not finish in time; stopping them");
            writers.abort_all();
        }
        if matches!(this.config.buckets, BucketPolicy::Share { .. }) {
            let signed_off = tokio::time::timeout_at(deadline + 2 * WIND_UP, this.store.sign_off(&this.instance)).await;
            if !matches!(signed_off, Ok(Ok(()))) {
                let error = match signed_off {
                    Ok(Err(e)) => e.to_string(),
                    _ => "the store did not answer in time".to_owned(),
                };
                tracing::warn!(%error, "could not sign off; the others take this scheduler's buckets when its heartbeat lapses");
            }
        }
    }

    /// With a shared bucket policy, says this scheduler is alive every third of the heartbeat ttl
    /// and takes its share of the buckets among the live schedulers.
    async fn heartbeat_if_due(&self, owned: &mut Owned) {
        let BucketPolicy::Share { weight } = self.config.buckets else { return };
        if owned.next_heartbeat.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let p = Heartbeat { instance: self.instance.clone(), weight, ttl: self.config.heartbeat_ttl };
        match self.store.heartbeat(p).await {
            Ok(live) => {
                if let Some(n) = owned.heartbeat_failures.succeeded() {
                    tracing::info!(failures = n, "heartbeats succeed again");
                }
                let share = shiftboss_core::buckets::share(&live, self.instance.as_str());
                if owned.buckets.as_ref() != Some(&share) {
                    tracing::info!(buckets = share.len(), live = live.len(), "bucket share changed");
                }
                owned.buckets = Some(share);
                owned.next_heartbeat = Some(Instant::now() + self.config.heartbeat_ttl / 3);
            }
            Err(e) => {
                // Keep the last share: by the time it is stale, the others have re-shared too.
                if let Some(held) = owned.heartbeat_failures.failed(Instant::now()) {
                    tracing::warn!(error = %e, not_logged = held, "heartbeat failed; trying again (logged once per 10 s while it lasts)");
                }
                owned.next_heartbeat = Some(Instant::now() + STORE_RETRY);
            }
        }
    }

    async fn release_own_claims(&self, shutdown: &mut watch::Receiver<bool>) {
        while !*shutdown.borrow() {
            let p = ReleaseInstanceClaims { instance: self.instance.clone(), policies: self.policies.clone() };
            let released = tokio::select! {
                r = self.store.release_instance_claims(p) => r,
                _ = stopping(shutdown) => return,
            };
            match released {
                Ok(r) => {
                    Metrics::add(&self.metrics.released, u64::from(r.retried + r.gave_up));
                    if r.retried + r.gave_up > 0 {
                        tracing::info!(
                            returned = r.retried,
                            gave_up = r.gave_up,
                            "released steps held before a restart"
                        );
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not release steps held before a restart; trying again");
                    tokio::select! {
                        _ = sleep(STORE_RETRY) => {}
                        _ = stopping(shutdown) => return,
                    }
                }
            }
        }
    }

    /// Runs one step. Its slot (`permit`) is freed once the step's reply has a place among the
    /// replies waiting to be recorded (`places`: `SchedulerConfig::reply_places`), not when its
    /// batch commits: the next claim then runs while that batch is written, instead of after it
    /// (at 64 slots and no-op steps on PostgreSQL, a claim waited for the last batch's commit).
    /// Claimed-but-unrecorded steps never exceed the concurrency plus the places, which bounds both
    /// the work a crash can repeat and the reply writers' backlog; a full backlog holds the slots,
    /// and so the claims.
    async fn run_claimed(
        &self,
        step: ClaimedStep,
        claim_started: Instant,
        permit: OwnedSemaphorePermit,
        places: Arc<Semaphore>,
        replies: mpsc::Sender<Pending>,
        calls: &CallClock,
    ) {
        let (step_id, lease_token) = (step.id, step.lease_token);
        let Some(result) = self.call_agent(step, claim_started, calls).await else { return };
        // The semaphore is never closed.
        let Ok(place) = places.acquire_owned().await else { return };
        drop(permit);
        let _ = replies.send(Pending { reply: Reply { step_id, lease_token, result }, _place: place }).await;
    }

    /// The step's agent call, with its in-call retries; `None` when it was dropped at complete-by
    /// with nothing to report.
    async fn call_agent(&self, step: ClaimedStep, claim_started: Instant, calls: &CallClock) -> Option<ReplyResult> {
        // The window is measured from before the claim was sent, so this side's deadline is never
        // later than the store's complete-by.
        let deadline = claim_started + step.complete_by.since(step.claimed_at);
        let Some(agent) = self.agents.get(&step.agent) else {
            return Some(ReplyResult::PermanentError(format!("unknown agent {:?}", step.agent)));
        };
        let service = self.agents.service_key(&step.agent, &step.config);
        let call = AgentCall {
            task_id: step.task_id,
            step_id: step.id,
            step: step.name.clone(),
            input: step.input.clone(),
            config: step.config.clone(),
            idempotency_key: step.idempotency_key.clone(),
            previous_progress: step.progress.clone(),
            attempt: step.attempt,
            try_number: 1,
            complete_by: step.complete_by,
            deadline,
            progress: Progress::for_claim(
                self.store.clone(),
                step.id,
                step.lease_token,
                step.claimed_at,
                claim_started,
                deadline,
            ),
        };
        let started = Instant::now();
        let result = run_step(
            agent.as_ref(),
            self.agents.strategy(&step.agent).map(|s| s.as_ref()),
            call,
            &service,
            &self.breakers,
            self.config.backoff,
            &self.metrics,
        )
        .await;
        calls.note(started.elapsed());
        result
    }

    /// Drains the reply channel into batches, one transaction each. A batch that cannot be
    /// written for a passing reason is tried again, not dropped: a step done but never recorded
    /// would run again for nothing. Except at shutdown: once its write deadline passes, what is
    /// not written is dropped (a store that is down must not hold the process for ever); those
    /// steps' leases lapse and the supervisor takes them back.
    ///
    /// Once a batch is recorded its places are free. The writer rings the scheduler when it waits
    /// for slots (`waiting`), when a reply may have queued work (a next step, a retry: any reply
    /// that did not end its task), or when the store has no channel of its own. A batch that only
    /// ended tasks rings nothing: ringing after every batch cost an idle scheduler a claim that
    /// found nothing after each job. (A child task's end may move its parent on; that work rings
    /// through the store's channel.)
    async fn write_replies(
        self: Arc<Self>,
        rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Pending>>>,
        waiting: Arc<AtomicBool>,
        mut deadline: watch::Receiver<Option<Instant>>,
    ) {
        loop {
            // One writer takes a batch at a time; it writes while another takes the next.
            let pending = {
                let mut rx = rx.lock().await;
                let Some(first) = rx.recv().await else { break };
                // Steps of one claim that answer at once (fast agents) send their replies in the
                // same moment: one turn of the runtime lets them join this batch.
                tokio::task::yield_now().await;
                let mut pending = vec![first];
                while pending.len() < self.config.reply_batch {
                    match rx.try_recv() {
                        Ok(r) => pending.push(r),
                        Err(_) => break,
                    }
                }
                pending
            };
            let batch: Vec<Reply> = pending.iter().map(|p| p.reply.clone()).collect();
            shiftboss_store::fault::reached(shiftboss_store::fault::FaultPoint::AfterCall);
            let mut tries = 0u32;
            // Until recorded, assume the batch queued work.
            let mut queued = true;
            loop {
                let p = RecordReplies {
                    instance: self.instance.clone(),
                    replies: batch.clone(),
                    policies: self.policies.clone(),
                };
                let past_deadline = deadline.borrow().is_some_and(|d| Instant::now() >= d);
                let recorded = if past_deadline {
                    None
                } else {
                    tokio::select! {
                        r = self.store.record_replies(p) => Some(r),
                        _ = write_deadline_passed(&mut deadline) => None,
                    }
                };
                let Some(recorded) = recorded else {
                    tracing::warn!(
                        replies = batch.len(),
                        "shutdown: replies not recorded in time are dropped; their leases lapse and the steps run again"
                    );
                    Metrics::add(&self.metrics.dropped_replies, batch.len() as u64);
                    break;
                };
                match recorded {
                    Ok(outcomes) => {
                        Metrics::add(&self.metrics.reply_batches, 1);
                        self.events.send_replace(());
                        self.count(&batch, &outcomes);
                        queued = outcomes.iter().any(|o| match o {
                            ReplyOutcome::Applied { task_state, scheduled } => {
                                *scheduled > 0 || !task_state.is_terminal()
                            }
                            ReplyOutcome::Rejected { .. } | ReplyOutcome::AlreadyApplied { .. } => false,
                        });
                        break;
                    }
                    Err(e) if e.is_transient() || tries < 5 => {
                        tries += 1;
                        tracing::warn!(error = %e, tries, "recording replies failed; trying again");
                        tokio::select! {
                            _ = sleep(STORE_RETRY * tries.min(10)) => {}
                            _ = write_deadline_passed(&mut deadline) => {}
                        }
                    }
                    Err(e) => {
                        // Not a passing fault: these leases will lapse and the steps run again.
                        tracing::error!(error = %e, replies = batch.len(), "giving up on recording replies");
                        break;
                    }
                }
            }
            // The places free up now that the replies are recorded (or given up).
            drop(pending);
            if queued || !self.notified || waiting.swap(false, Ordering::SeqCst) {
                self.wake.notify_one();
            }
        }
    }

    fn count(&self, batch: &[Reply], outcomes: &[ReplyOutcome]) {
        for (reply, outcome) in batch.iter().zip(outcomes) {
            match outcome {
                ReplyOutcome::Applied { .. } => match reply.result {
                    ReplyResult::Completed(_) => Metrics::add(&self.metrics.completed, 1),
                    ReplyResult::PermanentError(_) => Metrics::add(&self.metrics.permanent_errors, 1),
                    ReplyResult::Failed(_) => Metrics::add(&self.metrics.failed, 1),
                    ReplyResult::Postponed(_) => Metrics::add(&self.metrics.postponed, 1),
                },
                // Counted when it was first applied (its answer was lost, not its write).
                ReplyOutcome::AlreadyApplied { .. } => {
                    tracing::info!(step = %reply.step_id, "reply was applied already");
                }
                ReplyOutcome::Rejected { reason } => {
                    tracing::info!(step = %reply.step_id, %reason, "late reply rejected");
                    Metrics::add(&self.metrics.rejected_replies, 1);
                }
            }
        }
    }
}
