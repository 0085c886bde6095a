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
use shiftboss_store::advance::{definition_text, registered_again};
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted};

pub async fn register_workflow(t: &Tx<'_>, def: &WorkflowDef) -> Result<RegisterOutcome, StoreError> {
    let text = definition_text(def)?;
    let version = pg_int(def.version)?;
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
    registered_again(def, get(&row, 0)?)
}

pub async fn submit(t: &Tx<'_>, p: &SubmitTask) -> Result<Submitted, StoreError> {
    shiftboss_store::advance::submit_task(t, p).await
}
