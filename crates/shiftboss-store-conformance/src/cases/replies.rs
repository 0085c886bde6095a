//! record_replies (P15, P16): a completed step moves its task on; a permanent error stops it.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::{LeaseToken, StepId, StepState, TaskState};
use shiftboss_store::{
    ClaimedStep, ExtendLease, RecordReplies, Reply, ReplyOutcome, ReplyResult, Store, event_kind as ev,
};

pub async fn completed_replies_run_a_workflow_to_completion<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "three", 0).await;
    for (i, name) in ["reserve", "charge", "ship"].into_iter().enumerate() {
        let c = h.claim_one("sched-1").await;
        assert_eq!(c.name, name, "steps run in the workflow's order");
        let last = i == 2;
        let want = if last {
            ReplyOutcome::Applied { task_state: TaskState::Completed, scheduled: 0 }
        } else {
            ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 1 }
        };
        assert_eq!(h.complete("sched-1", &c, json!({"n": i})).await, want, "reply to {name}");
        let s = h.step(task, c.id).await;
        assert_eq!(s.state, StepState::Processed);
        assert_eq!(s.output, Some(json!({"n": i})));
        assert_eq!((s.locked_by, s.complete_by), (None, None), "a processed step holds no lease");
    }
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty());

    let d = h.task(task).await;
    assert_eq!(d.task.state, TaskState::Completed);
    assert_eq!(d.task.output, Some(json!({"n": 2})), "the task's output is the last step's");
    assert_eq!(d.steps.len(), 3);
    for kind in [ev::STEP_SCHEDULED, ev::STEP_CLAIMED, ev::STEP_PROCESSED] {
        assert_eq!(count(&d.events, kind), 3, "{kind}");
    }
    assert_eq!(d.events.first().map(|e| e.kind.as_str()), Some(ev::TASK_RECEIVED));
    assert_eq!(d.events.last().map(|e| e.kind.as_str()), Some(ev::TASK_COMPLETED));
    assert_eq!(count(&d.events, ev::TASK_COMPLETED), 1);
}

pub async fn permanent_error_fails_the_step_and_the_task_with_alerts<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("order-1", "three", 0).await;
    let reserve = h.claim_one("sched-1").await;
    h.complete("sched-1", &reserve, json!({})).await;
    let charge = h.claim_one("sched-1").await;
    let out =
        h.reply("sched-1", charge.id, charge.lease_token, ReplyResult::PermanentError("card declined".into())).await;
    assert_eq!(out, ReplyOutcome::Applied { task_state: TaskState::Failed, scheduled: 0 });

    let d = h.task(task).await;
    let s = d.steps.iter().find(|s| s.id == charge.id).unwrap();
    assert_eq!(s.state, StepState::Error, "P16: to Error at once, no retry");
    assert!(s.last_error.as_deref().unwrap_or_default().contains("card declined"), "{:?}", s.last_error);
    assert_eq!((s.output.as_ref(), s.locked_by.as_deref()), (None, None));
    assert_eq!(d.steps.len(), 2, "nothing after the failed step was scheduled");
    assert_eq!(d.task.state, TaskState::Failed);

    let alerts: Vec<_> = d.events.iter().filter(|e| e.level == EventLevel::Alert).map(|e| e.kind.as_str()).collect();
    assert_eq!(alerts, [ev::STEP_ERROR, ev::TASK_FAILED], "an operator is alerted");
    assert_eq!(step_events(&d.events, charge.id, ev::STEP_ERROR).count(), 1);
    assert!(h.claim("sched-1", &[WORKER], 10).await.is_empty(), "a failed step is not retried");
}

pub async fn a_second_reply_on_the_same_lease_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let task = h.submit("k", "one", 0).await;
    let c = h.claim_one("sched-1").await;
    assert!(matches!(h.complete("sched-1", &c, json!({"v": 1})).await, ReplyOutcome::Applied { .. }));
    let done = h.task(task).await;

    // A duplicate delivery of the reply, or a contradicting one: neither may change a settled step.
    assert!(matches!(h.complete("sched-1", &c, json!({"v": 2})).await, ReplyOutcome::Rejected { .. }));
    let err = ReplyResult::PermanentError("late".into());
    assert!(matches!(h.reply("sched-1", c.id, c.lease_token, err).await, ReplyOutcome::Rejected { .. }));

    let d = h.task(task).await;
    assert_eq!(d.task, done.task);
    assert_eq!(d.steps, done.steps);
    assert_eq!(step_events(&d.events, c.id, ev::REPLY_REJECTED).count(), 2, "each rejection is recorded");
}

