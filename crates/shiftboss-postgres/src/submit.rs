//! Registering definitions and submitting tasks.
//!
//! Both are "insert unless it exists" under READ COMMITTED: the INSERT's ON CONFLICT DO NOTHING
//! waits for a concurrent insert of the same key to commit, and the SELECT after it (a statement of
//! its own, so a new snapshot) then sees that row. Two callers racing on one key never both insert
//! and never fail with a unique violation.
//!
//! A key stays taken once its task is archived (`tasks_history`). The unique index cannot span two
//! tables, so new rows are checked against history after they are inserted (see
//! [`insert_submitted`]).

use crate::ahead::RESERVE_STEP_IDS;
use crate::error::map_err;
use crate::lock::held;
use crate::rows::get;
use crate::tx::{Tx, pg_int};
use shiftboss_core::TaskId;
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_store::advance::{KeyOwner, Keyed, NewTask, definition_text, registered_again};
use shiftboss_store::{RegisterOutcome, StoreError, SubmitTask, Submitted};
use std::collections::HashMap;

/// Step ids reserved per submitted task, for the steps its first decide creates (the first step,
/// or a fork's first steps); a decide that creates more inserts the rest one by one.
const STEP_IDS_PER_TASK: usize = 2;

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

pub async fn submit_many(t: &Tx<'_>, batch: &[SubmitTask]) -> Result<Vec<Submitted>, StoreError> {
    shiftboss_store::advance::submit_tasks(t, batch).await
}

/// The submitted tasks' rows, each unless its key is taken.
const INSERT_TASKS: &str =
    "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                    bucket, depth, deadline_at, domains, correlation_id)
 SELECT k, w, v, 'running', p, i, $8, $8, b, 0, d, m, c
   FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::int[], $7::bigint[],
               $9::text[], $10::text[])
        WITH ORDINALITY AS j(k, w, v, p, i, b, d, m, c, n)
  ORDER BY n
 ON CONFLICT (task_key) DO NOTHING
 RETURNING id, task_key";

/// The task rows of submissions (keys distinct), one multi-row INSERT; in the same round trip,
/// pipelined behind it, the history's holders of these keys and the step ids the first decides
/// will use (see `ahead`).
///
/// Race-free at READ COMMITTED: the history read is a statement after the INSERT, so it sees every
/// transaction that committed before it. An archiver that moved a key's live task to history had
/// to commit before the INSERT could take the key (the INSERT waits on the row it deletes), so it
/// is seen there, and the row inserted for that key is deleted again. A restore (history to live)
/// that runs meanwhile waits on the new row at its own INSERT, and has not committed its delete
/// from history, so the archived row is still seen. A key the INSERT found taken is read from both
/// tables in one statement (one snapshot: the archiver moves a task in one transaction, so it is
/// seen in exactly one of them).
pub async fn insert_submitted(t: &Tx<'_>, new: &[NewTask<'_>]) -> Result<Vec<Keyed>, StoreError> {
    if new.is_empty() {
        return Ok(Vec::new());
    }
    let n = new.len();
    let keys: Vec<&str> = new.iter().map(|r| r.key).collect();
    let workflows: Vec<&str> = new.iter().map(|r| r.workflow).collect();
    let versions = new.iter().map(|r| pg_int(r.version)).collect::<Result<Vec<i32>, _>>()?;
    let priorities: Vec<i32> = new.iter().map(|r| r.priority).collect();
    let inputs: Vec<String> = new.iter().map(|r| r.input.to_string()).collect();
    let buckets: Vec<i32> = new.iter().map(|r| i32::from(bucket_of(r.key))).collect();
    let deadlines: Vec<Option<i64>> = new.iter().map(|r| r.deadline_at).collect();
    let domains: Vec<Option<&str>> = new.iter().map(|r| r.domains.as_deref()).collect();
    let correlation: Vec<Option<&str>> = new.iter().map(|r| r.correlation_id.as_deref()).collect();
    let reserve = i32::try_from(n * STEP_IDS_PER_TASK).unwrap_or(i32::MAX);
    // Prepared first, so that the three are sent in this order (see `Tx::finish_with`); prepared
    // together, so that on a connection without a cache (a caller's own, `submit_task_in`) the
    // three preparations are one round trip, not three.
    let (insert, history, ids) = tokio::try_join!(
        t.prepare(INSERT_TASKS),
        t.prepare("SELECT id, task_key, workflow, input FROM tasks_history WHERE task_key = ANY($1)"),
        t.prepare(RESERVE_STEP_IDS)
    )?;
    let c = t.client();
    let reserved = async {
        if reserve == 0 {
            return Ok(Vec::new());
        }
        c.query(&ids, &[&reserve]).await
    };
    let (inserted, archived, ids) = futures_util::future::join3(
        c.query(
            &insert,
            &[
                &keys,
                &workflows,
                &versions,
                &priorities,
                &inputs,
                &buckets,
                &deadlines,
                &t.now.0,
                &domains,
                &correlation,
            ],
        ),
        c.query(&history, &[&keys]),
        reserved,
    )
    .await;
    let (inserted, archived, ids) = (inserted.map_err(map_err)?, archived.map_err(map_err)?, ids.map_err(map_err)?);
    t.reserve_step_ids(&ids)?;
    let mut new_ids: HashMap<String, TaskId> = HashMap::with_capacity(inserted.len());
    for r in &inserted {
        new_ids.insert(get(r, 1)?, TaskId(get(r, 0)?));
    }
    let mut owners: HashMap<String, KeyOwner> = HashMap::new();
    for r in &archived {
        owners.insert(get(r, 1)?, (TaskId(get(r, 0)?), get(r, 2)?, get(r, 3)?));
    }
    // A key held in history is history's: the row inserted for it goes.
    let lost: Vec<i64> = owners.keys().filter_map(|k| new_ids.remove(k)).map(|id| id.0).collect();
    if !lost.is_empty() {
        t.execute("DELETE FROM tasks WHERE id = ANY($1)", &[&lost]).await?;
    }
    let taken: Vec<&str> =
        keys.iter().copied().filter(|k| !new_ids.contains_key(*k) && !owners.contains_key(*k)).collect();
    if !taken.is_empty() {
        let rows = t
            .query(
                "SELECT id, task_key, workflow, input FROM tasks WHERE task_key = ANY($1)
                 UNION ALL
                 SELECT id, task_key, workflow, input FROM tasks_history WHERE task_key = ANY($1)",
                &[&taken],
            )
            .await?;
        for r in &rows {
            owners.insert(get(r, 1)?, (TaskId(get(r, 0)?), get(r, 2)?, get(r, 3)?));
        }
    }
    keys.iter()
        .zip(&buckets)
        .map(|(k, &bucket)| match (new_ids.get(*k), owners.remove(*k)) {
            (Some(&id), _) => {
                held(t, id);
                t.task_bucket(id, bucket);
                Ok(Keyed::New(id))
            }
            (None, Some(owner)) => Ok(Keyed::Taken(owner)),
            (None, None) => {
                Err(StoreError::Unavailable(format!("task key {k:?} was taken and released concurrently; try again")))
            }
        })
        .collect()
}
