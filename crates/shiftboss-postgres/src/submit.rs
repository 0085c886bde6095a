//! Registering definitions and submitting tasks.
//!
//! Both are "insert unless it exists" under READ COMMITTED: the INSERT's ON CONFLICT DO NOTHING
//! waits for a concurrent insert of the same key to commit, and the SELECT after it (a statement of
//! its own, so a new snapshot) then sees that row. Two callers racing on one key never both insert
//! and never fail with a unique violation.

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
    let Some(row) = t.query_opt("SELECT id, workflow, input FROM tasks WHERE task_key = $1", &[&p.key]).await? else {
        return Ok(None);
    };
    p.resubmission(TaskId(get(&row, 0)?), get(&row, 1)?, get(&row, 2)?).map(Some)
}
