//! The figures a chaos run prints, and which of them fail it.

use super::audit::Audit;
use super::notify::NotifyFigures;
use super::process_submit::ProcessFigures;
use super::replicas::{Failover, Outage};
use shiftboss_store::fault::FaultPoint;
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest a failover may stall the work: the store's bounds on a silent primary (a call given
/// up after 10 s, each host's connect after 5 s) and what a loaded machine adds.
const FAILOVER_BOUND: Duration = Duration::from_secs(25);

/// What the harness did and saw while faults ran.
#[derive(Debug, Default)]
pub struct Injected {
    pub kills: u64,
    pub leader_kills: u64,
    pub deaths_at: BTreeMap<&'static str, u64>,
    /// Deaths the harness did not cause (a panic, an error exit): each one fails the run.
    pub unexpected_deaths: Vec<String>,
    pub pauses: u64,
    pub connection_terminations: u64,
    pub connections_terminated: u64,
    pub postgres_restarts: u64,
    pub worker_restarts: u64,
    /// Workers that exited with an error right after starting (the store unreachable).
    pub start_failures: u64,
    /// Submissions that failed and were tried again (the store was away).
    pub submit_retries: u64,
    /// The submitting processes killed mid-submit, and what became of their submissions.
    pub by_process: ProcessFigures,
    /// `--failover`: each failover and the time from its promotion to the first step completed.
    pub failovers: Vec<Failover>,
}

impl Injected {
    pub fn died_at(&mut self, p: FaultPoint) {
        *self.deaths_at.entry(p.as_str()).or_default() += 1;
    }
}

/// Everything the closing report shows.
pub struct Report {
    pub store: String,
    pub seed: u64,
    pub workers: usize,
    pub submitted: u64,
    pub acknowledged: u64,
    /// Tasks the store holds after the run.
    pub in_store: u64,
    pub terminal: u64,
    pub by_state: Vec<(String, u64)>,
    /// Acknowledged submissions whose task the store no longer has.
    pub lost: u64,
    pub applied_twice: u64,
    pub duplicates_dropped: u64,
    pub injected: Injected,
    pub audit: Audit,
    /// The leader lease's term at the end: how many times it changed hands, plus one.
    pub leader_term: Option<i64>,
    /// `PRAGMA integrity_check` of a SQLite store, when the run used one.
    pub integrity: Option<String>,
    /// Workers that did not stop cleanly when asked at the end.
    pub unclean_stops: Vec<String>,
    /// The status channel's messages: written, received, lost.
    pub notifications: NotifyFigures,
    pub faults_for: Duration,
    pub elapsed: Duration,
}