pub async fn reply_to_an_unknown_step_is_rejected<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("k", "one", 0).await;
    h.claim_one("sched-1").await;
    let before = h.snapshot().await;
    let out = h.reply("sched-1", StepId(987_654), LeaseToken(1), ReplyResult::Completed(json!({}))).await;
    assert!(matches!(out, ReplyOutcome::Rejected { .. }), "{out:?}");
    assert_eq!(h.snapshot().await, before);
}

/// One batch holding every kind of reply is recorded as each reply alone would be (a store may
/// write a batch's simple replies together): a completion that ends its task, one that schedules
/// the next step, a permanent error, a failed attempt, a reply on a lease that is not held, and a
/// second reply to a step already answered earlier in the same batch.
pub async fn a_mixed_batch_is_recorded_as_each_reply_alone<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let done = h.submit("done", "one", 0).await;
    let next = h.submit("next", "three", 0).await;
    let broken = h.submit("broken", "one", 0).await;
    let flaky = h.submit("flaky", "retrying", 0).await;
    let stale = h.submit("stale", "one", 0).await;
    let claimed = h.claim("sched-1", &[WORKER], 10).await;
    assert_eq!(claimed.len(), 5);
    let of = |task| claimed.iter().find(|c| c.task_id == task).expect("each task's step is claimed");
    let reply = |task, token: Option<LeaseToken>, result| {
        let c = of(task);
        Reply { step_id: c.id, lease_token: token.unwrap_or(c.lease_token), result }
    };
    let stale_token = LeaseToken(of(stale).lease_token.0 + 1);
    let replies = vec![
        reply(done, None, ReplyResult::Completed(json!({"v": 1}))),
        reply(next, None, ReplyResult::Completed(json!({"reserved": true}))),
        reply(broken, None, ReplyResult::PermanentError("card declined".into())),
        reply(flaky, None, ReplyResult::Failed("try later".into())),
        reply(stale, Some(stale_token), ReplyResult::Completed(json!({}))),
        reply(done, None, ReplyResult::Completed(json!({"v": 2}))),
    ];
    let p = RecordReplies { instance: id("sched-1"), replies, policies: Default::default() };
    let out = h.store.record_replies(p).await.expect("the batch is recorded");
    assert_eq!(out.len(), 6, "one outcome per reply, in order");
    assert_eq!(out[0], ReplyOutcome::Applied { task_state: TaskState::Completed, scheduled: 0 });
    assert_eq!(out[1], ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 1 });
    assert_eq!(out[2], ReplyOutcome::Applied { task_state: TaskState::Failed, scheduled: 0 });
    assert_eq!(out[3], ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 0 });
    assert!(matches!(&out[4], ReplyOutcome::Rejected { reason } if reason.contains("lease")), "{:?}", out[4]);
    assert!(matches!(out[5], ReplyOutcome::Rejected { .. }), "{:?}", out[5]);

    let d = h.task(done).await;
    assert_eq!((d.task.state, d.task.output), (TaskState::Completed, Some(json!({"v": 1}))), "the first reply wins");
    assert_eq!(count(&d.events, ev::STEP_PROCESSED), 1);
    assert_eq!(count(&d.events, ev::REPLY_REJECTED), 1);
    assert_eq!(count(&d.events, ev::TASK_COMPLETED), 1);

    let d = h.task(next).await;
    assert_eq!(d.task.state, TaskState::Running);
    let names: Vec<(&str, StepState)> = d.steps.iter().map(|s| (s.name.as_str(), s.state)).collect();
    assert_eq!(names, [("reserve", StepState::Processed), ("charge", StepState::Pending)]);
    assert_eq!(d.steps[0].output, Some(json!({"reserved": true})));

    let d = h.task(broken).await;
    assert_eq!((d.task.state, d.steps[0].state), (TaskState::Failed, StepState::Error));
    let alerts: Vec<_> = d.events.iter().filter(|e| e.level == EventLevel::Alert).map(|e| e.kind.as_str()).collect();
    assert_eq!(alerts, [ev::STEP_ERROR, ev::TASK_FAILED]);
    // Events of a task come in the order they happened: the step's before the task's.
    assert_eq!(d.events.last().map(|e| e.kind.as_str()), Some(ev::TASK_FAILED));

    let s = &h.task(flaky).await.steps[0];
    assert_eq!((s.state, s.failure_count), (StepState::Pending, 1));
    assert_eq!(s.last_error.as_deref(), Some("try later"));
    assert!(s.due_at > h.now(), "the next try waits for the policy's first interval");

    let d = h.task(stale).await;
    let c = of(stale);
    assert_eq!((d.steps[0].state, d.steps[0].lease_token), (StepState::Processing, c.lease_token), "held as it was");
    assert_eq!(step_events(&d.events, c.id, ev::REPLY_REJECTED).count(), 1);

    assert_eq!(Harness::<F::Store>::names(&h.claim_all("sched-1").await), ["charge"], "only the next step is due");
}

