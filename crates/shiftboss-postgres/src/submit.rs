//! Registering definitions and submitting tasks.
//!
//! Both are "insert unless it exists" under READ COMMITTED: the INSERT's ON CONFLICT DO NOTHING
//! waits for a concurrent insert of the same key to commit, and the SELECT after it (a statement of
//! its own, so a new snapshot) then sees that row. Two callers racing on one key never both insert
//! and never fail with a unique violation.
//!
//! A key stays taken once its task is archived (`tasks_history`). The unique index cannot span two
//! tables, so a new row is checked against history after it is inserted (see [`archived_owner`]).

use crate::advance::advance_task;
use crate::lock::lock_tasks;
use crate::rows::get;
use crate::tx::{Tx, pg_int};
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted, event_kind as ev};

pub async fn register_workflow(t: &Tx<'_>, def: &WorkflowDef) -> Result<RegisterOutcome, StoreError> {
    def.validate().map_err(|e| StoreError::InvalidInput(format!("workflow {}: {e}", def.name)))?;
    let version = pg_int(def.version)?;
    let text = serde_json::to_string(def).expect("definitions serialize");
    let inserted = t
        .execute(
            "INSERT INTO workflows (name, version, definition, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name, version) DO NOTHING",
            &[&def.name, &version, &text, &t.now.0],
        )
        .await?;
    if inserted == 1 {
        return Ok(RegisterOutcome::Created);
    }
    let row = t
        .query_one("SELECT definition FROM workflows WHERE name = $1 AND version = $2", &[&def.name, &version])
        .await?;
    // Compare parsed values, not text, so that a re-serialization is not a conflict.
    let old: Option<WorkflowDef> = serde_json::from_str(get(&row, 0)?).ok();
    if old.as_ref() == Some(def) {
        Ok(RegisterOutcome::Unchanged)
    } else {
        Err(StoreError::Conflict(format!(
            "workflow {} version {} is already registered with other content; register it as a new version",
            def.name, def.version
        )))
    }
}

pub async fn latest_version(t: &Tx<'_>, name: &str) -> Result<Option<u32>, StoreError> {
    let row = t.query_one("SELECT max(version) FROM workflows WHERE name = $1", &[&name]).await?;
    Ok(get::<Option<i32>>(&row, 0)?.map(|v| v as u32))
}

pub async fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    p.validate()?;
    if let Some(existing) = existing(t, p).await? {
        return Ok(existing);
    }
    let version = match p.version {
        Some(v) => v,
        None => latest_version(t, &p.workflow)
            .await?
            .ok_or_else(|| StoreError::InvalidInput(format!("unknown workflow {:?}", p.workflow)))?,
    };
    // Loads (and checks) the definition before anything is written.
    let def = t.definition(&p.workflow, version).await.map_err(|e| match e {
        StoreError::NotFound { .. } => {
            StoreError::InvalidInput(format!("unknown workflow {:?} version {version}", p.workflow))
        }
        other => other,
    })?;
    let row = t
        .query_opt(
            "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                                bucket, deadline_at)
             VALUES ($1, $2, $3, 'running', $4, $5, $6, $6, $7, $8)
             ON CONFLICT (task_key) DO NOTHING
             RETURNING id",
            &[
                &p.key,
                &p.workflow,
                &pg_int(version)?,
                &p.priority,
                &p.input.to_string(),
                &t.now.0,
                &i32::from(shiftboss_core::buckets::bucket_of(&p.key)),
                &def.timeout.map(|d| t.now.plus(d).0),
            ],
        )
        .await?;
    let Some(row) = row else {
        // Another caller submitted the same key since our first look, and committed.
        return existing(t, p).await?.ok_or_else(|| {
            StoreError::Unavailable(format!("task key {:?} was taken and released concurrently; try again", p.key))
        });
    };
    let task_id = TaskId(get(&row, 0)?);
    if let Some((id, workflow, input)) = archived_owner(t, &p.key, task_id).await? {
        return p.resubmission(id, &workflow, &input);
    }
    t.event(
        task_id,
        None,
        ev::TASK_RECEIVED,
        EventLevel::Info,
        &p.actor,
        json!({"key": p.key, "workflow": p.workflow, "version": version}),
    )
    .await?;
    // The row is new and not yet visible to anyone, so this lock never waits; it is taken anyway so
    // that every decider run holds its task's lock.
    lock_tasks(t, &[task_id]).await?;
    advance_task(t, task_id, &p.actor).await?;
    Ok(Submitted { task_id, created: true })
}

/// The task already submitted under this key, if any; a `Conflict` if it was submitted with
/// another workflow or input.
async fn existing(t: &Tx<'_>, p: &SubmitTask) -> Result<Option<Submitted>, StoreError> {
    let Some((id, workflow, input)) = key_owner(t, &p.key).await? else {
        return Ok(None);
    };
    p.resubmission(id, &workflow, &input).map(Some)
}

/// The task a key names, live or archived: its id, workflow and input as stored. One statement, so
/// one snapshot: the archiver moves a task between the tables in one transaction, so the task is
/// seen in exactly one of them.
pub async fn key_owner(t: &Tx<'_>, key: &str) -> Result<Option<(TaskId, String, String)>, StoreError> {
    let row = t
        .query_opt(
            "SELECT id, workflow, input FROM tasks WHERE task_key = $1
             UNION ALL
             SELECT id, workflow, input FROM tasks_history WHERE task_key = $1
             LIMIT 1",
            &[&key],
        )
        .await?;
    row.map(|r| Ok((TaskId(get(&r, 0)?), get(&r, 1)?, get(&r, 2)?))).transpose()
}

/// After inserting `new` under `key`: the archived task that holds the key, if one does, with `new`
/// deleted again (so that the caller's transaction, which goes on, keeps no trace of it).
///
/// Race-free at READ COMMITTED: this is a statement after the INSERT, so it sees every transaction
/// that committed before it. An archiver that moved the key's live task to history had to commit
/// before the INSERT could take the key (the INSERT waits on the row it deletes), so it is seen
/// here. A restore (history to live) that runs meanwhile waits on `new` at its own INSERT, and has
/// not committed the delete from history, so the archived row is still seen here.
pub async fn archived_owner(
    t: &Tx<'_>,
    key: &str,
    new: TaskId,
) -> Result<Option<(TaskId, String, String)>, StoreError> {
    let row = t.query_opt("SELECT id, workflow, input FROM tasks_history WHERE task_key = $1", &[&key]).await?;
    let Some(row) = row else { return Ok(None) };
    t.execute("DELETE FROM tasks WHERE id = $1", &[&new.0]).await?;
    Ok(Some((TaskId(get(&row, 0)?), get(&row, 1)?, get(&row, 2)?)))
}
