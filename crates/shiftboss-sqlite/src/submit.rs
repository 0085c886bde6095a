//! Registering definitions and submitting tasks.

use crate::advance::advance_task;
use crate::error::map_err;
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted, event_kind as ev};

pub fn register_workflow(t: &Tx<'_>, def: &WorkflowDef) -> Result<RegisterOutcome, StoreError> {
    def.validate().map_err(|e| StoreError::InvalidInput(format!("workflow {}: {e}", def.name)))?;
    let text = serde_json::to_string(def).expect("definitions serialize");
    let existing: Option<String> =
        t.tx.query_row(
            "SELECT definition FROM workflows WHERE name = ?1 AND version = ?2",
            params![def.name, def.version],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    match existing {
        Some(old) => {
            // Compare parsed values, not text, so that a re-serialization is not a conflict.
            let old: Option<WorkflowDef> = serde_json::from_str(&old).ok();
            if old.as_ref() == Some(def) {
                Ok(RegisterOutcome::Unchanged)
            } else {
                Err(StoreError::Conflict(format!(
                    "workflow {} version {} is already registered with other content; register it as a new version",
                    def.name, def.version
                )))
            }
        }
        None => {
            t.tx.execute(
                "INSERT INTO workflows (name, version, definition, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![def.name, def.version, text, t.now.0],
            )
            .map_err(map_err)?;
            Ok(RegisterOutcome::Created)
        }
    }
}

pub fn latest_version(t: &Tx<'_>, name: &str) -> Result<Option<u32>, StoreError> {
    t.tx.query_row("SELECT max(version) FROM workflows WHERE name = ?1", [name], |r| r.get(0)).map_err(map_err)
}

/// The task a key names, live or archived: its id, workflow and input as stored.
pub fn key_owner(t: &Tx<'_>, key: &str) -> Result<Option<(TaskId, String, String)>, StoreError> {
    for table in ["tasks", "tasks_history"] {
        let found =
            t.tx.prepare_cached(&format!("SELECT id, workflow, input FROM {table} WHERE task_key = ?1"))
                .and_then(|mut st| st.query_row([key], |r| Ok((TaskId(r.get(0)?), r.get(1)?, r.get(2)?))).optional())
                .map_err(map_err)?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

pub fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    p.validate()?;
    if let Some((id, workflow, input)) = key_owner(t, &p.key)? {
        return p.resubmission(id, &workflow, &input);
    }
    let version = match p.version {
        Some(v) => v,
        None => latest_version(t, &p.workflow)?
            .ok_or_else(|| StoreError::InvalidInput(format!("unknown workflow {:?}", p.workflow)))?,
    };
    // Loads (and checks) the definition before anything is written.
    let def = t.definition(&p.workflow, version).map_err(|e| match e {
        StoreError::NotFound { .. } => {
            StoreError::InvalidInput(format!("unknown workflow {:?} version {version}", p.workflow))
        }
        other => other,
    })?;
    t.tx.execute(
        "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at, bucket,
                            deadline_at)
         VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?6, ?7, ?8)",
        params![
            p.key,
            p.workflow,
            version,
            p.priority,
            p.input.to_string(),
            t.now.0,
            bucket_of(&p.key),
            def.timeout.map(|d| t.now.plus(d).0)
        ],
    )
    .map_err(map_err)?;
    let task_id = TaskId(t.tx.last_insert_rowid());
    t.event(
        task_id,
        None,
        ev::TASK_RECEIVED,
        EventLevel::Info,
        &p.actor,
        json!({"key": p.key, "workflow": p.workflow, "version": version}),
    )?;
    advance_task(t, task_id, &p.actor)?;
    Ok(Submitted { task_id, created: true })
}
