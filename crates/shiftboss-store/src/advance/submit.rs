//! Submitting tasks (P12): each task's row, its `task.received` event and its first decide, in the
//! caller's transaction; one task, or a batch of them in one transaction. Idempotent by key: the
//! same key with the same workflow and input gives back the existing task, live or archived; with
//! another, a `Conflict`, and nothing of the call is kept (the caller rolls back).

use super::decide::advance_new_task;
use super::tx::{Keyed, NewTask, TaskRow, WriteTx};
use crate::event_kind as ev;
use crate::{StoreError, SubmitTask, Submitted, validate_batch};
use serde_json::json;
use shiftboss_core::TaskState;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use std::collections::HashMap;
use std::sync::Arc;

/// Submits one task.
pub async fn submit_task<T: WriteTx>(t: &T, p: &SubmitTask) -> Result<Submitted, StoreError> {
    p.validate()?;
    let out = submit_all(t, std::slice::from_ref(p), false).await?;
    out.into_iter().next().ok_or_else(|| StoreError::Backend("a submission returned no task".into()))
}

/// Submits a batch in the caller's transaction; one `Submitted` per task, in order. A key given
/// twice is one task (the second gets it back with `created: false`, or a `Conflict` when its
/// workflow or input differ). Errors about one task's own content name its index.
pub async fn submit_tasks<T: WriteTx>(t: &T, batch: &[SubmitTask]) -> Result<Vec<Submitted>, StoreError> {
    validate_batch(batch)?;
    submit_all(t, batch, true).await
}

/// What the definition lookups found for one task.
struct Resolved {
    version: u32,
    def: Arc<WorkflowDef>,
}

async fn submit_all<T: WriteTx>(t: &T, batch: &[SubmitTask], in_batch: bool) -> Result<Vec<Submitted>, StoreError> {
    let at = |i: usize, e: StoreError| match e {
        StoreError::InvalidInput(m) if in_batch => StoreError::InvalidInput(format!("task {i}: {m}")),
        other => other,
    };
    // Every definition is loaded (and checked) before anything is written; the newest version of
    // a workflow is looked up once per call.
    let mut latest: HashMap<&str, u32> = HashMap::new();
    let mut resolved = Vec::with_capacity(batch.len());
    for (i, p) in batch.iter().enumerate() {
        let r = resolve(t, p, &mut latest).await.map_err(|e| at(i, e))?;
        resolved.push(r);
    }
    // A key given twice in the batch is one task, its first submission's.
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut rows = Vec::new();
    let mut firsts = Vec::new();
    for (i, p) in batch.iter().enumerate() {
        if let Some(&j) = first.get(p.key.as_str()) {
            if batch[j].workflow != p.workflow || batch[j].input != p.input {
                return Err(StoreError::Conflict(format!(
                    "task key {:?} is given twice in the batch (tasks {j} and {i}) with another workflow or input",
                    p.key
                )));
            }
            continue;
        }
        first.insert(&p.key, i);
        firsts.push(i);
        let r = &resolved[i];
        rows.push(NewTask {
            key: &p.key,
            workflow: &p.workflow,
            version: r.version,
            priority: p.priority,
            input: &p.input,
            parent: None,
            depth: 0,
            deadline_at: r.def.timeout.map(|d| t.now().plus(d).0),
            domains: super::tx::domains_text(&p.domains),
            correlation_id: p.correlation_id.clone(),
        });
    }
    let keyed = t.insert_submitted(&rows).await?;
    if keyed.len() != rows.len() {
        return Err(StoreError::Backend(format!("{} task rows written for {} submissions", keyed.len(), rows.len())));
    }
    let mut got: HashMap<&str, Submitted> = HashMap::with_capacity(rows.len());
    for (&i, k) in firsts.iter().zip(keyed) {
        let p = &batch[i];
        let s = match k {
            Keyed::Taken((id, workflow, input)) => p.resubmission(id, &workflow, &input)?,
            Keyed::New(task_id) => {
                start(t, p, task_id, resolved[i].version).await?;
                Submitted { task_id, created: true }
            }
        };
        got.insert(&p.key, s);
    }
    batch
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let s = got.get(p.key.as_str()).ok_or_else(|| StoreError::Backend(format!("task {i} was not written")))?;
            // The first submission of a key is the one that created its task.
            let created = s.created && first.get(p.key.as_str()) == Some(&i);
            Ok(Submitted { task_id: s.task_id, created })
        })
        .collect()
}

/// The version a task runs (the newest when it names none) and its definition.
async fn resolve<'a, T: WriteTx>(
    t: &T,
    p: &'a SubmitTask,
    latest: &mut HashMap<&'a str, u32>,
) -> Result<Resolved, StoreError> {
    let version = match (p.version, latest.get(p.workflow.as_str())) {
        (Some(v), _) | (None, Some(&v)) => v,
        (None, None) => {
            let v = t
                .latest_version(&p.workflow)
                .await?
                .ok_or_else(|| StoreError::InvalidInput(format!("unknown workflow {:?}", p.workflow)))?;
            latest.insert(&p.workflow, v);
            v
        }
    };
    let def = t.definition(&p.workflow, version).await.map_err(|e| match e {
        StoreError::NotFound { .. } => {
            StoreError::InvalidInput(format!("unknown workflow {:?} version {version}", p.workflow))
        }
        other => other,
    })?;
    Ok(Resolved { version, def })
}

/// A new task's `task.received` event and its first decide.
async fn start<T: WriteTx>(
    t: &T,
    p: &SubmitTask,
    task_id: shiftboss_core::TaskId,
    version: u32,
) -> Result<(), StoreError> {
    if let Some(target) = &p.notify {
        t.insert_task_subscription(task_id, target).await?;
    }
    let detail = json!({"key": p.key, "workflow": p.workflow, "version": version});
    t.event(task_id, None, ev::TASK_RECEIVED, EventLevel::Info, &p.actor, detail).await?;
    let row = TaskRow {
        state: TaskState::Running,
        workflow: p.workflow.clone(),
        version,
        input: p.input.clone(),
        key: p.key.clone(),
        priority: p.priority,
        depth: 0,
        is_child: false,
        generation: 0,
        domains: p.domains.clone(),
        correlation_id: p.correlation_id.clone(),
    };
    advance_new_task(t, task_id, row, &p.actor).await?;
    Ok(())
}
