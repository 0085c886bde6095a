//! Recording agents' replies (P15, P16): each fenced by its lease token, so a reply from a claim
//! that has lapsed can never overwrite newer state.
//!
//! The tasks of a batch are locked first (ascending ids), so the decider runs for each task alone.
//! Each reply is then one UPDATE whose WHERE is the fence (lease token, state = 'processing', and an
//! agent's row: control steps hold no lease): the check and the write cannot be split, with or
//! without the lock.
//!
//! A failed attempt (a retry job's handler failure) reads the step under the task's lock for its
//! retry count and policy, then writes the plan with the same fence (see `expire::write_plan`).

use crate::lock::{lock_roots, lock_tasks};
use crate::reply_set;
use crate::rows::{count, get, retry_policy};
use crate::tx::Tx;
use futures_util::{StreamExt, stream};
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::state::StepEvent;
use shiftboss_core::workflow::OnTimeout;
use shiftboss_core::{StepState, TaskId, Timestamp};
use shiftboss_store::advance::{advance_task, error_text, refuse_reply, write_plan};
use shiftboss_store::lapse::{self, LapsedStep};
use shiftboss_store::{Reply, ReplyOutcome, ReplyResult, StoreError, event_kind as ev};
use std::collections::{BTreeMap, HashMap};

/// One reply's fenced step change. The fence's state test is written `(state = ...) IS TRUE`
/// so that the planner finds the row by its id: see `fence` for why.
pub(crate) const APPLY_ONE: &str = "UPDATE steps SET state = $3, output = $4, last_error = coalesce($5, last_error),
        locked_by = NULL, complete_by = NULL, updated_at = $6
 WHERE id = $1 AND lease_token = $2 AND (state = 'processing') IS TRUE AND kind = 'agent'";

/// How many tasks' replies are in flight at once on the transaction's connection.
const PIPELINE: usize = 32;

pub async fn record_replies(
    t: &Tx<'_>,
    actor: &str,
    replies: &[Reply],
    policies: &RetryPolicies,
) -> Result<Vec<ReplyOutcome>, StoreError> {
    let ids: Vec<i64> = replies.iter().map(|r| r.step_id.0).collect();
    // A step's task never changes, nor does a task's parent, so this read needs no lock.
    let rows = t
        .query(
            "SELECT s.id, s.task_id, t.parent_task_id IS NOT NULL FROM steps s JOIN tasks t ON t.id = s.task_id
             WHERE s.id = ANY($1)",
            &[&ids],
        )
        .await?;
    let mut task_of: HashMap<i64, (TaskId, bool)> = HashMap::with_capacity(rows.len());
    for r in &rows {
        task_of.insert(get(r, 0)?, (TaskId(get(r, 1)?), get(r, 2)?));
    }
    let tasks: Vec<TaskId> = task_of.values().map(|(id, _)| *id).collect();
    if task_of.values().any(|(_, nested)| *nested) {
        lock_tasks(t, &tasks).await?;
    } else {
        lock_roots(t, &tasks).await?;
    }
    // A task with one completion or permanent error in the batch, and no parent, is recorded with
    // the others like it as a set (`reply_set`): a few statements for the whole batch.
    let mut replies_of: HashMap<TaskId, usize> = HashMap::with_capacity(task_of.len());
    for r in replies {
        if let Some((task, _)) = task_of.get(&r.step_id.0) {
            *replies_of.entry(*task).or_default() += 1;
        }
    }
    // The other replies of one task are recorded in order, one decide after the other. Top-level
    // tasks are independent (a decide touches its own task and its children only), so their
    // replies go side by side: their statements are pipelined on the connection instead of each
    // waiting for the last one's round trip. A child task's decide can move its parent, which
    // another reply may be deciding, so replies to child tasks go one by one after the rest.
    let mut set: Vec<(usize, TaskId)> = Vec::new();
    let mut by_task: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
    let mut nested = Vec::new();
    let mut out: Vec<Option<ReplyOutcome>> = vec![None; replies.len()];
    for (i, r) in replies.iter().enumerate() {
        match task_of.get(&r.step_id.0) {
            Some((task, false)) if reply_set::takes(r) && replies_of[task] == 1 => set.push((i, *task)),
            Some((task, false)) => by_task.entry(*task).or_default().push(i),
            Some((task, true)) => nested.push((i, *task)),
            None => out[i] = Some(ReplyOutcome::Rejected { reason: format!("step {} does not exist", r.step_id) }),
        }
    }
    if !set.is_empty() {
        let batch: Vec<(&Reply, TaskId)> = set.iter().map(|&(i, task)| (&replies[i], task)).collect();
        let outcomes = reply_set::record_set(t, actor, &batch).await?;
        for ((i, _), outcome) in set.into_iter().zip(outcomes) {
            out[i] = Some(match outcome {
                Some(o) => o,
                None => refuse_reply(t, actor, &replies[i]).await?,
            });
        }
    }
    let groups = by_task.into_iter().map(|(task_id, indexes)| async move {
        let mut done = Vec::with_capacity(indexes.len());
        for i in indexes {
            done.push((i, record_reply(t, actor, task_id, &replies[i], policies).await?));
        }
        Ok::<_, StoreError>(done)
    });
    let mut running = stream::iter(groups).buffer_unordered(PIPELINE);
    while let Some(done) = running.next().await {
        for (i, outcome) in done? {
            out[i] = Some(outcome);
        }
    }
    drop(running);
    for (i, task_id) in nested {
        out[i] = Some(record_reply(t, actor, task_id, &replies[i], policies).await?);
    }
    Ok(out.into_iter().map(|o| o.expect("every reply has an outcome")).collect())
}

