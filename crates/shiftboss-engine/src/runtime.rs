//! Running one claimed step (P4, P5): call the agent, retry transient faults with backoff while
//! complete-by allows, respect the service's circuit breaker, and stop without a word at complete-by.

use crate::agent::{Agent, AgentCall, AgentError};
use crate::exception::{Exception, ExceptionStrategy, Verdict, panic_message};
use crate::metrics::Metrics;
use futures_util::FutureExt;
use shiftboss_core::Timestamp;
use shiftboss_core::backoff::Backoff;
use shiftboss_core::breaker::{Admission, BreakerConfig, BreakerState, CircuitBreaker};
use shiftboss_store::ReplyResult;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

/// A service's circuit as an operator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitView {
    /// Calls wait this much longer before one goes as a probe.
    Open { remaining: Duration },
    /// One call is out as the probe; the others wait for its answer.
    Probing,
}

/// Circuit breakers by service, shared by every step of this process.
#[derive(Default)]
pub struct Breakers {
    config: BreakerConfig,
    by_service: Mutex<HashMap<String, CircuitBreaker>>,
}

impl Breakers {
    pub fn new(config: BreakerConfig) -> Self {
        Breakers { config, by_service: Mutex::default() }
    }

    /// Whether calls to `service` wait on its open circuit in this process now, and how long.
    pub fn view(&self, service: &str) -> Option<CircuitView> {
        let map = self.by_service.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(service)?.state() {
            BreakerState::Closed { .. } => None,
            BreakerState::Open { until } => {
                let now = mono_now();
                (until.0 > now.0).then(|| CircuitView::Open { remaining: until.since(now) })
            }
            BreakerState::HalfOpen => Some(CircuitView::Probing),
        }
    }

    fn with<T>(&self, service: &str, f: impl FnOnce(&mut CircuitBreaker) -> T) -> T {
        let mut map = self.by_service.lock().unwrap_or_else(|p| p.into_inner());
        let b = map.entry(service.to_owned()).or_insert_with(|| CircuitBreaker::new(self.config));
        f(b)
    }
}

/// This process's monotonic clock as a timestamp, for the breaker. It follows tokio's clock, so a
/// paused test clock drives it too.
fn mono_now() -> Timestamp {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    Timestamp(shiftboss_core::time::duration_ms(Instant::now().saturating_duration_since(base)))
}

fn mono_to_instant(t: Timestamp) -> Instant {
    let now = mono_now();
    Instant::now() + t.since(now)
}

/// Runs the call until it succeeds, fails for good, or reaches its deadline. `None` means the
/// deadline came first: nothing is reported, and the supervisor will see the lease lapse (P5).
pub async fn run_step(
    agent: &dyn Agent,
    strategy: Option<&dyn ExceptionStrategy>,
    mut call: AgentCall,
    service: &str,
    breakers: &Breakers,
    backoff: Backoff,
    metrics: &Metrics,
) -> Option<ReplyResult> {
    loop {
        // Progress reports may have moved the deadline on since the last try.
        let deadline = call.progress.deadline();
        if Instant::now() >= deadline {
            Metrics::add(&metrics.dropped_at_deadline, 1);
            return None;
        }
        let admission = breakers.with(service, |b| b.admit(mono_now()));
        let probing = match admission {
            Admission::Call => false,
            Admission::Probe => true,
            Admission::Wait { until } => {
                Metrics::add(&metrics.breaker_waits, 1);
                sleep_until(mono_to_instant(until).min(deadline)).await;
                continue;
            }
        };
        shiftboss_store::fault::reached(shiftboss_store::fault::FaultPoint::BeforeCall);
        // A panicking agent is an exception like an error: its strategy (or the default, a failed
        // attempt) decides, instead of the claim lapsing silently.
        let result = match until_deadline(&call, AssertUnwindSafe(agent.call(&call)).catch_unwind()).await {
            Some(Err(payload)) => {
                let message = panic_message(payload.as_ref());
                tracing::warn!(step = %call.step_id, %message, "the agent panicked");
                Metrics::add(&metrics.panics, 1);
                return Some(match strategy.map(|s| s.judge(Exception::Panic(&message))) {
                    Some(v) if v != Verdict::AsIs => verdict_result(v),
                    _ => ReplyResult::Failed(format!("panic: {message}")),
                });
            }
            Some(Ok(r)) => Some(r),
            None => None,
        };
        let result = match (result, strategy) {
            (Some(Err(e)), Some(s)) if !matches!(e, AgentError::Failure(_) | AgentError::Postpone(_)) => {
                match s.judge(Exception::Error(&e)) {
                    Verdict::AsIs => Some(Err(e)),
                    v => return Some(verdict_result(v)),
                }
            }
            (r, _) => r,
        };
        let deadline = call.progress.deadline();
        match result {
            None => {
                if probing {
                    breakers.with(service, CircuitBreaker::on_abandoned);
                }
                Metrics::add(&metrics.dropped_at_deadline, 1);
                return None;
            }
            Some(Ok(output)) => {
                breakers.with(service, CircuitBreaker::on_success);
                return Some(ReplyResult::Completed(output));
            }
            Some(Err(AgentError::Permanent(e))) => {
                // The service answered: it is up, whatever it thought of the request.
                breakers.with(service, CircuitBreaker::on_success);
                return Some(ReplyResult::PermanentError(e));
            }
            Some(Err(AgentError::Failure(reason))) => {
                // The service answered: the failure is the handler's verdict, not an outage.
                breakers.with(service, CircuitBreaker::on_success);
                return Some(ReplyResult::Failed(reason));
            }
            Some(Err(AgentError::Postpone(after))) => {
                // The service answered "not yet": it is up.
                breakers.with(service, CircuitBreaker::on_success);
                return Some(ReplyResult::Postponed(after));
            }
            Some(Err(AgentError::Transient(e))) => {
                breakers.with(service, |b| b.on_failure(mono_now()));
                tracing::debug!(step = %call.step_id, try_number = call.try_number, error = %e, "transient fault");
                let wait = backoff.delay(call.try_number, fastrand::f64());
                call.try_number += 1;
                Metrics::add(&metrics.in_call_retries, 1);
                sleep_until((Instant::now() + wait).min(deadline)).await;
            }
        }
    }
}

