//! Settings of the engine's roles, each with defaults and a check.

use shiftboss_core::backoff::Backoff;
use shiftboss_core::breaker::BreakerConfig;
use std::time::Duration;

/// Which roles this process runs. Any number of processes may run any mix against one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Claim due steps and run them through their agents.
    pub scheduler: bool,
    /// Stand for the leader lease; as leader, sweep lapsed leases, reconcile and archive. And
    /// stand for the alerter's lease: tell the operator's alert sinks what needs a person.
    pub supervisor: bool,
    /// Send the status channels' deliveries (webhooks); any number of processes may.
    pub dispatcher: bool,
}

impl Default for Roles {
    fn default() -> Self {
        Roles { scheduler: true, supervisor: true, dispatcher: true }
    }
}

/// How the scheduler's polls are spaced (M7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PollMode {
    /// The next poll starts `poll_interval` after the previous one ended.
    #[default]
    FixedDelay,
    /// Polls start every `poll_interval`, however long each took (a late one is skipped, not bunched).
    FixedRate,
}

/// Which load-balance buckets a scheduler claims from (M3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BucketPolicy {
    /// Every bucket: schedulers share all work (claims never collide: each row is claimed once).
    #[default]
    All,
    /// These buckets only.
    List(Vec<u16>),
    /// A share among the live schedulers, by weight, recomputed at every heartbeat, so the
    /// buckets of a scheduler that dies are taken over once its heartbeat lapses.
    Share {
        /// This scheduler's share of the machine power; 0 counts as 1.
        weight: u32,
    },
}

/// The fewest places for replies waiting to be recorded (see [`SchedulerConfig::reply_places`]).
pub const MIN_REPLY_PLACES: usize = 256;

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// The most steps this instance runs at once. A step's slot frees when its agent answers; its
    /// reply then waits for its batch's commit among a bounded number of others
    /// ([`SchedulerConfig::reply_places`]), so claimed but unrecorded steps never exceed this
    /// plus that bound.
    pub concurrency: u32,
    /// Where the number of steps run at once starts, and falls back to when there is no work:
    /// from here it doubles while steps are due faster than they run and the agents' calls take
    /// no longer than they did here, up to `concurrency`, and falls by a quarter when they slow
    /// down under the load. Set it to `concurrency` (or above) for a fixed limit.
    pub min_concurrency: u32,
    /// Most steps claimed in one poll (M4); a poll also never claims more than the free slots.
    pub claim_batch: u32,
    /// How often to look for due work when nothing wakes the scheduler and the store has no
    /// due-work channel (so other processes' submissions are found by polling).
    pub poll_interval: Duration,
    /// With a due-work channel (PostgreSQL's LISTEN/NOTIFY): the longest an idle scheduler sleeps
    /// between looks. Notifications and the next due time the claim reports wake it sooner; this
    /// poll only covers notifications lost while the listening connection was down.
    pub idle_poll: Duration,
    /// How long after start the first poll waits (M7), after the restart release.
    pub first_delay: Duration,
    /// Whether `poll_interval` is counted from the end of a poll or from its start.
    pub poll_mode: PollMode,
    /// The agent types this instance serves; `None` serves every agent it has (M4).
    pub agents: Option<Vec<String>>,
    /// Which load-balance buckets it claims from.
    pub buckets: BucketPolicy,
    /// The isolation domains this instance serves, besides steps with no domain.
    pub domains: Vec<String>,
    /// Concurrency and rate limits per agent type, enforced by the store across all instances
    /// (every instance should carry the same limits).
    pub limits: Vec<shiftboss_store::AgentLimit>,
    /// With [`BucketPolicy::Share`], how long a heartbeat counts; one is sent every third of it.
    pub heartbeat_ttl: Duration,
    /// Most replies written in one transaction.
    pub reply_batch: usize,
    /// Reply batches written at once, each in its own transaction: while one commits (waits for
    /// the disk), the next is being written.
    pub reply_writers: usize,
    /// Backoff between tries of a remote call within one claim.
    pub backoff: Backoff,
    /// When a service's circuit breaker opens, and for how long (one breaker per service).
    pub breaker: BreakerConfig,
    /// How long a shutdown waits for running steps before it leaves them to be released at the next start.
    pub shutdown_grace: Duration,
    /// After the grace period, the longest a shutdown spends writing the last replies and signing
    /// off. Whatever the store does (down, or silent), the roles stop within the grace period plus
    /// this: replies not written by then are dropped, and their steps come back when their leases
    /// lapse (every claim is fenced, so a late reply or a second run is refused, never applied twice).
    pub shutdown_writes: Duration,
}