async fn record_reply(
    t: &Tx<'_>,
    actor: &str,
    task_id: TaskId,
    r: &Reply,
    policies: &RetryPolicies,
) -> Result<ReplyOutcome, StoreError> {
    let (event, output, error) = match &r.result {
        ReplyResult::Completed(v) => (StepEvent::Complete, Some(v.to_string()), None),
        ReplyResult::PermanentError(e) => (StepEvent::PermanentError, None, Some(error_text(e))),
        ReplyResult::Failed(_) | ReplyResult::Postponed(_) => {
            return record_next_try(t, actor, task_id, r, policies).await;
        }
    };
    let next = StepState::Processing.on(event).expect("a processing step takes every reply");
    let changed =
        t.execute(APPLY_ONE, &[&r.step_id.0, &r.lease_token.0, &next.as_str(), &output, &error, &t.now.0]).await?;
    if changed != 1 {
        return refuse_reply(t, actor, r).await;
    }
    match &error {
        None => t.event(task_id, Some(r.step_id), ev::STEP_PROCESSED, EventLevel::Info, actor, json!({})).await?,
        Some(e) => {
            let detail = json!({"reason": "permanent error", "error": e});
            t.event(task_id, Some(r.step_id), ev::STEP_ERROR, EventLevel::Alert, actor, detail).await?
        }
    }
    let adv = advance_task(t, task_id, actor).await?;
    Ok(ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled })
}

/// A failed attempt (M5): the step runs again after its retry policy's next interval, its failure
/// count one up, or goes to Error when the policy has no try left. A postponement: it runs again
/// after the delay asked, with no failure counted. The task is locked, so the count and policy
/// read here are the ones the fenced write replaces.
async fn record_next_try(
    t: &Tx<'_>,
    actor: &str,
    task_id: TaskId,
    r: &Reply,
    policies: &RetryPolicies,
) -> Result<ReplyOutcome, StoreError> {
    // Whether it gives up is the policy's to say; either way only a processing step may fail.
    let row = t
        .query_opt(
            "SELECT agent, failure_count, retry, locked_by, deadline_at FROM steps
             WHERE id = $1 AND lease_token = $2 AND (state = 'processing') IS TRUE AND kind = 'agent'",
            &[&r.step_id.0, &r.lease_token.0],
        )
        .await?;
    let Some(row) = row else {
        return refuse_reply(t, actor, r).await;
    };
    let agent: String = get(&row, 0)?;
    let retry = retry_policy(&row, 2)?;
    let held = LapsedStep {
        agent: &agent,
        failure_count: count(&row, 1, "steps.failure_count")?,
        retry: retry.as_ref(),
        locked_by: get(&row, 3)?,
        lease_token: r.lease_token.0,
        on_timeout: OnTimeout::Retry,
        deadline_at: get::<Option<i64>>(&row, 4)?.map(Timestamp),
    };
    let plan = lapse::plan_reply(held, &r.result, t.now, policies, fastrand::f64())
        .expect("a failure or a postponement plans the step's next try");
    let due_now = plan.next == StepState::Pending && plan.due_at <= t.now;
    if !write_plan(t, r.step_id, task_id, r.lease_token.0, plan, actor).await? {
        return refuse_reply(t, actor, r).await;
    }
    if due_now {
        // A policy with no delay: the next try is due at once, so listeners wake at commit.
        t.mark_due_now();
    }
    let adv = advance_task(t, task_id, actor).await?;
    Ok(ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled })
}
