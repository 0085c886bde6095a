//! What becomes of a step whose lease lapsed: the same decision in every store, so that a backend
//! only writes it. Pure: time and randomness come in as arguments.

use crate::event_kind as ev;
use serde_json::json;
use shiftboss_core::retry::{RetryDecision, RetryPolicies, RetryPolicy};
use shiftboss_core::state::StepEvent;
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepState, Timestamp};

/// Why a held step is being taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapse {
    /// Its complete-by passed (the supervisor's sweep): retry after the policy's delay.
    Expired,
    /// Its holder restarted: retry at once.
    Released,
    /// A due attempt was not claimed within the step's claim timeout (the supervisor's sweep):
    /// by the step's timeout policy, as an expiry.
    Unclaimed,
}

/// What a store reads of a held step to decide.
#[derive(Debug, Clone, Copy)]
pub struct LapsedStep<'a> {
    /// Its agent, whose policy applies when the row carries none.
    pub agent: &'a str,
    /// Failures counted so far, before this one.
    pub failure_count: u32,
    /// The retry policy on the step's row, if any.
    pub retry: Option<&'a RetryPolicy>,
    /// Its holder, named in the event and the reason.
    pub locked_by: Option<&'a str>,
    /// The token of the lapsed claim, for the event.
    pub lease_token: i64,
    /// The step's timeout policy; an expiry of a `fail_task` step gives up at once. (A store
    /// handles `alert_only` itself: the step stays with its holder.)
    pub on_timeout: OnTimeout,
    /// When all its attempts must have ended (its total timeout): no retry is due at or after it.
    pub deadline_at: Option<Timestamp>,
}

/// What to write: the step's new fields, and its events.
#[derive(Debug, Clone, PartialEq)]
pub struct LapsePlan {
    /// The state the step is taken from (Processing; Pending for an unclaimed attempt): the
    /// write is fenced by it.
    pub from: StepState,
    /// Pending to run again, or Error when the policy gives up.
    pub next: StepState,
    /// The count with this failure.
    pub failure_count: u32,
    /// When it may be claimed again: after the policy's delay; now for a release or when the policy gives up.
    pub due_at: Timestamp,
    /// The step's `last_error`.
    pub why: String,
    /// The event of the lapse (`step.expired` or `step.released`) and its detail.
    pub kind: &'static str,
    /// The event's detail: the count, the lease, the holder and the retry time.
    pub detail: serde_json::Value,
    /// When the policy gives up: the detail of the `step.error` alert.
    pub alert: Option<serde_json::Value>,
}

/// Decides. `random` is in [0, 1), for jittered policies.
pub fn plan(step: LapsedStep<'_>, lapse: Lapse, now: Timestamp, policies: &RetryPolicies, random: f64) -> LapsePlan {
    let failure_count = step.failure_count + 1;
    let timed_out = matches!(lapse, Lapse::Expired | Lapse::Unclaimed);
    let decision = match step.on_timeout {
        OnTimeout::FailTask if timed_out => RetryDecision::GiveUp,
        _ => policies.resolve(step.agent, step.retry).after_failure(failure_count, random),
    };
    // A release retries at once, whatever the policy's delay.
    let at_once = lapse == Lapse::Released;
    let (decision, past_deadline) = within_deadline(decision, &step, now, at_once);
    let give_up = decision == RetryDecision::GiveUp;
    let from = if lapse == Lapse::Unclaimed { StepState::Pending } else { StepState::Processing };
    let event = match lapse {
        Lapse::Unclaimed => StepEvent::ClaimTimeout { give_up },
        _ => StepEvent::Expire { give_up },
    };
    let next = from.on(event).expect("a processing step can always expire, a pending one time out");
    let due_at = match (decision, lapse) {
        (RetryDecision::RetryAfter(d), Lapse::Expired | Lapse::Unclaimed) => now.plus(d),
        _ => now,
    };
    let holder = step.locked_by.unwrap_or("?");
    let (kind, why) = match lapse {
        Lapse::Expired => (ev::STEP_EXPIRED, format!("lease expired: no reply by complete-by (held by {holder})")),
        Lapse::Released => (ev::STEP_RELEASED, format!("its holder {holder} restarted while holding it")),
        Lapse::Unclaimed => (ev::STEP_UNCLAIMED, "no claim within its claim timeout (no worker polled for it)".into()),
    };
    let reason = match step.on_timeout {
        _ if past_deadline => "its total timeout passed",
        OnTimeout::FailTask if timed_out => "timed out; the step's policy fails the task",
        _ => "retry policy exhausted",
    };
    let mut p = finish(step, failure_count, next, due_at, kind, why, reason);
    p.from = from;
    p
}

