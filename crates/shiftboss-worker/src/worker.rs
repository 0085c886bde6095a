//! The worker: polls for as many steps as it has free slots, runs each in a task of its own with
//! a deadline from its lease, heartbeats while it runs, and answers fenced by the lease token.
//!
//! The deadline is measured with this process's monotonic clock from before the poll was sent,
//! so it is never later than the server's complete-by: a step not done by then is dropped and
//! answered for by nobody (P5), since the supervisor may already have handed it to another worker.

use crate::client::{Client, ClientError};
use crate::config::WorkerConfig;
use crate::protocol::Step;
use crate::replier::{Answer, Ready, Replier};
use async_trait::async_trait;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until};

/// How long a poll in flight at shutdown may still answer: the server answers a poll as soon as
/// it has claimed steps for it, so steps already claimed arrive well within this.
const SHUTDOWN_POLL_GRACE: Duration = Duration::from_secs(1);

/// The shortest time between two heartbeats sent to carry a handler's progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Runs the steps of the worker's agent types.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs one step and gives its output. The future is dropped, unfinished, when the step's
    /// deadline passes or its lease is lost: make what it does safe to stop (and pass
    /// `step.idempotency_key` to the services it calls).
    async fn run(&self, step: &Step) -> Result<Value, Failure>;
}

/// A handler shared with the code that made it (to read its state afterwards, say).
#[async_trait]
impl<H: Handler> Handler for Arc<H> {
    async fn run(&self, step: &Step) -> Result<Value, Failure> {
        (**self).run(step).await
    }
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A fault that may pass: the step runs again after its retry policy's delay.
    Transient(String),
    /// A fault that will not pass: the step goes to Error at once, for an operator.
    Permanent(String),
    /// Not a fault: not ready yet (a job still running at the service). The step goes back to be
    /// claimed again, by any worker of its agent type, after this delay (at most a year), with no
    /// failure counted.
    Postpone(Duration),
}

/// What a worker did, counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Steps answered as completed.
    pub completed: u64,
    /// Steps answered as failed (transient or permanent).
    pub failed: u64,
    /// Steps handed back to run again later ([`Failure::Postpone`]).
    pub postponed: u64,
    /// Steps dropped without an answer: their deadline passed, their lease was lost, or the
    /// answer was refused as stale.
    pub dropped: u64,
    /// Polls that failed (the server out of reach, or answering 5xx).
    pub poll_errors: u64,
    /// Steps held under the worker's id before it started, taken back by its release
    /// (`WorkerConfig::release_on_start`) to run again at once.
    pub released: u64,
}

#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    failed: AtomicU64,
    postponed: AtomicU64,
    dropped: AtomicU64,
    poll_errors: AtomicU64,
    released: AtomicU64,
}

impl Counters {
    fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn stats(&self) -> WorkerStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerStats {
            completed: g(&self.completed),
            failed: g(&self.failed),
            postponed: g(&self.postponed),
            dropped: g(&self.dropped),
            poll_errors: g(&self.poll_errors),
            released: g(&self.released),
        }
    }
}

pub struct Worker {
    config: Arc<WorkerConfig>,
    client: Client,
    handler: Arc<dyn Handler>,
    counters: Arc<Counters>,
}

impl Worker {
    pub fn new(config: WorkerConfig, handler: impl Handler) -> Result<Worker, ClientError> {
        config.validate().map_err(ClientError::Setup)?;
        let client = Client::new(&config)?;
        Ok(Worker { config: Arc::new(config), client, handler: Arc::new(handler), counters: Arc::default() })
    }

    /// What it did so far.
    pub fn stats(&self) -> WorkerStats {
        self.counters.stats()
    }

