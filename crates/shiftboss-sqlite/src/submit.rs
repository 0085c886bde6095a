//! Registering definitions and submitting tasks.

use crate::error::map_err;
use crate::tx::Tx;
use crate::writes::run_now;
use rusqlite::{OptionalExtension, params};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::advance::{definition_text, registered_again};
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted};

pub fn register_workflow(t: &Tx<'_>, def: &WorkflowDef) -> Result<RegisterOutcome, StoreError> {
    let text = definition_text(def)?;
    let existing: Option<String> =
        t.tx.query_row(
            "SELECT definition FROM workflows WHERE name = ?1 AND version = ?2",
            params![def.name, def.version],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    if let Some(old) = existing {
        return registered_again(def, &old);
    }
    t.tx.execute(
        "INSERT INTO workflows (name, version, definition, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![def.name, def.version, text, t.now.0],
    )
    .map_err(map_err)?;
    Ok(RegisterOutcome::Created)
}

pub fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    run_now(shiftboss_store::advance::submit_task(t, p))
}

pub fn submit_many(t: &Tx<'_>, batch: &[SubmitTask]) -> Result<Vec<Submitted>, StoreError> {
    run_now(shiftboss_store::advance::submit_tasks(t, batch))
}