/// A reply sent again because the answer to its commit was lost (the write may have landed): an
/// identical repeat of an applied reply is acknowledged as applied, changes nothing and records no
/// rejection; a different reply on the same lease is still rejected.
pub async fn an_identical_repeat_of_an_applied_reply_is_acknowledged<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&retrying()).await;

    // Each task's step is claimed and settled before the next task is submitted.
    let done = h.submit("done", "one", 0).await;
    let c = h.claim_one("s1").await;
    assert!(matches!(h.complete("s1", &c, json!({"v": 1})).await, ReplyOutcome::Applied { .. }));
    let before = h.snapshot().await;
    let again = h.complete("s1", &c, json!({"v": 1})).await;
    assert_eq!(again, ReplyOutcome::AlreadyApplied { task_state: TaskState::Completed });
    assert_eq!(h.snapshot().await, before, "a repeat writes nothing, no event either");
    let other = h.complete("s1", &c, json!({"v": 2})).await;
    assert!(matches!(other, ReplyOutcome::Rejected { .. }), "another output is no repeat: {other:?}");
    assert_eq!(step_events(&h.task(done).await.events, c.id, ev::REPLY_REJECTED).count(), 1);

    let failed = h.submit("failed", "one", 0).await;
    let c = h.claim_one("s1").await;
    let err = || ReplyResult::PermanentError("card declined\0".into());
    assert!(matches!(h.reply("s1", c.id, c.lease_token, err()).await, ReplyOutcome::Applied { .. }));
    let before = h.snapshot().await;
    let again = h.reply("s1", c.id, c.lease_token, err()).await;
    assert_eq!(again, ReplyOutcome::AlreadyApplied { task_state: TaskState::Failed });
    assert_eq!(h.snapshot().await, before);
    assert_eq!(h.task(failed).await.task.state, TaskState::Failed);

    let retried = h.submit("retried", "retrying", 0).await;
    let c = h.claim_one("s1").await;
    let fail = || ReplyResult::Failed("smtp refused".into());
    assert!(matches!(h.reply("s1", c.id, c.lease_token, fail()).await, ReplyOutcome::Applied { .. }));
    let again = h.reply("s1", c.id, c.lease_token, fail()).await;
    assert_eq!(again, ReplyOutcome::AlreadyApplied { task_state: TaskState::Running });
    assert_eq!(h.step(retried, c.id).await.failure_count, 1, "the failure is counted once");
    h.advance(ms(150));
    let next = h.claim_one("s1").await;
    assert_eq!(next.id, c.id);
    let stale = h.reply("s1", c.id, c.lease_token, fail()).await;
    assert!(matches!(stale, ReplyOutcome::Rejected { .. }), "the step was claimed again since: {stale:?}");
}