impl SchedulerConfig {
    /// The most answered steps whose replies wait to be recorded at once: as many as the slots,
    /// and never fewer than 256. An answered step's slot frees when its reply finds a place; a
    /// full backlog holds the slots, and so the claims. What the bound limits is the work a crash
    /// repeats (answered but unrecorded steps run again when their leases lapse) and the writers'
    /// queue. At 64 slots on PostgreSQL (no-op steps, claims and batches of up to 32), one place
    /// per slot left answered steps holding their slots while a batch committed: claims carried
    /// about 24 steps instead of up to 32, and the drain ran 3-18% slower than with 256 places in
    /// six pairs of seven. At 2,048 slots, four places per slot made the drain 12% slower (larger
    /// reply batches): hence a floor, not a multiple (`docs/performance.md`, 2026-11-29).
    pub fn reply_places(&self) -> usize {
        (self.concurrency as usize).max(MIN_REPLY_PLACES)
    }

    /// The poll period (M7): `idle_poll` when the store can notify, else `poll_interval`. Agent
    /// limits free room without a notification (a step elsewhere finishing, a rate window
    /// passing), so with limits the scheduler never sleeps longer than `poll_interval`.
    pub fn poll_period(&self, notified: bool) -> Duration {
        if notified && self.limits.is_empty() { self.idle_poll.max(self.poll_interval) } else { self.poll_interval }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            concurrency: 2048,
            min_concurrency: 64,
            claim_batch: 1000,
            poll_interval: Duration::from_millis(500),
            idle_poll: Duration::from_secs(10),
            first_delay: Duration::ZERO,
            poll_mode: PollMode::FixedDelay,
            agents: None,
            buckets: BucketPolicy::All,
            domains: Vec::new(),
            limits: Vec::new(),
            heartbeat_ttl: Duration::from_secs(6),
            reply_batch: 256,
            reply_writers: 2,
            backoff: Backoff::default(),
            breaker: BreakerConfig::default(),
            shutdown_grace: Duration::from_secs(5),
            shutdown_writes: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The sweep's cadence bound (P6): it runs when the earliest complete-by passes, or after a
    /// claim or a notification, but never twice within this interval, so a lapsed step is taken
    /// back within it. With no due-work channel it also runs at least this often.
    pub interval: Duration,
    /// With a due-work channel (PostgreSQL): the longest the sweep and the reconciler sleep when
    /// they know of nothing sooner, the safety net for notifications lost while the listening
    /// connection was down.
    pub idle_interval: Duration,
    /// Most steps handled in one sweep transaction.
    pub batch: u32,
    /// The leader lease's time to live; renewed every third of it.
    pub leader_ttl: Duration,
    /// The reconciler's cadence bound (C6): it runs at the next timed wait's end or task
    /// deadline, or after a notification, but never twice within this interval, so timed waits
    /// end and task timeouts are enforced within it. With no due-work channel it also runs at
    /// least this often; stalled tasks are looked for on every pass.
    pub reconcile_interval: Duration,
    /// A live task with nothing live that has not changed for this long is decided again.
    pub stale_after: Duration,
    /// The archiver's settings.
    pub archive: ArchiveConfig,
}

/// The archiver (run by the supervisor's leader): finished tasks, retry jobs among them, leave the
/// hot tables for history, so that claims and sweeps stay fast however long the system runs.
#[derive(Debug, Clone)]
pub struct ArchiveConfig {
    /// Whether the leader runs the archiver at all.
    pub enabled: bool,
    /// How often it looks.
    pub interval: Duration,
    /// A task finished at least this long ago moves to history (its retention in the hot tables).
    pub after: Duration,
    /// History older than this is deleted; kept for ever when none.
    pub keep: Option<Duration>,
    /// Top-level tasks per transaction.
    pub batch: u32,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig {
            enabled: true,
            interval: Duration::from_secs(10),
            after: Duration::from_secs(3600),
            keep: None,
            batch: 1000,
        }
    }
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        SupervisorConfig {
            interval: Duration::from_secs(1),
            idle_interval: Duration::from_secs(10),
            batch: 1000,
            leader_ttl: Duration::from_secs(15),
            reconcile_interval: Duration::from_secs(1),
            stale_after: Duration::from_secs(60),
            archive: ArchiveConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// Which roles this process runs.
    pub roles: Roles,
    /// The scheduler's settings, used when it runs the scheduler.
    pub scheduler: SchedulerConfig,
    /// The supervisor's settings, used when it runs the supervisor.
    pub supervisor: SupervisorConfig,
    /// How concurrent single submissions are grouped into transactions.
    pub submit: crate::group_commit::SubmitConfig,
    /// The status channels' dispatcher, used when it runs the dispatcher.
    pub webhooks: crate::dispatcher::DispatchConfig,
    /// The operator's alert sinks, fed by the alerter that runs with the supervisor role.
    pub alerts: crate::alerts::AlertConfig,
}

impl EngineConfig {
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.scheduler;
        if s.concurrency == 0
            || s.min_concurrency == 0
            || s.claim_batch == 0
            || s.reply_batch == 0
            || s.reply_writers == 0
        {
            return Err(
                "scheduler concurrency, min concurrency, claim batch, reply batch and reply writers must be at least 1"
                    .into(),
            );
        }
        if s.poll_interval.is_zero() || s.idle_poll.is_zero() {
            return Err("scheduler poll interval and idle poll must be more than 0".into());
        }
        if let BucketPolicy::List(l) = &s.buckets
            && (l.is_empty() || l.iter().any(|b| *b >= shiftboss_core::buckets::BUCKETS))
        {
            return Err(format!("bucket lists need 1 or more buckets below {}", shiftboss_core::buckets::BUCKETS));
        }
        if s.heartbeat_ttl < Duration::from_millis(30) {
            return Err("the heartbeat ttl must be at least 30ms".into());
        }
        if s.breaker.failure_threshold == 0 {
            return Err("circuit breaker failure threshold must be at least 1".into());
        }
        let v = &self.supervisor;
        if v.interval.is_zero() || v.idle_interval.is_zero() || v.reconcile_interval.is_zero() || v.batch == 0 {
            return Err("supervisor intervals and batch must be more than 0".into());
        }
        if v.archive.interval.is_zero() || v.archive.batch == 0 {
            return Err("archive interval and batch must be more than 0".into());
        }
        if v.leader_ttl < v.interval * 2 {
            return Err("the leader lease must live at least two supervisor intervals".into());
        }
        self.webhooks.validate()?;
        self.alerts.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::EngineConfig;

    #[test]
    fn the_defaults_hold_and_a_zero_limit_is_refused_by_name() {
        assert_eq!(EngineConfig::default().validate(), Ok(()));
        for zero in
            [|c: &mut EngineConfig| c.scheduler.min_concurrency = 0, |c: &mut EngineConfig| c.scheduler.concurrency = 0]
        {
            let mut c = EngineConfig::default();
            zero(&mut c);
            let e = c.validate().expect_err("a zero limit is refused");
            assert!(e.contains("min concurrency") && e.contains("at least 1"), "{e}");
        }
    }
}
