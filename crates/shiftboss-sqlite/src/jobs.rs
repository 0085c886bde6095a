//! Retry jobs (M1-M8): enqueue (a task of the handler's one-step workflow, written with its step
//! directly: there is nothing for the decider to choose), search, and bulk resubmit.

use crate::archive::restore_tree;
use crate::error::map_err;
use crate::submit::register_workflow;
use crate::tx::Tx;
use crate::writes::{insert_row, key_owner, run_now};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::json;
use shiftboss_core::jobs::{self, JobState};
use shiftboss_core::model::EventLevel;
use shiftboss_core::{StepState, TaskId, Timestamp};
use shiftboss_store::{
    EnqueueJob, JobPlace, JobQuery, JobRecord, JobRef, OperateTask, ResubmitJobs, ResubmitReport, StoreError,
    Submitted, TaskCommand, event_kind as ev,
};
use std::collections::BTreeSet;

pub fn enqueue(t: &Tx<'_>, batch: &[EnqueueJob], actor: &str) -> Result<Vec<Submitted>, StoreError> {
    let handlers: BTreeSet<&str> = batch.iter().map(|j| j.handler.as_str()).collect();
    for handler in handlers {
        ensure_workflow(t, handler)?;
    }
    batch.iter().map(|j| enqueue_one(t, j, actor)).collect()
}

/// Registers the handler's job workflow the first time a job of it is enqueued.
fn ensure_workflow(t: &Tx<'_>, handler: &str) -> Result<(), StoreError> {
    match t.definition(&jobs::workflow_name(handler), 1) {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => {
            let def = jobs::definition(handler).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            register_workflow(t, &def).map(|_| ())
        }
        Err(e) => Err(e),
    }
}

fn enqueue_one(t: &Tx<'_>, j: &EnqueueJob, actor: &str) -> Result<Submitted, StoreError> {
    let key = j.key_or_new();
    if j.key.is_some()
        && let Some((id, workflow, input)) = key_owner(t, &key)?
    {
        let task_id = j.repeat_of(&key, id, &workflow, &input)?;
        return Ok(Submitted { task_id, created: false });
    }
    let workflow = jobs::workflow_name(&j.handler);
    let bucket = j.bucket_for(&key);
    t.tx.prepare_cached(
        "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at, bucket)
         VALUES (?1, ?2, 1, 'running', ?3, ?4, ?5, ?5, ?6)",
    )
    .and_then(|mut st| st.execute(params![key, workflow, j.priority, j.params.to_string(), t.now.0, bucket]))
    .map_err(map_err)?;
    let task_id = TaskId(t.tx.last_insert_rowid());
    let row = j.step_row(&key, t.now);
    insert_row(t, task_id, jobs::STEP, StepState::Pending, None, &row)?;
    let detail = json!({"key": key, "workflow": workflow, "version": 1, "handler": j.handler, "due_at": row.due_at});
    t.event(task_id, None, ev::TASK_RECEIVED, EventLevel::Info, actor, detail)?;
    Ok(Submitted { task_id, created: true })
}

/// The columns of a job row, from a task and its `run` step (`t` and `s`).
const JOB_COLUMNS: &str = "t.id, t.task_key, t.workflow, t.state, t.bucket, t.priority, t.input, t.output, t.created_at, \
     t.updated_at, s.state, s.due_at, s.failure_count, s.attempts, s.last_error";

fn job(row: &rusqlite::Row<'_>, archived: bool) -> rusqlite::Result<JobRecord> {
    let workflow: String = row.get(2)?;
    let task_state = crate::rows::parsed(row, 3, "tasks.state")?;
    let step_state = crate::rows::parsed(row, 10, "steps.state")?;
    let state = JobState::of(task_state, step_state);
    let updated_at = Timestamp(row.get(9)?);
    Ok(JobRecord {
        id: TaskId(row.get(0)?),
        key: row.get(1)?,
        handler: jobs::handler_of(&workflow).unwrap_or(&workflow).to_owned(),
        state,
        bucket: row.get(4)?,
        priority: row.get(5)?,
        params: crate::rows::json(row, 6, "tasks.input")?,
        output: crate::rows::opt_json(row, 7, "tasks.output")?,
        created_at: Timestamp(row.get(8)?),
        due_at: if state.is_finished() { updated_at } else { Timestamp(row.get(11)?) },
        updated_at,
        retries: row.get(12)?,
        attempts: row.get(13)?,
        last_error: row.get(14)?,
        archived,
    })
}

/// The condition on `t` (task) and `s` (step) for a job state.
fn state_condition(state: JobState) -> &'static str {
    match state {
        JobState::Succeeded => "t.state = 'completed'",
        JobState::GivenUp => "t.state = 'failed'",
        JobState::Cancelled => "t.state IN ('cancelled', 'terminated', 'compensated')",
        JobState::Running => "t.state IN ('running', 'paused', 'compensating') AND s.state = 'processing'",
        JobState::Pending => "t.state IN ('running', 'paused', 'compensating') AND s.state <> 'processing'",
    }
}