/// One batch whose decides write more than one row or start something: a completion that opens a
/// fork of two branches, one that starts a sub-workflow's child task, a permanent error that
/// starts a compensation, and one that schedules the next step. Each task ends up as a reply alone
/// would leave it, its new steps in creation order, every new agent step claimable.
pub async fn a_batch_whose_decides_fork_start_a_child_and_compensate<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.register(&super::compensation::order()).await;
    h.register(&def(json!({"name": "fanout", "steps": [
        {"name": "first", "agent": WORKER},
        {"name": "both", "kind": "fork", "branches": [[{"name": "a", "agent": WORKER}], [{"name": "b", "agent": WORKER}]]},
        {"name": "after", "agent": WORKER}
    ]})))
    .await;
    h.register(&def(json!({"name": "parent", "steps": [
        {"name": "first", "agent": WORKER},
        {"name": "sub", "kind": "sub_workflow", "workflow": "one"}
    ]})))
    .await;
    let fanout = h.submit("fanout-1", "fanout", 0).await;
    let parent = h.submit("parent-1", "parent", 0).await;
    let order = h.submit("order-1", "order", 0).await;
    let three = h.submit("three-1", "three", 0).await;
    let claimed = h.claim("s1", &[WORKER], 10).await;
    assert_eq!(claimed.len(), 4);
    let of = |task| claimed.iter().find(|c| c.task_id == task).expect("each task's first step is claimed");
    h.complete("s1", of(order), json!({})).await;
    let charge = h.claim_one("s1").await;
    assert_eq!((charge.task_id, charge.name.as_str()), (order, "charge"));

    let done = |c: &ClaimedStep| Reply {
        step_id: c.id,
        lease_token: c.lease_token,
        result: ReplyResult::Completed(json!({"from": c.name})),
    };
    let replies = vec![
        done(of(fanout)),
        done(of(parent)),
        Reply {
            step_id: charge.id,
            lease_token: charge.lease_token,
            result: ReplyResult::PermanentError("card declined".into()),
        },
        done(of(three)),
    ];
    let p = RecordReplies { instance: id("s1"), replies, policies: Default::default() };
    let out = h.store.record_replies(p).await.expect("the batch is recorded");
    assert_eq!(out[0], ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 2 }, "two branches");
    assert!(matches!(out[1], ReplyOutcome::Applied { task_state: TaskState::Running, .. }), "{:?}", out[1]);
    assert_eq!(out[2], ReplyOutcome::Applied { task_state: TaskState::Compensating, scheduled: 1 });
    assert_eq!(out[3], ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 1 });

    let d = h.task(fanout).await;
    let names: Vec<&str> = d.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "both", "a", "b"], "rows in creation order");
    assert!(d.steps.windows(2).all(|w| w[0].id < w[1].id), "ids follow creation");
    let d = h.task(parent).await;
    let sub = d.steps.iter().find(|s| s.name == "sub").expect("the sub-workflow step was written");
    assert_eq!(sub.state, StepState::Processing, "it waits for its child");
    let child = sub.output.as_ref().and_then(|o| o["task_id"].as_i64()).expect("the step names its child");
    let c = h.task(shiftboss_core::TaskId(child)).await;
    assert_eq!(c.task.state, TaskState::Running);
    assert_eq!(c.steps.iter().map(|s| (s.name.as_str(), s.state)).collect::<Vec<_>>(), [("work", StepState::Pending)]);
    let d = h.task(order).await;
    assert_eq!(d.task.state, TaskState::Compensating);
    assert_eq!(h.step_named(order, "release").await.compensates.as_deref(), Some("reserve"));

    let due = h.claim_all("s1").await;
    assert_eq!(Harness::<F::Store>::names(&due), ["a", "b", "charge", "release", "work"]);
}

