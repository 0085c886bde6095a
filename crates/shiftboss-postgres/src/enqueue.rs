//! Enqueueing retry jobs (M1): each a task of its handler's one-step workflow, written with its
//! `run` step and `task.received` event directly (there is nothing for the decider to choose).
//!
//! A batch (up to `MAX_ENQUEUE_BATCH`) costs a fixed number of statements, whatever its size: one
//! multi-row INSERT per table, over arrays (`unnest`), plus one look-up of the keys taken already.
//!
//! Unique keys, across `tasks` and `tasks_history`, at READ COMMITTED:
//! 1. The tasks are inserted with `ON CONFLICT (task_key) DO NOTHING`: a key live in `tasks` (or
//!    being inserted, or moved out by an archiver, by a transaction still open: the INSERT waits
//!    for it) is left alone. A key given twice in the batch is inserted once, for its first job.
//! 2. Then one statement reads the owners of every caller-given key, in both tables. Being a new
//!    statement, it sees every transaction that committed before it, among them an archiver that
//!    had the key's live row when step 1 began (see `writes::archived_owner`). A key now held in
//!    history is history's: the row step 1 inserted for it is deleted again.
//! 3. Each job whose key was taken is the same job (same handler and params) or a `Conflict`. On a
//!    `Conflict` the rows this call inserted are deleted before the error is returned, so a
//!    caller's own transaction (`enqueue_jobs_in`) is left as it was.
//! 4. The steps and events of the new tasks are inserted.

use crate::rows::get;
use crate::submit::register_workflow;
use crate::tx::Tx;
use serde_json::json;
use shiftboss_core::jobs;
use shiftboss_core::{StepState, TaskId};
use shiftboss_store::decided::StepRow;
use shiftboss_store::{EnqueueJob, StoreError, Submitted, event_kind as ev};
use std::collections::{BTreeSet, HashMap};

/// The job workflows' one version.
const VERSION: i32 = 1;

/// Enqueues `batch` (validated already) in `t`; one `Submitted` per job, in order.
pub async fn enqueue(t: &Tx<'_>, batch: &[EnqueueJob], actor: &str) -> Result<Vec<Submitted>, StoreError> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let handlers: BTreeSet<&str> = batch.iter().map(|j| j.handler.as_str()).collect();
    for handler in handlers {
        ensure_workflow(t, handler).await?;
    }
    let keys: Vec<String> = batch.iter().map(EnqueueJob::key_or_new).collect();
    let mut inserted = insert_tasks(t, batch, &keys).await?;
    let owners = match owners(t, batch, &keys, &mut inserted).await {
        Ok(o) => o,
        Err(e) => return Err(undo(t, &inserted, e).await),
    };
    // Which job each key's new row belongs to: the first that gave the key.
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, key) in keys.iter().enumerate() {
        first.entry(key.as_str()).or_insert(i);
    }
    let mut out = Vec::with_capacity(batch.len());
    let mut new = Vec::new();
    for (i, (j, key)) in batch.iter().zip(&keys).enumerate() {
        match inserted.get(key) {
            Some(&id) if first.get(key.as_str()) == Some(&i) => {
                out.push(Submitted { task_id: id, created: true });
                new.push((i, id));
            }
            _ => match repeat(j, key, &owners) {
                Ok(task_id) => out.push(Submitted { task_id, created: false }),
                Err(e) => return Err(undo(t, &inserted, e).await),
            },
        }
    }
    insert_steps_and_events(t, batch, &keys, &new, actor).await?;
    Ok(out)
}

