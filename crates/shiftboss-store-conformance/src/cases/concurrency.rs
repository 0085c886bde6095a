//! Two schedulers on one database (P10, P14): never the same step while the other holds it.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::{StepId, StepState, TaskState};
use shiftboss_store::*;
use std::collections::HashMap;

const TASKS: usize = 100;
/// Each task has two steps, and the second exists only once the first is processed, so claims and
/// the replies that create new steps interleave.
const STEPS: usize = TASKS * 2;
/// A worker that finds nothing this many times in a row while tasks still run has stalled.
const MAX_IDLE_ROUNDS: u32 = 200_000;

pub async fn two_handles_never_claim_the_same_step<F: Fixture>(f: F) {
    let clock = ManualClock::new(T0);
    let a = f.open(Clock::Manual(clock.clone())).await;
    let b = f.open(Clock::Manual(clock.clone())).await;
    let two = def(json!({"name": "two", "steps": [
        {"name": "first", "agent": WORKER}, {"name": "second", "agent": WORKER}
    ]}));
    a.register_workflow(&two).await.expect("register");
    // Half submitted through each handle: each sees the other's writes.
    for i in 0..TASKS {
        let store: &dyn Store = if i % 2 == 0 { &a } else { &b };
        store.submit_task(submit_params(&format!("order-{i}"), "two", 0)).await.expect("submit");
    }

    // The clock never moves, so no lease lapses: a step claimed twice can only be a broken claim.
    let ta = tokio::spawn(work(a, "sched-a"));
    let tb = tokio::spawn(work(b, "sched-b"));
    let (a, got_a) = ta.await.expect("worker a");
    let (_b, got_b) = tb.await.expect("worker b");

    let mut claims: HashMap<StepId, u32> = HashMap::new();
    for id in got_a.iter().chain(&got_b) {
        *claims.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = claims.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "steps claimed more than once: {twice:?}");
    assert_eq!(claims.len(), STEPS, "every step was claimed (a: {}, b: {})", got_a.len(), got_b.len());

    let s = a.summarize().await.expect("summarize");
    assert_eq!(s.tasks_in(TaskState::Completed), TASKS as u64);
    assert_eq!(s.steps_in(StepState::Processed), STEPS as u64);
    assert_eq!((s.steps_retried, s.rejected_replies), (0, 0));
}

/// A scheduler: claims a few steps, replies to each, until no task runs. Returns the steps it claimed.
async fn work<S: Store>(store: S, instance: &'static str) -> (S, Vec<StepId>) {
    let mut mine = Vec::new();
    let mut idle = 0;
    loop {
        let claimed = store
            .claim_due_steps(ClaimDueSteps {
                instance: id(instance),
                limit: 3,
                agents: vec![WORKER.into()],
                buckets: None,
                domains: vec![],
                limits: vec![],
            })
            .await
            .expect("claim");
        if claimed.is_empty() {
            if store.summarize().await.expect("summarize").tasks_in(TaskState::Running) == 0 {
                return (store, mine);
            }
            idle += 1;
            assert!(idle < MAX_IDLE_ROUNDS, "{instance} found nothing to claim {idle} times while tasks ran");
            tokio::task::yield_now().await;
            continue;
        }
        idle = 0;
        let replies = claimed
            .iter()
            .map(|c| Reply {
                step_id: c.id,
                lease_token: c.lease_token,
                result: ReplyResult::Completed(json!({"by": instance})),
            })
            .collect();
        let outcomes = store
            .record_replies(RecordReplies { instance: id(instance), replies, policies: Default::default() })
            .await
            .expect("reply");
        for (c, o) in claimed.iter().zip(&outcomes) {
            assert!(matches!(o, ReplyOutcome::Applied { .. }), "{instance}'s reply for step {} was {o:?}", c.id);
        }
        mine.extend(claimed.iter().map(|c| c.id));
    }
}

/// Tasks of the three-step workflow the snapshot case runs.
const SNAPSHOT_TASKS: usize = 400;

/// A read made of several statements (a task with its steps and events; a summary) sees one
/// snapshot even while another handle commits: a running task always shows exactly one live step,
/// and the counts of a summary agree with each other.
///
/// Whether a torn read shows up depends on timing, so a broken store fails this case most runs,
/// not every run; a correct one always passes.
pub async fn reads_see_one_snapshot_while_another_handle_writes<F: Fixture>(f: F) {
    let clock = ManualClock::new(T0);
    let writer = f.open(Clock::Manual(clock.clone())).await;
    let reader = f.open(Clock::Manual(clock.clone())).await;
    writer.register_workflow(&three_steps()).await.expect("register");
    let mut tasks = Vec::new();
    for i in 0..SNAPSHOT_TASKS {
        tasks.push(writer.submit_task(submit_params(&format!("order-{i}"), "three", 0)).await.expect("submit").task_id);
    }

    let writing = tokio::spawn(async move {
        loop {
            let p = ClaimDueSteps {
                instance: id("sched-w"),
                limit: 5,
                agents: vec![WORKER.into()],
                buckets: None,
                domains: vec![],
                limits: vec![],
            };
            let claimed = writer.claim_due_steps(p).await.expect("claim");
            if claimed.is_empty() {
                return;
            }
            let replies = claimed
                .iter()
                .map(|c| Reply { step_id: c.id, lease_token: c.lease_token, result: ReplyResult::Completed(json!({})) })
                .collect();
            writer
                .record_replies(RecordReplies { instance: id("sched-w"), replies, policies: Default::default() })
                .await
                .expect("reply");
        }
    });

    let mut torn = Vec::new();
    let mut next = 0;
    while !writing.is_finished() {
        next = (next + 7) % tasks.len();
        let d = reader.get_task(tasks[next]).await.expect("get_task").expect("exists");
        let live = d.steps.iter().filter(|s| matches!(s.state, StepState::Pending | StepState::Processing)).count();
        let scheduled = count(&d.events, event_kind::STEP_SCHEDULED);
        let whole = scheduled == d.steps.len()
            && match d.task.state {
                TaskState::Running => live == 1,
                TaskState::Completed => live == 0 && d.steps.len() == 3,
                _ => false,
            };
        if !whole {
            torn.push(format!(
                "task {}: {:?} with {} steps ({live} live), {scheduled} scheduled events",
                d.task.id,
                d.task.state,
                d.steps.len()
            ));
        }

        let s = reader.summarize().await.expect("summarize");
        let live_steps = s.steps_in(StepState::Pending) + s.steps_in(StepState::Processing);
        if live_steps != s.tasks_in(TaskState::Running) {
            torn.push(format!("summary: {} running tasks but {live_steps} live steps", s.tasks_in(TaskState::Running)));
        }
    }
    writing.await.expect("writer");
    assert!(torn.is_empty(), "reads mixed two states of the store: {torn:#?}");
}
