//! Registering definitions and submitting tasks.
//!
//! Both are "insert unless it exists" under READ COMMITTED: the INSERT's ON CONFLICT DO NOTHING
//! waits for a concurrent insert of the same key to commit, and the SELECT after it (a statement of
//! its own, so a new snapshot) then sees that row. Two callers racing on one key never both insert
//! and never fail with a unique violation.
//!
//! A key stays taken once its task is archived (`tasks_history`). The unique index cannot span two
//! tables, so a new row is checked against history after it is inserted (see `writes::archived_owner`).

use crate::rows::get;
use crate::tx::{Tx, pg_int};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted};

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

pub async fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    shiftboss_store::advance::submit_task(t, p).await
}