/// Registers the handler's job workflow the first time a job of it is enqueued.
async fn ensure_workflow(t: &Tx<'_>, handler: &str) -> Result<(), StoreError> {
    match t.definition(&jobs::workflow_name(handler), VERSION as u32).await {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => {
            let def = jobs::definition(handler).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            register_workflow(t, &def).await.map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// Step 1: the task rows, in batch order; returns the keys that got a new row, with its id.
async fn insert_tasks(
    t: &Tx<'_>,
    batch: &[EnqueueJob],
    keys: &[String],
) -> Result<HashMap<String, TaskId>, StoreError> {
    let workflows: Vec<String> = batch.iter().map(|j| jobs::workflow_name(&j.handler)).collect();
    let priorities: Vec<i32> = batch.iter().map(|j| j.priority).collect();
    let inputs: Vec<String> = batch.iter().map(|j| j.params.to_string()).collect();
    let buckets: Vec<i32> = batch.iter().zip(keys).map(|(j, k)| i32::from(j.bucket_for(k))).collect();
    let rows = t
        .query(
            "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                                bucket)
             SELECT k, w, $6, 'running', p, i, $7, $7, b
               FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[])
                    WITH ORDINALITY AS j(k, w, p, i, b, n)
              ORDER BY n
             ON CONFLICT (task_key) DO NOTHING
             RETURNING id, task_key",
            &[&keys, &workflows, &priorities, &inputs, &buckets, &VERSION, &t.now.0],
        )
        .await?;
    rows.iter().map(|r| Ok((get(r, 1)?, TaskId(get(r, 0)?)))).collect()
}

/// What holds a key: its task's id, workflow and stored input.
type Owner = (TaskId, String, String);

/// Step 2: the owner of every key a caller gave; rows of `inserted` that lose their key to
/// history are deleted and dropped from it.
async fn owners(
    t: &Tx<'_>,
    batch: &[EnqueueJob],
    keys: &[String],
    inserted: &mut HashMap<String, TaskId>,
) -> Result<HashMap<String, Owner>, StoreError> {
    let given: BTreeSet<&str> =
        batch.iter().zip(keys).filter(|(j, _)| j.key.is_some()).map(|(_, k)| k.as_str()).collect();
    if given.is_empty() {
        return Ok(HashMap::new());
    }
    let given: Vec<&str> = given.into_iter().collect();
    // One statement, one snapshot: a task that an archiver (or a restore) moves is seen in exactly
    // one of the tables. Only a row this call has just inserted can be seen beside history.
    let rows = t
        .query(
            "SELECT id, task_key, workflow, input, false FROM tasks WHERE task_key = ANY($1)
             UNION ALL
             SELECT id, task_key, workflow, input, true FROM tasks_history WHERE task_key = ANY($1)",
            &[&given],
        )
        .await?;
    let (mut live, mut archived) = (HashMap::new(), HashMap::new());
    for r in &rows {
        let owner: Owner = (TaskId(get(r, 0)?), get(r, 2)?, get(r, 3)?);
        let table = if get::<bool>(r, 4)? { &mut archived } else { &mut live };
        table.insert(get::<String>(r, 1)?, owner);
    }
    let mut lost = Vec::new();
    for (key, owner) in archived {
        match live.get(&key) {
            // History holds the key: the row inserted for it goes.
            Some(new) if inserted.get(&key) == Some(&new.0) => {
                lost.push(new.0.0);
                inserted.remove(&key);
                live.insert(key, owner);
            }
            Some(_) => {}
            None => {
                live.insert(key, owner);
            }
        }
    }
    if !lost.is_empty() {
        t.execute("DELETE FROM tasks WHERE id = ANY($1)", &[&lost]).await?;
    }
    Ok(live)
}

/// Step 3: a job whose key was taken gets the task that holds it, if it is the same job.
fn repeat(j: &EnqueueJob, key: &str, owners: &HashMap<String, Owner>) -> Result<TaskId, StoreError> {
    if j.key.is_none() {
        // A fresh key that another task holds: only a UUID collision, or a caller's own key
        // shaped like ours. Not the same job either way.
        return Err(StoreError::Unavailable(format!("the fresh job key {key:?} is taken; try again")));
    }
    let Some((id, workflow, input)) = owners.get(key) else {
        // It was held when the INSERT ran, and purged from history since.
        return Err(StoreError::Unavailable(format!("job key {key:?} was taken and released concurrently; try again")));
    };
    j.repeat_of(key, *id, workflow, input)
}

/// Deletes the task rows this call inserted (none has steps or events yet), and passes `e` on.
async fn undo(t: &Tx<'_>, inserted: &HashMap<String, TaskId>, e: StoreError) -> StoreError {
    if !inserted.is_empty() {
        let ids: Vec<i64> = inserted.values().map(|id| id.0).collect();
        // If this fails the transaction is aborted and must be rolled back anyway; `e` still says why.
        let _ = t.execute("DELETE FROM tasks WHERE id = ANY($1)", &[&ids]).await;
    }
    e
}

/// The step rows of a batch, column by column, for `unnest`.
struct StepColumns {
    agent: Vec<String>,
    due_at: Vec<i64>,
    priority: Vec<i32>,
    input: Vec<String>,
    output: Vec<Option<String>>,
    idempotency_key: Vec<String>,
    timeout_ms: Vec<i64>,
    config: Vec<String>,
    retry: Vec<Option<String>>,
    kind: Vec<&'static str>,
    domain: Vec<Option<String>>,
    fallback_at: Vec<Option<i64>>,
    response_timeout_ms: Vec<Option<i64>>,
    on_timeout: Vec<&'static str>,
}

impl StepColumns {
    fn of(rows: Vec<StepRow>) -> StepColumns {
        let mut c = StepColumns {
            agent: Vec::with_capacity(rows.len()),
            due_at: Vec::with_capacity(rows.len()),
            priority: Vec::with_capacity(rows.len()),
            input: Vec::with_capacity(rows.len()),
            output: Vec::with_capacity(rows.len()),
            idempotency_key: Vec::with_capacity(rows.len()),
            timeout_ms: Vec::with_capacity(rows.len()),
            config: Vec::with_capacity(rows.len()),
            retry: Vec::with_capacity(rows.len()),
            kind: Vec::with_capacity(rows.len()),
            domain: Vec::with_capacity(rows.len()),
            fallback_at: Vec::with_capacity(rows.len()),
            response_timeout_ms: Vec::with_capacity(rows.len()),
            on_timeout: Vec::with_capacity(rows.len()),
        };
        for r in rows {
            c.agent.push(r.agent);
            c.due_at.push(r.due_at);
            c.priority.push(r.priority);
            c.input.push(r.input);
            c.output.push(r.output);
            c.idempotency_key.push(r.idempotency_key);
            c.timeout_ms.push(r.timeout_ms);
            c.config.push(r.config);
            c.retry.push(r.retry);
            c.kind.push(r.kind);
            c.domain.push(r.domain);
            c.fallback_at.push(r.fallback_at);
            c.response_timeout_ms.push(r.response_timeout_ms);
            c.on_timeout.push(r.on_timeout);
        }
        c
    }
}

/// Step 4: the `run` step and the `task.received` event of each new task (`new`: index in the
/// batch, task id), in batch order.
async fn insert_steps_and_events(
    t: &Tx<'_>,
    batch: &[EnqueueJob],
    keys: &[String],
    new: &[(usize, TaskId)],
    actor: &str,
) -> Result<(), StoreError> {
    if new.is_empty() {
        return Ok(());
    }
    let rows: Vec<StepRow> = new.iter().map(|&(i, _)| batch[i].step_row(&keys[i], t.now)).collect();
    // A job due later rings too: a sleeping scheduler's next due time may now be earlier.
    if rows.iter().any(|r| r.queues_work(StepState::Pending)) {
        t.mark_queued();
    }
    let ids: Vec<i64> = new.iter().map(|(_, id)| id.0).collect();
    let buckets: Vec<i32> = new.iter().map(|&(i, _)| i32::from(batch[i].bucket_for(&keys[i]))).collect();
    let details: Vec<String> = new
        .iter()
        .zip(&rows)
        .map(|(&(i, _), row)| {
            let j = &batch[i];
            let workflow = jobs::workflow_name(&j.handler);
            let detail = json!({
                "key": keys[i], "workflow": workflow, "version": VERSION, "handler": j.handler, "due_at": row.due_at,
            });
            detail.to_string()
        })
        .collect();
    let c = StepColumns::of(rows);
    t.execute(
        "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, output, idempotency_key,
                            timeout_ms, config, retry, created_at, updated_at, bucket, kind, compensates, domain,
                            fallback_at, response_timeout_ms, on_timeout)
         SELECT task_id, $17, agent, $18, due_at, priority, input, output, idempotency_key, timeout_ms, config,
                retry, $19, $19, bucket, kind, NULL, domain, fallback_at, response_timeout_ms, on_timeout
           FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], $5::text[], $6::text[], $7::text[],
                       $8::bigint[], $9::text[], $10::text[], $11::int[], $12::text[], $13::text[], $14::bigint[],
                       $15::bigint[], $16::text[])
                WITH ORDINALITY AS s(task_id, agent, due_at, priority, input, output, idempotency_key, timeout_ms,
                                     config, retry, bucket, kind, domain, fallback_at, response_timeout_ms,
                                     on_timeout, n)
          ORDER BY n",
        &[
            &ids,
            &c.agent,
            &c.due_at,
            &c.priority,
            &c.input,
            &c.output,
            &c.idempotency_key,
            &c.timeout_ms,
            &c.config,
            &c.retry,
            &buckets,
            &c.kind,
            &c.domain,
            &c.fallback_at,
            &c.response_timeout_ms,
            &c.on_timeout,
            &jobs::STEP,
            &StepState::Pending.as_str(),
            &t.now.0,
        ],
    )
    .await?;
    t.execute(
        "INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
         SELECT task_id, NULL, $3, $4, 'info', $5, detail
           FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS e(task_id, detail, n)
          ORDER BY n",
        &[&ids, &details, &t.now.0, &ev::TASK_RECEIVED, &actor],
    )
    .await?;
    Ok(())
}