/// The FROM and WHERE of a job search over the hot tables or history (`?1` handler, `?2` from,
/// `?3` to, `?4` reason pattern, `?5` before, `?6` id).
fn search_sql(place: JobPlace, state: Option<JobState>) -> String {
    let (tasks, steps) = match place {
        JobPlace::Live => ("tasks", "steps"),
        JobPlace::History => ("tasks_history", "steps_history"),
    };
    let state = state.map_or("1", state_condition);
    format!(
        "FROM {tasks} t JOIN {steps} s ON s.task_id = t.id AND s.name = '{step}'
         WHERE t.workflow >= '{prefix}' AND t.workflow < '{end}'
           AND (?1 IS NULL OR t.workflow = '{prefix}' || ?1)
           AND (?2 IS NULL OR t.updated_at >= ?2) AND (?3 IS NULL OR t.updated_at < ?3)
           AND (?4 IS NULL OR s.last_error LIKE ?4 ESCAPE '\\')
           AND (?5 IS NULL OR t.id < ?5) AND (?6 IS NULL OR t.id = ?6)
           AND {state}",
        step = jobs::STEP,
        prefix = jobs::WORKFLOW_PREFIX,
        // The first string after every "job:..." name, so the range covers exactly the prefix.
        end = "job;",
    )
}

fn search_params(q: &JobQuery) -> [Box<dyn rusqlite::ToSql>; 6] {
    [
        Box::new(q.handler.clone()),
        Box::new(q.from.map(|t| t.0)),
        Box::new(q.to.map(|t| t.0)),
        Box::new(q.reason_pattern()),
        Box::new(q.before.map(|b| b.0)),
        Box::new(q.id.map(|b| b.0)),
    ]
}

pub fn list(c: &Connection, q: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
    let sql = format!("SELECT {JOB_COLUMNS} {} ORDER BY t.id DESC LIMIT {}", search_sql(q.place, q.state), q.limit);
    let archived = q.place == JobPlace::History;
    let mut st = c.prepare(&sql).map_err(map_err)?;
    let p = search_params(q);
    let rows = st
        .query_map(rusqlite::params_from_iter(p.iter().map(|b| b.as_ref())), |r| job(r, archived))
        .map_err(map_err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(map_err)
}

pub fn find(c: &Connection, r: &JobRef) -> Result<Option<JobRecord>, StoreError> {
    for (place, archived) in [(JobPlace::Live, false), (JobPlace::History, true)] {
        let (tasks, steps) = match place {
            JobPlace::Live => ("tasks", "steps"),
            JobPlace::History => ("tasks_history", "steps_history"),
        };
        let (column, value): (&str, Box<dyn rusqlite::ToSql>) = match r {
            JobRef::Id(id) => ("t.id", Box::new(id.0)),
            JobRef::Key(k) => ("t.task_key", Box::new(k.clone())),
        };
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM {tasks} t JOIN {steps} s ON s.task_id = t.id AND s.name = '{}'
             WHERE {column} = ?1 AND t.workflow >= '{}' AND t.workflow < 'job;'",
            jobs::STEP,
            jobs::WORKFLOW_PREFIX
        );
        let found = c.query_row(&sql, [value.as_ref()], |row| job(row, archived)).optional().map_err(map_err)?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

pub fn resubmit(t: &Tx<'_>, p: &ResubmitJobs) -> Result<ResubmitReport, StoreError> {
    let mut report = ResubmitReport::default();
    let mut left = p.query.limit;
    for place in [JobPlace::Live, JobPlace::History] {
        let from = search_sql(place, Some(JobState::GivenUp));
        let params = search_params(&p.query);
        let refs = || rusqlite::params_from_iter(params.iter().map(|b| b.as_ref()));
        let matched: i64 = t.tx.query_row(&format!("SELECT count(*) {from}"), refs(), |r| r.get(0)).map_err(map_err)?;
        report.matched += matched as u64;
        if p.dry_run || left == 0 {
            continue;
        }
        let ids: Vec<i64> = {
            let mut st = t.tx.prepare(&format!("SELECT t.id {from} ORDER BY t.id LIMIT {left}")).map_err(map_err)?;
            st.query_map(refs(), |r| r.get(0)).map_err(map_err)?.collect::<Result<_, _>>().map_err(map_err)?
        };
        for id in ids {
            let task_id = TaskId(id);
            if place == JobPlace::History {
                restore_tree(t, task_id, &p.actor)?;
            }
            let command = TaskCommand::Retry;
            let op = OperateTask { task_id, actor: p.actor.clone(), reason: p.reason.clone(), command };
            run_now(shiftboss_store::advance::operate_task(t, &op))?;
            report.resubmitted += 1;
            left -= 1;
        }
    }
    Ok(report)
}