    /// Polls and runs steps until `shutdown` completes, then stops polling and waits for the
    /// steps it holds to finish (each is bounded by its deadline) and answers for them. A poll
    /// in flight at shutdown gets `SHUTDOWN_POLL_GRACE` to answer, and the steps it brings are
    /// run too; one still waiting for work then is dropped (a step the server claims for it
    /// after that comes back through the supervisor at its complete-by). Ends early with the
    /// error when the server refuses the poll (a bad token, a type it does not declare remote)
    /// or the release, after the held steps.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<WorkerStats, ClientError> {
        tokio::pin!(shutdown);
        if self.config.release_on_start {
            tokio::select! {
                () = &mut shutdown => return Ok(self.counters.stats()),
                r = self.release_held() => r?,
            }
        }
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        let replier = Replier::start(self.client.clone(), self.config.worker_id.as_str().into());
        let mut running = JoinSet::new();
        let mut failures = 0u32;
        let mut refused = None;
        loop {
            while running.try_join_next().is_some() {}
            let first = tokio::select! {
                () = &mut shutdown => break,
                p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            };
            let mut permits = vec![first];
            while let Ok(p) = slots.clone().try_acquire_owned() {
                permits.push(p);
            }
            let capacity = u32::try_from(permits.len()).unwrap_or(u32::MAX);
            let asked_at = Instant::now();
            let poll = self.client.poll(&self.config, capacity, self.config.poll_wait);
            tokio::pin!(poll);
            // Set once `shutdown` has completed: it is not polled again.
            let mut stopping = false;
            let polled = tokio::select! {
                () = &mut shutdown => {
                    stopping = true;
                    // A poll the server is answering carries steps already claimed for this
                    // worker: wait a moment for them rather than leave them to lapse at their
                    // complete-by. A poll still waiting for work is dropped.
                    match tokio::time::timeout(SHUTDOWN_POLL_GRACE, &mut poll).await {
                        Ok(r) => r,
                        Err(_) => break,
                    }
                }
                r = &mut poll => r,
            };
            match polled {
                Ok(steps) => {
                    failures = 0;
                    for step in steps {
                        let job = StepRun {
                            step,
                            asked_at,
                            _slot: permits.pop(),
                            client: self.client.clone(),
                            replier: replier.clone(),
                            handler: self.handler.clone(),
                            counters: self.counters.clone(),
                        };
                        running.spawn(job.run());
                    }
                }
                Err(_) if stopping => break,
                Err(e) if e.is_transient() => {
                    Counters::add(&self.counters.poll_errors);
                    failures = failures.saturating_add(1);
                    let pause = self.pause_after(failures);
                    tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "poll failed; polling again after a pause");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = sleep(pause) => {}
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "the server refused the poll; the worker stops");
                    refused = Some(e);
                    break;
                }
            }
            if stopping {
                break;
            }
        }
        while running.join_next().await.is_some() {}
        match refused {
            Some(e) => Err(e),
            None => Ok(self.counters.stats()),
        }
    }

    /// The pause after `failures` failed calls in a row: `poll_backoff`, doubled on each further
    /// failure, at most 30 times it.
    fn pause_after(&self, failures: u32) -> Duration {
        self.config.poll_backoff.saturating_mul(1 << failures.min(5)).min(self.config.poll_backoff * 30)
    }

    /// Takes back what the worker's id held before this start, sending again after a pause while
    /// the server is out of reach or failing; a refusal (a bad token, a bad id) ends the worker.
    async fn release_held(&self) -> Result<(), ClientError> {
        let mut failures = 0u32;
        loop {
            match self.client.release(&self.config.worker_id).await {
                Ok((returned, gave_up)) => {
                    self.counters.released.fetch_add(u64::from(returned + gave_up), Ordering::Relaxed);
                    if returned + gave_up > 0 {
                        tracing::info!(returned, gave_up, "took back the steps held before this start");
                    }
                    return Ok(());
                }
                Err(e) if e.is_transient() => {
                    failures = failures.saturating_add(1);
                    let pause = self.pause_after(failures);
                    tracing::warn!(error = %e, pause_ms = pause.as_millis() as u64, "release failed; trying again after a pause");
                    sleep(pause).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "the server refused the release; the worker stops");
                    return Err(e);
                }
            }
        }
    }
}