fn verdict_result(v: Verdict) -> ReplyResult {
    match v {
        Verdict::Succeeded(output) => ReplyResult::Completed(output),
        Verdict::Failed(reason) => ReplyResult::Failed(reason),
        Verdict::GaveUp(reason) => ReplyResult::PermanentError(reason),
        // Callers handle `AsIs` themselves; should one slip through, a person looks at it.
        Verdict::AsIs => ReplyResult::PermanentError("an exception the strategy left as is".into()),
    }
}

/// Runs `fut` until the call's deadline, following the deadline as progress reports move it.
async fn until_deadline<T>(call: &AgentCall, fut: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::pin!(fut);
    loop {
        let deadline = call.progress.deadline();
        tokio::select! {
            out = &mut fut => return Some(out),
            _ = sleep_until(deadline) => {
                if call.progress.deadline() <= deadline {
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use shiftboss_core::{StepId, TaskId};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails transiently `fail_first` times, then answers; or hangs forever when `hang`.
    struct Flaky {
        fail_first: u32,
        hang: bool,
        calls: AtomicU32,
        keys: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Agent for Flaky {
        async fn call(&self, call: &AgentCall) -> Result<serde_json::Value, AgentError> {
            self.keys.lock().unwrap().push(call.idempotency_key.clone());
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.hang {
                std::future::pending::<()>().await;
            }
            if n <= self.fail_first {
                return Err(AgentError::Transient(format!("fault {n}")));
            }
            Ok(serde_json::json!({"call": n}))
        }
    }

    fn flaky(fail_first: u32, hang: bool) -> Flaky {
        Flaky { fail_first, hang, calls: AtomicU32::new(0), keys: Mutex::default() }
    }

    fn call(deadline_in: Duration) -> AgentCall {
        AgentCall {
            task_id: TaskId(1),
            step_id: StepId(1),
            step: "s".into(),
            input: serde_json::json!({}),
            config: serde_json::Value::Null,
            idempotency_key: "key-1".into(),
            attempt: 1,
            try_number: 1,
            complete_by: Timestamp(0),
            deadline: Instant::now() + deadline_in,
            progress: crate::progress::Progress::fixed(Instant::now() + deadline_in),
            previous_progress: None,
        }
    }

    struct Slow;

    #[async_trait]
    impl Agent for Slow {
        async fn call(&self, _call: &AgentCall) -> Result<serde_json::Value, AgentError> {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok(serde_json::json!("done"))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_moved_on_by_progress_lets_a_long_call_finish() {
        let m = Metrics::default();
        let mut c = call(Duration::from_secs(2));
        let out = run_step(&Slow, None, c.clone(), "svc", &breakers(100), Backoff::default(), &m).await;
        assert!(out.is_none(), "without progress the call is dropped at 2 s");
        let (progress, mover) = crate::progress::Progress::manual(Instant::now() + Duration::from_secs(2));
        c.progress = progress;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            mover.send_replace(Instant::now() + Duration::from_secs(4));
        });
        let out = run_step(&Slow, None, c, "svc", &breakers(100), Backoff::default(), &m).await;
        assert!(matches!(out, Some(ReplyResult::Completed(v)) if v == "done"), "the moved deadline let it finish");
    }

    struct NotYet;

    #[async_trait]
    impl Agent for NotYet {
        async fn call(&self, _call: &AgentCall) -> Result<serde_json::Value, AgentError> {
            Err(AgentError::Postpone(Duration::from_secs(30)))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_postponement_is_answered_at_once_not_retried_nor_judged() {
        let m = Metrics::default();
        // A strategy that would give up on any error: a postponement is not an error it judges.
        let strict = |_e: Exception<'_>| Verdict::GaveUp("judged".into());
        let out =
            run_step(&NotYet, Some(&strict), call(Duration::from_secs(2)), "svc", &breakers(1), Backoff::default(), &m)
                .await;
        assert!(matches!(out, Some(ReplyResult::Postponed(d)) if d == Duration::from_secs(30)), "{out:?}");
        assert_eq!(m.snapshot().in_call_retries, 0, "not retried within the call");
    }

    fn breakers(threshold: u32) -> Breakers {
        Breakers::new(BreakerConfig { failure_threshold: threshold, open_for: Duration::from_millis(200) })
    }

    #[tokio::test(start_paused = true)]
    async fn transient_faults_are_retried_with_the_same_key_within_the_deadline() {
        let agent = flaky(3, false);
        let m = Metrics::default();
        let out =
            run_step(&agent, None, call(Duration::from_secs(10)), "svc", &breakers(100), Backoff::default(), &m).await;
        assert_eq!(out.map(|r| matches!(r, ReplyResult::Completed(_))), Some(true));
        assert_eq!(agent.calls.load(Ordering::SeqCst), 4);
        assert!(agent.keys.lock().unwrap().iter().all(|k| k == "key-1"));
        assert_eq!(m.snapshot().in_call_retries, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_call_is_dropped_at_the_deadline_with_nothing_reported() {
        let agent = flaky(0, true);
        let m = Metrics::default();
        let start = Instant::now();
        let out =
            run_step(&agent, None, call(Duration::from_secs(3)), "svc", &breakers(100), Backoff::default(), &m).await;
        assert!(out.is_none());
        assert_eq!(Instant::now() - start, Duration::from_secs(3));
        assert_eq!(m.snapshot().dropped_at_deadline, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn faults_until_the_deadline_report_nothing() {
        let agent = flaky(u32::MAX, false);
        let m = Metrics::default();
        let out =
            run_step(&agent, None, call(Duration::from_secs(2)), "svc", &breakers(100), Backoff::default(), &m).await;
        assert!(out.is_none());
        assert!(agent.calls.load(Ordering::SeqCst) > 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_breaker_holds_calls_back_then_probes() {
        let agent = flaky(2, false);
        let m = Metrics::default();
        let b = breakers(2);
        let no_backoff = Backoff { base: Duration::ZERO, cap: Duration::ZERO };
        let start = Instant::now();
        let out = run_step(&agent, None, call(Duration::from_secs(5)), "svc", &b, no_backoff, &m).await;
        assert!(matches!(out, Some(ReplyResult::Completed(_))));
        // Two faults opened the breaker; the third call waited out open_for as a probe.
        assert_eq!(agent.calls.load(Ordering::SeqCst), 3);
        assert!(Instant::now() - start >= Duration::from_millis(200));
        assert!(m.snapshot().breaker_waits >= 1);
    }

    /// What an operator reads of a circuit: nothing while it is closed, the time left while it
    /// is open, the probe while it is half open.
    #[tokio::test(start_paused = true)]
    async fn a_circuit_is_seen_open_with_its_time_left_then_probing_then_closed() {
        let b = breakers(2);
        assert_eq!(b.view("svc"), None, "a service never called");
        b.with("svc", |c| c.on_failure(mono_now()));
        assert_eq!(b.view("svc"), None, "one fault of two: still closed");
        b.with("svc", |c| c.on_failure(mono_now()));
        assert_eq!(b.view("svc"), Some(CircuitView::Open { remaining: Duration::from_millis(200) }));
        tokio::time::advance(Duration::from_millis(150)).await;
        assert_eq!(b.view("svc"), Some(CircuitView::Open { remaining: Duration::from_millis(50) }));
        assert_eq!(b.view("other"), None, "circuits are per service");
        tokio::time::advance(Duration::from_millis(60)).await;
        assert_eq!(b.view("svc"), None, "past its time the next call probes; nothing waits on it");
        assert_eq!(b.with("svc", |c| c.admit(mono_now())), Admission::Probe);
        assert_eq!(b.view("svc"), Some(CircuitView::Probing));
        b.with("svc", CircuitBreaker::on_success);
        assert_eq!(b.view("svc"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_error_is_reported_at_once() {
        struct No;
        #[async_trait]
        impl Agent for No {
            async fn call(&self, _: &AgentCall) -> Result<serde_json::Value, AgentError> {
                Err(AgentError::Permanent("card declined".into()))
            }
        }
        let m = Metrics::default();
        let out = run_step(&No, None, call(Duration::from_secs(5)), "svc", &breakers(1), Backoff::default(), &m).await;
        assert!(matches!(out, Some(ReplyResult::PermanentError(e)) if e == "card declined"));
    }
}
