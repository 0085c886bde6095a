//! Counters of what this process did, for summaries and tests. They live in memory and restart at zero.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    pub claimed: AtomicU64,
    /// The scheduler's claims (those that took nothing too), and the reply batches it wrote: with
    /// `claimed` and `completed` they say how many steps each round trip carried.
    pub claims: AtomicU64,
    pub reply_batches: AtomicU64,
    pub completed: AtomicU64,
    pub permanent_errors: AtomicU64,
    /// Tries after a transient fault, within one claim.
    pub in_call_retries: AtomicU64,
    /// Calls dropped at complete-by with nothing reported (P5).
    pub dropped_at_deadline: AtomicU64,
    /// Replies the store refused as stale.
    pub rejected_replies: AtomicU64,
    /// Replies dropped at shutdown because the store did not take them in time (their leases lapse).
    pub dropped_replies: AtomicU64,
    /// Tries held back by an open circuit breaker.
    pub breaker_waits: AtomicU64,
    pub expired: AtomicU64,
    pub gave_up: AtomicU64,
    /// Attempts that ended in a failure with a reason (retry jobs, M5): retried on schedule.
    pub failed: AtomicU64,
    /// Steps an agent handed back unfinished, to run again after a delay (no failure counted).
    pub postponed: AtomicU64,
    /// Agent calls that panicked.
    pub panics: AtomicU64,
    /// Steps this process's scheduler released on start (those its instance held before it died).
    pub released: AtomicU64,
    /// The supervisor's leader term while this process holds it, else 0.
    pub leader_term: AtomicU64,
    /// Supervisor sweeps run, and their total time in microseconds.
    pub sweeps: AtomicU64,
    pub sweep_micros: AtomicU64,
    /// Tasks submitted through the group commit, and the transactions that wrote them.
    pub submitted: AtomicU64,
    pub submit_batches: AtomicU64,
    /// Steps claimed for remote workers' waiting polls in those transactions (the handoff).
    pub handed_off: AtomicU64,
    /// Remote workers' replies written through the group commit, and the batches that wrote them.
    pub remote_replies: AtomicU64,
    pub remote_reply_batches: AtomicU64,
    /// Steps the scheduler may run at once now (its slot limit, which adapts); 0 without a scheduler.
    pub slot_limit: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub claimed: u64,
    pub claims: u64,
    pub reply_batches: u64,
    pub completed: u64,
    pub permanent_errors: u64,
    pub in_call_retries: u64,
    pub dropped_at_deadline: u64,
    pub rejected_replies: u64,
    pub dropped_replies: u64,
    pub breaker_waits: u64,
    pub expired: u64,
    pub gave_up: u64,
    pub failed: u64,
    pub postponed: u64,
    pub panics: u64,
    pub released: u64,
    /// 0 when this process does not lead.
    pub leader_term: u64,
    pub sweeps: u64,
    pub sweep_micros: u64,
    pub submitted: u64,
    pub submit_batches: u64,
    pub handed_off: u64,
    /// Remote workers' polls whose claim is offered to the next submissions (filled by `Engine::metrics`).
    pub polls_waiting: u64,
    pub remote_replies: u64,
    pub remote_reply_batches: u64,
    pub slot_limit: u64,
    /// What the dispatcher did with deliveries, by outcome (filled by `Engine::metrics`).
    pub deliveries: [(&'static str, u64); 5],
    /// What the alerter did, by outcome (filled by `Engine::metrics`).
    pub alerts: [(&'static str, u64); 5],
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            claimed: g(&self.claimed),
            claims: g(&self.claims),
            reply_batches: g(&self.reply_batches),
            completed: g(&self.completed),
            permanent_errors: g(&self.permanent_errors),
            in_call_retries: g(&self.in_call_retries),
            dropped_at_deadline: g(&self.dropped_at_deadline),
            rejected_replies: g(&self.rejected_replies),
            dropped_replies: g(&self.dropped_replies),
            breaker_waits: g(&self.breaker_waits),
            expired: g(&self.expired),
            gave_up: g(&self.gave_up),
            failed: g(&self.failed),
            postponed: g(&self.postponed),
            panics: g(&self.panics),
            released: g(&self.released),
            leader_term: g(&self.leader_term),
            sweeps: g(&self.sweeps),
            sweep_micros: g(&self.sweep_micros),
            submitted: g(&self.submitted),
            submit_batches: g(&self.submit_batches),
            handed_off: g(&self.handed_off),
            polls_waiting: 0,
            remote_replies: g(&self.remote_replies),
            remote_reply_batches: g(&self.remote_reply_batches),
            slot_limit: g(&self.slot_limit),
            deliveries: Default::default(),
            alerts: Default::default(),
        }
    }
}
