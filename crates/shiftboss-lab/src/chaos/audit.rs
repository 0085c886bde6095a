//! The checks at the end of a chaos run, from the store's own event log: every claim, expiry,
//! release, reply and refusal is an event of its step, written in the transaction that made it.
//!
//! Per agent step, events are replayed in order against the claim they belong to:
//! - an expiry or release must end the live claim it names (its lease token): one that finds no
//!   live claim, or names another, is an expiry counted twice;
//! - after an expiry returned the step to Pending, nothing but a new claim (or a cancel) may move
//!   it: a `step.processed` or `step.error` before the next claim is a late completion applied, or
//!   a step both returned to Pending and put in Error;
//! - a step's FailureCount must equal the expiries and releases recorded for it;
//! - how long each claim outlived its complete-by before something ended it.

use shiftboss_core::model::EventRecord;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepId, Timestamp};
use shiftboss_store::TaskDetail;
use shiftboss_store::event_kind as ev;
use std::collections::{HashMap, HashSet};

/// What the event log shows, summed over every task read.
#[derive(Debug, Default, Clone)]
pub struct Audit {
    pub steps: u64,
    pub claims: u64,
    pub expiries: u64,
    pub releases: u64,
    /// The sum of every step's FailureCount.
    pub failure_counts: u64,
    /// Steps whose FailureCount differs from their expiries and releases.
    pub failure_count_mismatches: u64,
    pub expiries_counted_twice: u64,
    /// `step.processed` or `step.error` applied to a step whose claim had been taken away.
    pub late_completions_applied: u64,
    /// Steps returned to Pending by an expiry, then put in Error with no claim in between.
    pub pending_and_error: u64,
    pub late_replies_refused: u64,
    /// The longest any claim stayed Processing past its complete-by, in milliseconds.
    pub longest_overdue_ms: i64,
    /// Up to ten findings, described, for the report.
    pub examples: Vec<String>,
}

impl Audit {
    #[cfg(test)]
    pub fn violations(&self) -> u64 {
        self.failure_count_mismatches
            + self.expiries_counted_twice
            + self.late_completions_applied
            + self.pending_and_error
    }

    fn finding(&mut self, task: &TaskDetail, step: &str, what: String) {
        if self.examples.len() < 10 {
            self.examples.push(format!("task {} step {step}: {what}", task.task.key));
        }
    }

    /// Reads one task's steps and events.
    pub fn add(&mut self, task: &TaskDetail) {
        let mut by_step: HashMap<StepId, Vec<&EventRecord>> = HashMap::new();
        for e in &task.events {
            if let Some(s) = e.step_id {
                by_step.entry(s).or_default().push(e);
            }
        }
        for step in task.steps.iter().filter(|s| s.kind == StepKind::Agent) {
            self.steps += 1;
            self.failure_counts += u64::from(step.failure_count);
            let mut events = by_step.remove(&step.id).unwrap_or_default();
            events.sort_by_key(|e| e.id);
            let lapses = self.replay(task, &step.name, &events);
            if lapses != u64::from(step.failure_count) {
                self.failure_count_mismatches += 1;
                let what = format!("FailureCount {} but {lapses} expiries and releases", step.failure_count);
                self.finding(task, &step.name, what);
            }
        }
    }

    /// Replays one step's events; returns its expiries and releases.
    fn replay(&mut self, task: &TaskDetail, step: &str, events: &[&EventRecord]) -> u64 {
        // The live claim: its lease token and complete-by.
        let mut live: Option<(i64, Timestamp)> = None;
        // The last claim was ended by an expiry that gave up: its `step.error` alert follows.
        let mut gave_up = false;
        let mut lapsed_tokens = HashSet::new();
        let mut lapses = 0;
        for e in events {
            let token = e.detail.get("lease_token").and_then(serde_json::Value::as_i64);
            match e.kind.as_str() {
                ev::STEP_CLAIMED => {
                    self.claims += 1;
                    let complete_by = e.detail.get("complete_by").and_then(serde_json::Value::as_i64);
                    live = token.zip(complete_by.map(Timestamp));
                    gave_up = false;
                }
                ev::STEP_EXPIRED | ev::STEP_RELEASED => {
                    lapses += 1;
                    if e.kind == ev::STEP_EXPIRED {
                        self.expiries += 1;
                    } else {
                        self.releases += 1;
                    }
                    let fresh = token.is_some_and(|t| lapsed_tokens.insert(t));
                    match live.take() {
                        Some((t, complete_by)) if fresh && Some(t) == token => {
                            if e.kind == ev::STEP_EXPIRED {
                                self.overdue(e.at.0 - complete_by.0);
                            }
                        }
                        _ => {
                            self.expiries_counted_twice += 1;
                            self.finding(task, step, format!("{} of lease {token:?} with no such live claim", e.kind));
                        }
                    }
                    gave_up = e.detail.get("retry_at").is_some_and(serde_json::Value::is_null);
                }
                ev::STEP_PROCESSED | ev::STEP_ERROR => match live.take() {
                    Some((_, complete_by)) => self.overdue(e.at.0 - complete_by.0),
                    None if e.kind == ev::STEP_ERROR && gave_up => gave_up = false,
                    None if e.kind == ev::STEP_ERROR => {
                        self.pending_and_error += 1;
                        self.finding(task, step, "put in Error after an expiry returned it to Pending".into());
                    }
                    None => {
                        self.late_completions_applied += 1;
                        self.finding(task, step, "processed with no live claim (a late completion applied)".into());
                    }
                },
                ev::REPLY_REJECTED => self.late_replies_refused += 1,
                ev::STEP_CANCELLED => live = None,
                _ => {}
            }
        }
        lapses
    }

