//! `/metrics`: Prometheus's text format. API requests are counted as they are served; the
//! engine's counters and the store's counts are read at each scrape.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use shiftboss_core::TaskState;
use shiftboss_engine::metrics::MetricsSnapshot;
use shiftboss_store::{DeliveryBacklog, QueueStats};
use std::time::Duration;

/// What this process counts, and the gauges set at each scrape.
pub struct ApiMetrics {
    registry: Registry,
    requests: IntCounterVec,
    durations: HistogramVec,
    engine: IntCounterVec,
    tasks: IntGaugeVec,
    steps: IntGaugeVec,
    oldest_due: prometheus::GaugeVec,
    backlog: IntGaugeVec,
    backlog_due: prometheus::Gauge,
    leader_term: IntGauge,
    slot_limit: IntGauge,
    polls_waiting: IntGauge,
    leading: IntGauge,
    sweeps: IntCounterVec,
    submissions: IntCounterVec,
    deliveries: IntCounterVec,
    alerts: IntCounterVec,
    store_up: IntGauge,
    /// Held while a scrape brings the counters level with the engine's: two scrapes at once would
    /// both add the same difference.
    rendering: std::sync::Mutex<()>,
}

/// The engine's counters, by the name of their `event` label.
fn engine_counters(m: &MetricsSnapshot) -> [(&'static str, u64); 12] {
    [
        ("claimed", m.claimed),
        ("completed", m.completed),
        ("permanent_error", m.permanent_errors),
        ("in_call_retry", m.in_call_retries),
        ("failed", m.failed),
        ("postponed", m.postponed),
        ("expired", m.expired),
        ("gave_up", m.gave_up),
        ("released", m.released),
        ("rejected_reply", m.rejected_replies),
        ("dropped_at_deadline", m.dropped_at_deadline),
        ("panic", m.panics),
    ]
}

impl ApiMetrics {
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new_custom(Some("shiftboss".into()), None)?;
        let requests = IntCounterVec::new(
            Opts::new("api_requests_total", "API requests served, by route, method and status."),
            &["route", "method", "status"],
        )?;
        let durations = HistogramVec::new(
            HistogramOpts::new("api_request_duration_seconds", "API request durations, by route and method.")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0]),
            &["route", "method"],
        )?;
        let engine = IntCounterVec::new(
            Opts::new(
                "engine_steps_total",
                "What this process's scheduler and supervisor did to steps: claimed, completed, retried, expired, released...",
            ),
            &["event"],
        )?;
        let tasks = IntGaugeVec::new(Opts::new("tasks", "Tasks in the hot tables, by state."), &["state"])?;
        let steps = IntGaugeVec::new(
            Opts::new(
                "agent_steps",
                "Live agent steps by agent type and state: due (the queue's depth), later (a retry's delay, a held task), processing, error.",
            ),
            &["agent", "state"],
        )?;
        let oldest_due = prometheus::GaugeVec::new(
            Opts::new(
                "agent_oldest_due_age_seconds",
                "How long the oldest due step of each agent type has waited (0: none is due).",
            ),
            &["agent"],
        )?;
        let backlog = IntGaugeVec::new(
            Opts::new(
                "webhook_backlog",
                "Status-channel deliveries in the outbox by state, pending and dead (each counted up to 10,000).",
            ),
            &["state"],
        )?;
        let backlog_due = prometheus::Gauge::new(
            "webhook_oldest_due_age_seconds",
            "How long the earliest due pending delivery has been due (0: none is due).",
        )?;
        let leader_term = IntGauge::new(
            "supervisor_leader_term",
            "The supervisor's leader term this process holds (0: it does not lead).",
        )?;
        let leading = IntGauge::new("supervisor_leading", "1 when this process leads the supervisor, else 0.")?;
        let slot_limit = IntGauge::new(
            "scheduler_slot_limit",
            "Steps this process's scheduler may run at once now: it adapts between min_concurrency and concurrency (0: no scheduler).",
        )?;
        let polls_waiting = IntGauge::new(
            "remote_polls_waiting",
            "Remote workers' polls waiting for work whose claim rides with the next submissions' transaction (the handoff).",
        )?;
        let sweeps = IntCounterVec::new(
            Opts::new(
                "supervisor_sweeps_total",
                "Supervisor sweeps run by this process (count), and their time (microseconds).",
            ),
            &["measure"],
        )?;
        let submissions = IntCounterVec::new(
            Opts::new(
                "submissions_total",
                "Single task submissions this process wrote by group commit (tasks), the transactions that wrote them, and the steps those transactions claimed for remote workers' waiting polls (handed_off).",
            ),
            &["measure"],
        )?;
        let deliveries = IntCounterVec::new(
            Opts::new(
                "webhook_attempts_total",
                "Status-channel delivery attempts this process's dispatcher made, by outcome: delivered, failed (tried again later), dead, throttled (429), gone (410).",
            ),
            &["outcome"],
        )?;
        let alerts = IntCounterVec::new(
            Opts::new(
                "alerts_total",
                "Operator alerts this process's alerter raised, repeats it folded into summaries, and what its sinks did with alerts: sent, failed, dropped (a full queue).",
            ),
            &["outcome"],
        )?;
        let store_up = IntGauge::new("store_up", "1 when the state store answered the last scrape's queries, else 0.")?;
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(durations.clone()),
            Box::new(engine.clone()),
            Box::new(tasks.clone()),
            Box::new(steps.clone()),
            Box::new(oldest_due.clone()),
            Box::new(backlog.clone()),
            Box::new(backlog_due.clone()),
            Box::new(leader_term.clone()),
            Box::new(leading.clone()),
            Box::new(slot_limit.clone()),
            Box::new(polls_waiting.clone()),
            Box::new(sweeps.clone()),
            Box::new(submissions.clone()),
            Box::new(deliveries.clone()),
            Box::new(alerts.clone()),
            Box::new(store_up.clone()),
        ] {
            registry.register(c)?;
        }
        Ok(ApiMetrics {
            registry,
            requests,
            durations,
            engine,
            tasks,
            steps,
            oldest_due,
            backlog,
            backlog_due,
            leader_term,
            leading,
            slot_limit,
            polls_waiting,
            sweeps,
            submissions,
            deliveries,
            alerts,
            store_up,
            rendering: std::sync::Mutex::default(),
        })
    }

    /// Counts one served request. `route` is the matched route's template, so that ids in paths
    /// do not make a series each.
    pub fn request(&self, route: &str, method: &str, status: u16, took: Duration) {
        self.requests.with_label_values(&[route, method, &status.to_string()]).inc();
        self.durations.with_label_values(&[route, method]).observe(took.as_secs_f64());
    }

    /// The scrape's text: the engine's counters and the store's counts (none when it is out of
    /// reach) set first.
    pub fn render(&self, engine: &MetricsSnapshot, store: Option<StoreCounts<'_>>) -> String {
        let _one_at_a_time = self.rendering.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (event, value) in engine_counters(engine) {
            let c = self.engine.with_label_values(&[event]);
            // The engine's counters only grow; the difference brings ours level with them.
            c.inc_by(value.saturating_sub(c.get()));
        }
        let sweeps = self.sweeps.with_label_values(&["count"]);
        sweeps.inc_by(engine.sweeps.saturating_sub(sweeps.get()));
        let micros = self.sweeps.with_label_values(&["microseconds"]);
        micros.inc_by(engine.sweep_micros.saturating_sub(micros.get()));
        let submissions =
            [("tasks", engine.submitted), ("transactions", engine.submit_batches), ("handed_off", engine.handed_off)];
        for (measure, value) in submissions {
            let c = self.submissions.with_label_values(&[measure]);
            c.inc_by(value.saturating_sub(c.get()));
        }
        for (vec, values) in [(&self.deliveries, &engine.deliveries[..]), (&self.alerts, &engine.alerts[..])] {
            for (outcome, value) in values.iter().filter(|(o, _)| !o.is_empty()) {
                let c = vec.with_label_values(&[*outcome]);
                c.inc_by(value.saturating_sub(c.get()));
            }
        }
        self.leader_term.set(i64::try_from(engine.leader_term).unwrap_or(i64::MAX));
        self.leading.set(i64::from(engine.leader_term > 0));
        self.slot_limit.set(i64::try_from(engine.slot_limit).unwrap_or(i64::MAX));
        self.polls_waiting.set(i64::try_from(engine.polls_waiting).unwrap_or(i64::MAX));
        self.store_up.set(i64::from(store.is_some()));
        if let Some(StoreCounts { tasks, queues, backlog }) = store {
            self.backlog.with_label_values(&["pending"]).set(count(backlog.pending));
            self.backlog.with_label_values(&["dead"]).set(count(backlog.dead));
            let due = backlog.oldest_due.map_or(0.0, |t| backlog.now.since(t).as_secs_f64());
            self.backlog_due.set(due);
            for state in TaskState::ALL {
                let n = tasks.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n);
                self.tasks.with_label_values(&[state.as_str()]).set(count(n));
            }
            // Agent types that emptied since the last scrape leave no stale series behind.
            self.steps.reset();
            self.oldest_due.reset();
            for q in &queues.agents {
                for (state, n) in [("due", q.due), ("later", q.later), ("processing", q.processing), ("error", q.error)]
                {
                    self.steps.with_label_values(&[q.agent.as_str(), state]).set(count(n));
                }
                let age = q.oldest_due_at.map_or(0.0, |t| queues.now.since(t).as_secs_f64());
                self.oldest_due.with_label_values(&[q.agent.as_str()]).set(age);
            }
        }
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "metrics could not be encoded");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// What a scrape read from the store.
pub struct StoreCounts<'a> {
    pub tasks: &'a [(TaskState, u64)],
    pub queues: &'a QueueStats,
    pub backlog: &'a DeliveryBacklog,
}

/// The most deliveries a scrape counts in each state of the backlog.
pub const BACKLOG_CAP: u32 = 10_000;

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
