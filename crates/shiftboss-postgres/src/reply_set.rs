//! Replies recorded as sets: a batch's completions and permanent errors written with a few
//! statements for the whole batch instead of a handful per reply.
//!
//! Taken here: a reply that completes or ends a step in Error, on a top-level task that has no
//! other reply in the batch. Each of those tasks is already locked by the caller (see `lock`), so
//! the decider still runs for each task alone, on rows read under the lock.
//!
//! 1. One statement applies every fenced step change and writes its event: the UPDATE's WHERE
//!    repeats each reply's fence (lease token, processing, an agent's row), so the check and the
//!    write cannot be split; the replies it did not apply go back to the caller to be refused.
//! 2. The applied steps' tasks (with their buckets) and their step rows are read together.
//! 3. The decider runs on each task in memory. A task it only moves (no row to create, change or
//!    cancel: a retry job, or the last step of a workflow) is written with the others in one
//!    statement, its event with it. A task whose decide has actions (the next step of a workflow,
//!    a compensation to start) is written by the shared path from that same decide
//!    (`advance_decided`), as one reply at a time would be, without reading its rows again; the
//!    steps it creates are written ahead (`ahead`) under ids reserved for the whole set.
//!
//! A top-level task has no parent to tell when it ends, and a decide without actions starts no
//! child (a failure that starts a failure workflow takes the full path), so nothing here moves a
//! task other than the reply's own.

use crate::ahead::RESERVE_STEP_IDS;
use crate::rows::get;
use crate::tx::Tx;
use crate::writes::{STEP_VIEW_COLUMNS, TASK_ROW_COLUMNS, step_view, task_row};
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use shiftboss_core::decider::{Action, Decision, StepView, TaskMove, TaskView, decide};
use shiftboss_core::model::EventLevel;
use shiftboss_core::state::StepEvent;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::advance::{TaskRow, advance_decided, error_text};
use shiftboss_store::{Reply, ReplyOutcome, ReplyResult, StoreError, decided, event_kind as ev};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How many tasks that need a full advance are in flight at once on the transaction's connection.
const PIPELINE: usize = 32;

pub(crate) const APPLY: &str = "
WITH r AS MATERIALIZED (
    SELECT u.*, 'processing'::text AS held, 'agent'::text AS agent
      FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                  $8::text[])
        AS u(id, token, state, output, error, kind, level, detail)
), applied AS (
    UPDATE steps s SET state = r.state, output = r.output, last_error = coalesce(r.error, s.last_error),
           locked_by = NULL, complete_by = NULL, updated_at = $9
      FROM r
     WHERE s.id = ANY($1) AND s.id = r.id AND s.lease_token = r.token AND s.state = r.held AND s.kind = r.agent
    RETURNING s.id, s.task_id
), recorded AS (
    INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
    SELECT applied.task_id, applied.id, $9, r.kind, r.level, $10, r.detail
      FROM applied JOIN r ON r.id = applied.id
     ORDER BY applied.id
)
SELECT id FROM applied";

const MOVE_TASKS: &str = "
WITH m AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS m(id, state, output, kind, level, detail)
), moved AS (
    UPDATE tasks t SET state = m.state, output = coalesce(m.output, t.output), updated_at = $7
      FROM m
     WHERE t.id = m.id
    RETURNING t.id
)
INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
SELECT m.id, NULL, $7, m.kind, m.level, $8, m.detail FROM m JOIN moved ON moved.id = m.id ORDER BY m.id";

/// The reply a set takes: one per task, on a top-level task, completing or ending in Error.
pub fn takes(r: &Reply) -> bool {
    matches!(r.result, ReplyResult::Completed(_) | ReplyResult::PermanentError(_))
}