    fn overdue(&mut self, ms: i64) {
        self.longest_overdue_ms = self.longest_overdue_ms.max(ms);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::{Value, json};
    use shiftboss_core::model::{EventLevel, StepRecord, TaskRecord};
    use shiftboss_core::{LeaseToken, StepState, TaskId, TaskState};

    pub(in crate::chaos) fn event(id: i64, at: i64, kind: &str, detail: Value) -> EventRecord {
        EventRecord {
            id,
            task_id: TaskId(1),
            step_id: Some(StepId(1)),
            at: Timestamp(at),
            kind: kind.into(),
            level: EventLevel::Info,
            actor: "t".into(),
            detail,
        }
    }

    pub(in crate::chaos) fn task(failure_count: u32, events: Vec<EventRecord>) -> TaskDetail {
        let task = TaskRecord {
            id: TaskId(1),
            key: "k".into(),
            workflow: "order".into(),
            workflow_version: 2,
            state: TaskState::Completed,
            priority: 0,
            bucket: 0,
            input: json!({}),
            output: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            parent_task_id: None,
            deadline_at: None,
            correlation_id: None,
            domains: Default::default(),
            archived: false,
        };
        let step = StepRecord {
            id: StepId(1),
            task_id: TaskId(1),
            name: "charge".into(),
            kind: StepKind::Agent,
            agent: "payment".into(),
            state: StepState::Processed,
            compensates: None,
            locked_by: None,
            complete_by: None,
            lease_token: LeaseToken(2),
            due_at: Timestamp(0),
            priority: 0,
            bucket: 0,
            failure_count,
            attempts: 2,
            last_error: None,
            input: json!({}),
            output: None,
            progress: None,
            domain: None,
            fallback_at: None,
            idempotency_key: "key".into(),
            timeout: std::time::Duration::from_secs(1),
            config: json!({}),
            retry: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        };
        TaskDetail { task, steps: vec![step], events }
    }

    fn claimed(id: i64, token: i64, complete_by: i64) -> EventRecord {
        event(id, complete_by - 1000, ev::STEP_CLAIMED, json!({"lease_token": token, "complete_by": complete_by}))
    }

    #[test]
    fn an_expiry_then_a_new_claim_and_a_reply_is_clean() {
        let mut a = Audit::default();
        a.add(&task(
            1,
            vec![
                claimed(1, 1, 2000),
                event(2, 2300, ev::STEP_EXPIRED, json!({"lease_token": 1, "retry_at": 2400})),
                claimed(3, 2, 4000),
                event(4, 4100, ev::REPLY_REJECTED, json!({"lease_token": 1})),
                event(5, 4200, ev::STEP_PROCESSED, json!({})),
            ],
        ));
        assert_eq!(a.violations(), 0, "{a:?}");
        assert_eq!((a.expiries, a.late_replies_refused, a.longest_overdue_ms), (1, 1, 300));
    }

    #[test]
    fn a_late_completion_a_double_expiry_and_a_wrong_failure_count_are_found() {
        let mut a = Audit::default();
        a.add(&task(
            1,
            vec![
                claimed(1, 1, 2000),
                event(2, 2300, ev::STEP_EXPIRED, json!({"lease_token": 1, "retry_at": 2400})),
                event(3, 2350, ev::STEP_EXPIRED, json!({"lease_token": 1, "retry_at": 2400})),
                event(4, 2500, ev::STEP_PROCESSED, json!({})),
            ],
        ));
        assert_eq!((a.expiries_counted_twice, a.late_completions_applied, a.failure_count_mismatches), (1, 1, 1));
    }

    #[test]
    fn an_expiry_that_gives_up_may_be_followed_by_its_alert_but_a_retry_may_not() {
        let gave_up = vec![
            claimed(1, 1, 2000),
            event(2, 2300, ev::STEP_EXPIRED, json!({"lease_token": 1, "retry_at": null})),
            event(3, 2300, ev::STEP_ERROR, json!({})),
        ];
        let mut a = Audit::default();
        a.add(&task(1, gave_up));
        assert_eq!(a.violations(), 0, "{a:?}");
        let retried = vec![
            claimed(1, 1, 2000),
            event(2, 2300, ev::STEP_EXPIRED, json!({"lease_token": 1, "retry_at": 2400})),
            event(3, 2500, ev::STEP_ERROR, json!({})),
        ];
        let mut a = Audit::default();
        a.add(&task(1, retried));
        assert_eq!(a.pending_and_error, 1, "{a:?}");
    }
}
