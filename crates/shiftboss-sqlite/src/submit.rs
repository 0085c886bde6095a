//! Registering definitions and submitting tasks.

use crate::error::map_err;
use crate::tx::Tx;
use crate::writes::run_now;
use rusqlite::{OptionalExtension, params};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted};

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

pub fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    run_now(shiftboss_store::advance::submit_task(t, p))
}