/// The retry decision, given up when the next attempt would be due at or after the step's total
/// timeout (at once, or after the policy's delay); true when that is why it gives up.
fn within_deadline(
    decision: RetryDecision,
    step: &LapsedStep<'_>,
    now: Timestamp,
    at_once: bool,
) -> (RetryDecision, bool) {
    match (decision, step.deadline_at) {
        (RetryDecision::RetryAfter(d), Some(deadline)) => {
            let due = if at_once { now } else { now.plus(d) };
            if due >= deadline { (RetryDecision::GiveUp, true) } else { (decision, false) }
        }
        (d, _) => (d, false),
    }
}

/// Decides for an attempt its agent reported as failed (a retry job's handler failure, M5): the
/// next try after the policy's delay, with the count one up and the reason kept, or Error.
pub fn plan_failure(
    step: LapsedStep<'_>,
    reason: &str,
    now: Timestamp,
    policies: &RetryPolicies,
    random: f64,
) -> LapsePlan {
    let failure_count = step.failure_count + 1;
    let decision = policies.resolve(step.agent, step.retry).after_failure(failure_count, random);
    let (decision, past_deadline) = within_deadline(decision, &step, now, false);
    let give_up = decision == RetryDecision::GiveUp;
    let next = StepState::Processing.on(StepEvent::Fail { give_up }).expect("a processing step can always fail");
    let due_at = match decision {
        RetryDecision::RetryAfter(d) => now.plus(d),
        RetryDecision::GiveUp => now,
    };
    let reason_given_up = if past_deadline { "its total timeout passed" } else { "retry policy exhausted" };
    finish(step, failure_count, next, due_at, ev::STEP_FAILED, reason.to_owned(), reason_given_up)
}

/// Decides for a step its agent handed back unfinished: Pending again, due after `after` (at most
/// [`crate::MAX_POSTPONE`]), its failure count as it was; Error when that is at or past the step's
/// total timeout. `why` (the step's `last_error`) is [`postponed_why`], so a repeat of the reply
/// is told from another.
pub fn plan_postpone(step: LapsedStep<'_>, after: std::time::Duration, now: Timestamp) -> LapsePlan {
    let after = after.min(crate::MAX_POSTPONE);
    let due_at = now.plus(after);
    let past_deadline = step.deadline_at.is_some_and(|deadline| due_at >= deadline);
    let next = StepState::Processing
        .on(StepEvent::Postpone { give_up: past_deadline })
        .expect("a processing step can always be postponed");
    let mut p = finish(
        step,
        step.failure_count,
        next,
        if past_deadline { now } else { due_at },
        ev::STEP_POSTPONED,
        postponed_why(after),
        "its total timeout passed",
    );
    if let Some(detail) = p.detail.as_object_mut() {
        detail.insert("after_ms".into(), json!(after.as_millis() as u64));
    }
    p
}

/// The `last_error` a postponement leaves on its step.
pub fn postponed_why(after: std::time::Duration) -> String {
    let after = after.min(crate::MAX_POSTPONE);
    format!("{POSTPONED} after {} ms", after.as_millis())
}

/// Whether a step's `last_error` is a postponement's (handed back; no failure counted).
pub fn is_postponed_why(last_error: &str) -> bool {
    last_error.starts_with(POSTPONED)
}