/// A postponement hands the step back unfinished: pending, not claimable until its delay has
/// passed, its failure count and retry policy untouched (the policy's 100 ms is not what it
/// waits), fenced like any reply, its repeat acknowledged, and claimed again after the delay
/// under a new lease. One whose delay ends at or past the step's total timeout sends it to Error.
pub async fn a_postponed_step_is_claimed_again_after_its_delay_with_no_failure_counted<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register(&retrying()).await;
    let task = h.submit("later-1", "retrying", 0).await;
    let c = h.claim_one("s1").await;
    assert_eq!(c.progress, None, "a first attempt has no progress to go on from");
    // What it says of its work before it hands the step back reaches the next attempt.
    let job = json!({"export_job": "J-9"});
    let extend = ExtendLease { step_id: c.id, lease_token: c.lease_token, progress: Some(job.clone()) };
    h.store.extend_lease(extend).await.expect("the holder's heartbeat is taken");
    let later = || ReplyResult::Postponed(secs(30));
    let out = h.reply("s1", c.id, c.lease_token, later()).await;
    assert_eq!(out, ReplyOutcome::Applied { task_state: TaskState::Running, scheduled: 0 });
    let s = h.step(task, c.id).await;
    assert_eq!((s.state, s.failure_count, s.locked_by.as_deref()), (StepState::Pending, 0, None));
    assert_eq!(s.last_error.as_deref(), Some(shiftboss_store::lapse::postponed_why(secs(30)).as_str()));
    let events = h.task(task).await.events;
    let e = step_events(&events, c.id, ev::STEP_POSTPONED).next().expect("a step.postponed event");
    assert_eq!((e.actor.as_str(), e.detail["after_ms"].as_u64()), ("s1", Some(30_000)));
    assert_eq!(e.detail["retry_at"].as_i64(), Some(h.now().plus(secs(30)).0));

    // The identical repeat (its answer lost) changes nothing; another delay is no repeat.
    let before = h.snapshot().await;
    let again = h.reply("s1", c.id, c.lease_token, later()).await;
    assert_eq!(again, ReplyOutcome::AlreadyApplied { task_state: TaskState::Running });
    assert_eq!(h.snapshot().await, before, "a repeat writes nothing");
    let other = h.reply("s1", c.id, c.lease_token, ReplyResult::Postponed(secs(5))).await;
    assert!(matches!(other, ReplyOutcome::Rejected { .. }), "another delay is no repeat: {other:?}");

    // Not due until the delay has passed, though the retry policy would wait 100 ms.
    h.advance(ms(29_900));
    assert!(h.claim("s1", &[WORKER], 10).await.is_empty(), "claimed before its delay ended");
    h.advance(ms(100));
    let next = h.claim_one("s2").await;
    assert_eq!((next.id, next.attempt), (c.id, c.attempt + 1));
    assert_ne!(next.lease_token, c.lease_token);
    assert_eq!(next.progress, Some(job), "the next attempt gets the last progress reported");
    let stale = h.reply("s1", c.id, c.lease_token, later()).await;
    assert!(matches!(stale, ReplyOutcome::Rejected { .. }), "the old lease's postponement: {stale:?}");
    assert_eq!(h.step(task, c.id).await.state, StepState::Processing, "the new claim holds it still");
    let done = h.complete("s2", &next, json!({"done": true})).await;
    assert_eq!(done, ReplyOutcome::Applied { task_state: TaskState::Completed, scheduled: 0 });
    assert_eq!(h.step(task, c.id).await.failure_count, 0);

    // Past the total timeout: Error, with an alert, rather than a wait that cannot end in time.
    h.register(&def(json!({"name": "bounded", "steps": [
        {"name": "pay", "agent": WORKER, "timeout": "10s", "total_timeout": "60s"}]})))
        .await;
    let bounded = h.submit("later-2", "bounded", 0).await;
    let c = h.claim_one("s1").await;
    let out = h.reply("s1", c.id, c.lease_token, ReplyResult::Postponed(secs(60))).await;
    assert_eq!(out, ReplyOutcome::Applied { task_state: TaskState::Failed, scheduled: 0 });
    let s = h.step(bounded, c.id).await;
    assert_eq!((s.state, s.failure_count), (StepState::Error, 0));
    let events = h.task(bounded).await.events;
    let alert = step_events(&events, c.id, ev::STEP_ERROR).next().expect("an alert");
    assert_eq!((alert.level, alert.detail["reason"].as_str()), (EventLevel::Alert, Some("its total timeout passed")));
}