/// One held step, run to its answer or its deadline.
struct StepRun {
    step: Step,
    asked_at: Instant,
    /// The worker's slot, given back when the step's run ends. None only if a server handed out
    /// more than the capacity asked for: the step is run anyway, as it is claimed.
    _slot: Option<OwnedSemaphorePermit>,
    client: Client,
    replier: Replier,
    handler: Arc<dyn Handler>,
    counters: Arc<Counters>,
}

impl StepRun {
    async fn run(self) {
        let window = seconds(self.step.seconds_left);
        let (moved, mut deadline) = watch::channel(self.asked_at + window);
        let work = self.handler.run(&self.step);
        let beats = heartbeats(&self.client, &self.step, moved);
        tokio::pin!(work, beats);
        let outcome = loop {
            let until = *deadline.borrow_and_update();
            tokio::select! {
                r = &mut work => break Some(r),
                () = &mut beats => break None,
                () = sleep_until(until) => break None,
                _ = deadline.changed() => {}
            }
        };
        let Some(outcome) = outcome else {
            tracing::warn!(step = %self.step.step_id, "step dropped unanswered: its deadline passed or its lease was lost");
            Counters::add(&self.counters.dropped);
            return;
        };
        let step = &self.step;
        let counter = match &outcome {
            Ok(_) => &self.counters.completed,
            Err(Failure::Postpone(_)) => &self.counters.postponed,
            Err(_) => &self.counters.failed,
        };
        let answer = match outcome {
            Ok(output) => Answer::Done(output),
            Err(failure) => Answer::Failed(failure),
        };
        let ready = Ready { step_id: step.step_id.clone(), lease_token: step.lease_token.clone(), answer };
        match self.replier.send(ready).await {
            Ok(()) => Counters::add(counter),
            Err(e) => {
                tracing::warn!(step = %step.step_id, error = %e, "the step's answer was not taken");
                Counters::add(&self.counters.dropped);
            }
        }
    }
}

/// Heartbeats at a third of the time left, moving the deadline on with each answer, and sooner
/// (at most every `PROGRESS_EVERY`) when the handler has reported progress not sent yet. Returns
/// when the lease is lost. Once a heartbeat no longer moves the deadline (the step has no response
/// window, or has reached its whole timeout), it beats only to carry progress.
async fn heartbeats(client: &Client, step: &Step, deadline: watch::Sender<Instant>) {
    // When the last heartbeat was sent, and when to look next for progress to carry.
    let mut last = Instant::now();
    let mut look = last + PROGRESS_EVERY;
    let mut moving = true;
    loop {
        let beat_at = moving.then(|| {
            let left = deadline.borrow().saturating_duration_since(last);
            last + (left / 3).max(Duration::from_millis(50))
        });
        sleep_until(beat_at.map_or(look, |at| at.min(look))).await;
        let now = Instant::now();
        if beat_at.is_none_or(|at| now < at) {
            look = now + PROGRESS_EVERY;
            if !step.has_progress() {
                continue;
            }
        }
        let sent = Instant::now();
        (last, look) = (sent, sent + PROGRESS_EVERY);
        match client.heartbeat(step).await {
            Ok(Some(secs)) => {
                let new = sent + seconds(secs);
                if new > *deadline.borrow() {
                    deadline.send_replace(new);
                } else {
                    moving = false;
                }
            }
            Ok(None) | Err(ClientError::LeaseLost(_)) => return,
            Err(e) => tracing::debug!(step = %step.step_id, error = %e, "heartbeat failed; trying again"),
        }
    }
}

/// A server's seconds as a duration: negative, NaN or absurd values count as none left.
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO).min(Duration::from_secs(7 * 24 * 3600))
}