/// Neutral as to who: an agent's postponement, or the server's hand-back of steps claimed for a
/// poll that went away.
const POSTPONED: &str = "handed back unfinished, due again";

/// The plan of a reply that sends its step back to Pending (a failed attempt, a postponement);
/// `None` for a reply that ends the step.
pub fn plan_reply(
    step: LapsedStep<'_>,
    result: &crate::ReplyResult,
    now: Timestamp,
    policies: &RetryPolicies,
    random: f64,
) -> Option<LapsePlan> {
    match result {
        crate::ReplyResult::Failed(reason) => {
            Some(plan_failure(step, &crate::advance::error_text(reason), now, policies, random))
        }
        crate::ReplyResult::Postponed(after) => Some(plan_postpone(step, *after, now)),
        crate::ReplyResult::Completed(_) | crate::ReplyResult::PermanentError(_) => None,
    }
}

fn finish(
    step: LapsedStep<'_>,
    failure_count: u32,
    next: StepState,
    due_at: Timestamp,
    kind: &'static str,
    why: String,
    give_up_reason: &str,
) -> LapsePlan {
    let give_up = next == StepState::Error;
    let detail = json!({
        "failure_count": failure_count,
        "lease_token": step.lease_token,
        "held_by": step.locked_by,
        "retry_at": (!give_up).then_some(due_at.0),
    });
    let alert = give_up.then(|| json!({"reason": give_up_reason, "failure_count": failure_count, "error": why}));
    LapsePlan { from: StepState::Processing, next, failure_count, due_at, why, kind, detail, alert }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn step(failure_count: u32) -> LapsedStep<'static> {
        LapsedStep {
            agent: "pay",
            failure_count,
            retry: None,
            locked_by: Some("s1"),
            lease_token: 7,
            on_timeout: OnTimeout::Retry,
            deadline_at: None,
        }
    }

    fn policies() -> RetryPolicies {
        let intervals = vec![Duration::from_secs(1), Duration::from_secs(5)];
        RetryPolicies { default: RetryPolicy::Intervals { intervals, max_failures: None }, ..Default::default() }
    }

    #[test]
    fn an_expiry_waits_the_policys_delay_and_a_release_does_not() {
        let now = Timestamp(1_000_000);
        let p = plan(step(1), Lapse::Expired, now, &policies(), 0.5);
        assert_eq!((p.next, p.failure_count, p.due_at), (StepState::Pending, 2, Timestamp(1_005_000)));
        assert_eq!((p.kind, p.alert.is_none()), (ev::STEP_EXPIRED, true));
        assert_eq!(p.detail["retry_at"], 1_005_000);
        let r = plan(step(1), Lapse::Released, now, &policies(), 0.5);
        assert_eq!((r.next, r.due_at, r.kind), (StepState::Pending, now, ev::STEP_RELEASED));
        assert!(r.why.contains("s1 restarted"));
    }

    #[test]
    fn a_fail_task_step_gives_up_at_its_first_expiry_but_not_at_a_release() {
        let s = LapsedStep { on_timeout: OnTimeout::FailTask, ..step(0) };
        let p = plan(s, Lapse::Expired, Timestamp(0), &policies(), 0.5);
        assert_eq!((p.next, p.failure_count), (StepState::Error, 1));
        assert!(p.alert.unwrap()["reason"].as_str().unwrap().contains("fails the task"));
        assert_eq!(plan(s, Lapse::Released, Timestamp(0), &policies(), 0.5).next, StepState::Pending);
    }

    #[test]
    fn a_reported_failure_follows_the_interval_list_and_keeps_its_reason() {
        let now = Timestamp(1_000_000);
        let first = plan_failure(step(0), "smtp refused", now, &policies(), 0.5);
        assert_eq!((first.next, first.failure_count, first.due_at), (StepState::Pending, 1, Timestamp(1_001_000)));
        assert_eq!((first.kind, first.why.as_str()), (ev::STEP_FAILED, "smtp refused"));
        let second = plan_failure(step(1), "smtp refused", now, &policies(), 0.5);
        assert_eq!(second.due_at, Timestamp(1_005_000));
        let last = plan_failure(step(2), "still refused", now, &policies(), 0.5);
        assert_eq!((last.next, last.failure_count), (StepState::Error, 3));
        assert_eq!(last.alert.unwrap()["error"], "still refused");
    }

    #[test]
    fn a_postponed_step_waits_its_delay_and_counts_no_failure() {
        let now = Timestamp(1_000_000);
        let p = plan_postpone(step(2), Duration::from_secs(30), now);
        assert_eq!((p.next, p.failure_count, p.due_at), (StepState::Pending, 2, Timestamp(1_030_000)));
        assert_eq!((p.kind, p.alert.is_none()), (ev::STEP_POSTPONED, true));
        assert_eq!((p.detail["after_ms"].as_u64(), p.detail["retry_at"].as_i64()), (Some(30_000), Some(1_030_000)));
        assert_eq!(p.why, postponed_why(Duration::from_secs(30)));
        // At or past the total timeout: Error, with the reason.
        let past = LapsedStep { deadline_at: Some(Timestamp(1_030_000)), ..step(0) };
        let e = plan_postpone(past, Duration::from_secs(30), now);
        assert_eq!((e.next, e.failure_count), (StepState::Error, 0));
        assert_eq!(e.alert.unwrap()["reason"], "its total timeout passed");
        // A delay longer than the longest is cut to it.
        let far = plan_postpone(step(0), Duration::from_secs(u64::MAX / 4), now);
        assert_eq!(far.due_at, now.plus(crate::MAX_POSTPONE));
    }

    #[test]
    fn no_retry_is_due_at_or_after_the_total_timeout() {
        let now = Timestamp(1_000_000);
        // The next try would be due at 1_005_000: within a deadline after it, past one before it.
        let within = LapsedStep { deadline_at: Some(Timestamp(1_005_001)), ..step(1) };
        assert_eq!(plan(within, Lapse::Expired, now, &policies(), 0.5).next, StepState::Pending);
        let past = LapsedStep { deadline_at: Some(Timestamp(1_005_000)), ..step(1) };
        let p = plan(past, Lapse::Expired, now, &policies(), 0.5);
        assert_eq!((p.next, p.failure_count), (StepState::Error, 2));
        assert_eq!(p.alert.unwrap()["reason"], "its total timeout passed");
        let f = plan_failure(past, "refused", now, &policies(), 0.5);
        assert_eq!((f.next, f.alert.unwrap()["reason"].as_str()), (StepState::Error, Some("its total timeout passed")));
        // A release retries at once, so a deadline still ahead does not stop it.
        assert_eq!(plan(past, Lapse::Released, now, &policies(), 0.5).next, StepState::Pending);
    }

    #[test]
    fn an_unclaimed_attempt_counts_a_failure_by_the_timeout_policy() {
        let now = Timestamp(1_000_000);
        let p = plan(step(0), Lapse::Unclaimed, now, &policies(), 0.5);
        assert_eq!((p.next, p.failure_count, p.due_at), (StepState::Pending, 1, Timestamp(1_001_000)));
        assert_eq!(p.kind, ev::STEP_UNCLAIMED);
        assert!(p.why.contains("claim timeout"), "{}", p.why);
        let fail = LapsedStep { on_timeout: OnTimeout::FailTask, ..step(0) };
        let p = plan(fail, Lapse::Unclaimed, now, &policies(), 0.5);
        assert_eq!(p.next, StepState::Error);
        assert!(p.alert.unwrap()["reason"].as_str().unwrap().contains("fails the task"));
    }

    #[test]
    fn past_the_last_interval_it_gives_up_with_an_alert() {
        let p = plan(step(2), Lapse::Expired, Timestamp(0), &policies(), 0.5);
        assert_eq!((p.next, p.failure_count), (StepState::Error, 3));
        assert!(p.detail["retry_at"].is_null());
        assert_eq!(p.alert.unwrap()["failure_count"], 3);
    }
}