/// Records `replies` (each `takes` and on its own top-level task, which the caller has locked).
/// Returns each reply's outcome, or None for a reply the fence refused: the caller records the
/// refusal, with its reason.
pub async fn record_set(
    t: &Tx<'_>,
    actor: &str,
    replies: &[(&Reply, TaskId)],
) -> Result<Vec<Option<ReplyOutcome>>, StoreError> {
    let applied = apply_steps(t, actor, replies).await?;
    if applied.is_empty() {
        return Ok(vec![None; replies.len()]);
    }
    let tasks: Vec<i64> = replies.iter().filter(|(r, _)| applied.contains(&r.step_id.0)).map(|(_, t)| t.0).collect();
    let task_sql = format!("SELECT id, bucket, {TASK_ROW_COLUMNS} FROM tasks WHERE id = ANY($1)");
    let step_sql =
        format!("SELECT task_id, {STEP_VIEW_COLUMNS} FROM steps WHERE task_id = ANY($1) ORDER BY task_id, id");
    // Both reads are sent at once: the connection pipelines them.
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&tasks];
    let (rows, views) = tokio::try_join!(t.query(&task_sql, &params), t.query(&step_sql, &params))?;
    let mut loaded: HashMap<i64, (TaskRow, Vec<StepView>)> = HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: i64 = get(r, 0)?;
        // The steps its decide creates are written ahead under ids reserved below, inserted with
        // one statement at the commit instead of one round trip each.
        t.task_bucket(TaskId(id), get(r, 1)?);
        loaded.insert(id, (task_row(r, 2)?, Vec::new()));
    }
    for r in &views {
        if let Some((_, steps)) = loaded.get_mut(&get::<i64>(r, 0)?) {
            steps.push(step_view(r, 1)?);
        }
    }
    let mut out: Vec<Option<ReplyOutcome>> = vec![None; replies.len()];
    let mut moves = Moves::default();
    let mut advance: Vec<(usize, TaskId, TaskRow, Arc<WorkflowDef>, Decision)> = Vec::new();
    for (i, (r, task_id)) in replies.iter().enumerate() {
        if !applied.contains(&r.step_id.0) {
            continue;
        }
        // Each task has one reply in a set, so its rows are taken out for its decide.
        let (task, steps) =
            loaded.remove(&task_id.0).ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })?;
        if !task.state.is_active() {
            out[i] = Some(ReplyOutcome::Applied { task_state: task.state, scheduled: 0 });
            continue;
        }
        let def = t.definition(&task.workflow, task.version).await?;
        let view = TaskView {
            id: task_id.0,
            key: &task.key,
            state: task.state,
            input: &task.input,
            now: t.now,
            correlation_id: task.correlation_id.as_deref(),
        };
        let decision = decide(&def, &view, &steps);
        // A decide with actions (the next step of a workflow, a compensation to start) is written
        // by the shared path from this decide, without reading the rows again. So is a move that
        // starts something: a task starting to compensate has compensations to run, and a failure
        // may start a failure workflow.
        let full = !decision.actions.is_empty()
            || match decision.task {
                TaskMove::Compensate { .. } => true,
                TaskMove::Fail { .. } | TaskMove::CompensationFailed { .. } => def.on_failure.is_some(),
                _ => false,
            };
        if full {
            advance.push((i, *task_id, task, def, decision));
            continue;
        }
        let state = match decided::task_outcome(decision.task) {
            None => task.state,
            Some(o) => {
                let state = o.state;
                moves.push(*task_id, o);
                state
            }
        };
        out[i] = Some(ReplyOutcome::Applied { task_state: state, scheduled: 0 });
    }
    // An id for each step the decides create, reserved beside the moves' write (a set of retry
    // jobs, which create none, reserves nothing). A step a decide creates beyond these (a child
    // task's first) is inserted on a round trip of its own.
    let creates: usize =
        advance.iter().map(|(_, _, _, _, d)| d.actions.iter().filter(|a| matches!(a, Action::Create(_))).count()).sum();
    let reserve = async {
        if creates == 0 {
            return Ok(());
        }
        let n = i32::try_from(creates).unwrap_or(i32::MAX);
        t.reserve_step_ids(&t.query(RESERVE_STEP_IDS, &[&n]).await?)
    };
    tokio::try_join!(moves.write(t, actor), reserve)?;

    let mut running = stream::iter(advance.into_iter().map(|(i, task_id, task, def, decision)| async move {
        let adv = advance_decided(t, task_id, &task, &def, decision, actor).await?;
        Ok::<_, StoreError>((i, ReplyOutcome::Applied { task_state: adv.state, scheduled: adv.scheduled }))
    }))
    .buffer_unordered(PIPELINE);
    while let Some(done) = running.next().await {
        let (i, outcome) = done?;
        out[i] = Some(outcome);
    }
    Ok(out)
}

/// Step 1: the fenced step changes and their events, in one statement. Returns the applied ids.
async fn apply_steps(t: &Tx<'_>, actor: &str, replies: &[(&Reply, TaskId)]) -> Result<HashSet<i64>, StoreError> {
    let n = replies.len();
    let (mut ids, mut tokens, mut states) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut outputs, mut errors) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut kinds, mut levels, mut details) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for (r, _) in replies {
        let (event, output, error) = match &r.result {
            ReplyResult::Completed(v) => (StepEvent::Complete, Some(v.to_string()), None),
            ReplyResult::PermanentError(e) => (StepEvent::PermanentError, None, Some(error_text(e))),
            ReplyResult::Failed(_) | ReplyResult::Postponed(_) => {
                return Err(StoreError::Backend("a failed or postponed attempt is not recorded as a set".into()));
            }
        };
        let next: StepState = StepState::Processing.on(event).expect("a processing step takes every reply");
        let (kind, level, detail) = match &error {
            None => (ev::STEP_PROCESSED, EventLevel::Info, json!({})),
            Some(e) => (ev::STEP_ERROR, EventLevel::Alert, json!({"reason": "permanent error", "error": e})),
        };
        ids.push(r.step_id.0);
        tokens.push(r.lease_token.0);
        states.push(next.as_str());
        outputs.push(output);
        errors.push(error);
        kinds.push(kind);
        levels.push(level.as_str());
        details.push(detail.to_string());
    }
    let rows = t
        .query(APPLY, &[&ids, &tokens, &states, &outputs, &errors, &kinds, &levels, &details, &t.now.0, &actor])
        .await?;
    rows.iter().map(|r| get(r, 0)).collect()
}

/// Task moves gathered from the decides, written together.
#[derive(Default)]
struct Moves {
    ids: Vec<i64>,
    states: Vec<TaskState>,
    outputs: Vec<Option<String>>,
    kinds: Vec<&'static str>,
    levels: Vec<&'static str>,
    details: Vec<String>,
}

impl Moves {
    fn push(&mut self, task: TaskId, o: decided::TaskOutcome) {
        self.ids.push(task.0);
        self.states.push(o.state);
        self.outputs.push(o.output.as_ref().map(Value::to_string));
        self.kinds.push(o.kind);
        self.levels.push(o.level.as_str());
        self.details.push(o.detail.to_string());
    }

    async fn write(self, t: &Tx<'_>, actor: &str) -> Result<(), StoreError> {
        if self.ids.is_empty() {
            return Ok(());
        }
        let states: Vec<&str> = self.states.iter().map(|s| s.as_str()).collect();
        t.execute(
            MOVE_TASKS,
            &[&self.ids, &states, &self.outputs, &self.kinds, &self.levels, &self.details, &t.now.0, &actor],
        )
        .await?;
        Ok(())
    }
}