impl Report {
    /// Each failed check, described; empty when the run passed.
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                f.push(what);
            }
        };
        check(self.terminal == self.acknowledged, format!("{} tasks not terminal", self.acknowledged - self.terminal));
        check(self.lost == 0, format!("{} acknowledged tasks lost", self.lost));
        check(
            self.in_store == self.acknowledged,
            format!("the store holds {} tasks, {} were acknowledged", self.in_store, self.acknowledged),
        );
        check(self.applied_twice == 0, format!("{} effects applied twice", self.applied_twice));
        let a = &self.audit;
        check(a.late_completions_applied == 0, format!("{} late completions applied", a.late_completions_applied));
        check(a.expiries_counted_twice == 0, format!("{} expiries counted twice", a.expiries_counted_twice));
        check(
            a.pending_and_error == 0,
            format!("{} steps both returned to Pending and put in Error", a.pending_and_error),
        );
        check(
            a.failure_count_mismatches == 0,
            format!("{} steps whose FailureCount differs from their lease expiries", a.failure_count_mismatches),
        );
        check(
            self.injected.unexpected_deaths.is_empty(),
            format!("unexpected deaths: {:?}", self.injected.unexpected_deaths),
        );
        if let Some(slowest) = self.injected.failovers.iter().map(|f| f.first_step).max() {
            check(
                slowest <= FAILOVER_BOUND,
                format!("a step completed only {slowest:?} after a promotion (bound {FAILOVER_BOUND:?})"),
            );
        }
        check(self.integrity.as_deref().is_none_or(|i| i == "ok"), format!("integrity_check: {:?}", self.integrity));
        check(self.unclean_stops.is_empty(), format!("workers that did not stop cleanly: {:?}", self.unclean_stops));
        let n = &self.notifications;
        check(n.lost == 0, format!("{} notifications lost", n.lost));
        check(n.dead == 0 && n.pending == 0, format!("{} deliveries dead, {} still pending", n.dead, n.pending));
        f
    }

    pub fn print(&self) {
        let i = &self.injected;
        let a = &self.audit;
        let points: Vec<String> = i.deaths_at.iter().map(|(p, n)| format!("{p} {n}")).collect();
        let states: Vec<String> = self.by_state.iter().map(|(s, n)| format!("{s} {n}")).collect();
        println!(
            "shiftboss-lab chaos: summary (seed {}, {} worker process(es) on {})",
            self.seed, self.workers, self.store
        );
        println!(
            "  tasks                 {} submitted, {} acknowledged, {} in the store",
            self.submitted, self.acknowledged, self.in_store
        );
        println!("  terminal              {} of {} ({})", self.terminal, self.acknowledged, states.join(", "));
        println!("  lost                  {}", self.lost);
        println!(
            "  kills (SIGKILL)       {} at random moments ({} of the leader), {} at injected points ({})",
            i.kills,
            i.leader_kills,
            i.deaths_at.values().sum::<u64>(),
            if points.is_empty() { "none".to_owned() } else { points.join(", ") }
        );
        println!("  pauses (SIGSTOP)      {} (each longer than complete-by and the leader lease)", i.pauses);
        println!(
            "  PostgreSQL            {} restarts, {} rounds of pg_terminate_backend ({} connections)",
            i.postgres_restarts, i.connection_terminations, i.connections_terminated
        );
        println!(
            "  restarts survived     {} worker restarts ({} could not start: store unreachable); {} submissions retried",
            i.worker_restarts, i.start_failures, i.submit_retries
        );
        let p = &i.by_process;
        println!(
            "  killed submitters     {} of the submitting processes killed mid-submit ({} had committed); {} acknowledged by a process",
            p.killed, p.committed_before_kill, p.acknowledged
        );
        if !i.failovers.is_empty() {
            let mut times: Vec<Duration> = i.failovers.iter().map(|f| f.first_step).collect();
            times.sort();
            let crashed = i.failovers.iter().filter(|f| f.outage == Outage::Crash).count();
            println!(
                "  failovers             {} ({crashed} primaries crashed, {} frozen); promotion to first step completed p50 {:.2} s, max {:.2} s",
                times.len(),
                times.len() - crashed,
                times[times.len() / 2].as_secs_f64(),
                times[times.len() - 1].as_secs_f64()
            );
        }
        if let Some(t) = self.leader_term {
            println!("  leader term           {t} at the end (the lease changed hands {} times)", t.saturating_sub(1));
        }
        println!(
            "  effects applied twice {} (repeated requests dropped by idempotency key: {})",
            self.applied_twice, self.duplicates_dropped
        );
        let n = &self.notifications;
        println!(
            "  notifications lost    {} of {} messages (the receiver saw {} requests, accepted {} with repeats; {} dead, {} pending; drained in {:.1} s)",
            n.lost,
            n.expected,
            n.requests,
            n.accepted,
            n.dead,
            n.pending,
            n.drained_in.as_secs_f64()
        );
        println!("  late completions      applied {}, refused {}", a.late_completions_applied, a.late_replies_refused);
        println!(
            "  lease expiries        {} expired + {} released = {}; sum of FailureCount {} ({} steps differ)",
            a.expiries,
            a.releases,
            a.expiries + a.releases,
            a.failure_counts,
            a.failure_count_mismatches
        );
        println!(
            "  expiries twice        {}; steps both re-queued and put in Error: {}",
            a.expiries_counted_twice, a.pending_and_error
        );
        println!("  longest overdue       {} ms in Processing past complete-by", a.longest_overdue_ms.max(0));
        println!("  steps                 {} agent steps, {} claims", a.steps, a.claims);
        if let Some(ok) = &self.integrity {
            println!("  integrity_check       {ok}");
        }
        println!(
            "  elapsed               {:.1} s ({:.1} s with faults)",
            self.elapsed.as_secs_f64(),
            self.faults_for.as_secs_f64()
        );
        for e in &a.examples {
            println!("  finding: {e}");
        }
        let failures = self.failures();
        if failures.is_empty() {
            println!("  result                PASS");
        } else {
            println!("  result                FAIL: {}", failures.join("; "));
        }
    }
}
