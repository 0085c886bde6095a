//! The SQL of the shared write path (`shiftboss_store::advance`): [`WriteTx`] for a SQLite write
//! transaction. Each method runs its statement at once, on the writer's thread, and returns a
//! completed future; `run_now` drives an operation of the shared path to its end.

use crate::error::map_err;
use crate::rows::{json, opt_json, parsed, step_kind};
use crate::tx::Tx;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::decider::StepView;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState, Timestamp};
use shiftboss_store::StoreError;
use shiftboss_store::advance::{HELD, KeyOwner, Keyed, NewTask, RepliedStep, TaskRow, WriteTx};
use shiftboss_store::decided::StepRow;
use shiftboss_store::lapse::LapsePlan;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// Runs an operation of the shared write path on this thread. Every [`WriteTx`] method of a SQLite
/// transaction completes before it returns, so the operation completes in one poll; a future that
/// is still pending after it is a bug, reported as an error rather than a hang.
pub fn run_now<T>(op: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    let mut op = pin!(op);
    match op.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::Backend("a SQLite write waited on something; nothing may".into())),
    }
}

pub fn load_task(t: &Tx<'_>, task_id: TaskId) -> Result<TaskRow, StoreError> {
    t.tx.prepare_cached(
        "SELECT state, workflow, workflow_version, input, task_key, priority, depth, parent_task_id IS NOT NULL,
                generation, domains, correlation_id
         FROM tasks WHERE id = ?1",
    )
    .and_then(|mut st| {
        st.query_row([task_id.0], |r| {
            Ok(TaskRow {
                state: parsed(r, 0, "tasks.state")?,
                workflow: r.get(1)?,
                version: r.get(2)?,
                input: json(r, 3, "tasks.input")?,
                key: r.get(4)?,
                priority: r.get(5)?,
                depth: r.get(6)?,
                is_child: r.get(7)?,
                generation: r.get(8)?,
                domains: shiftboss_store::advance::domains_of(r.get::<_, Option<String>>(9)?.as_deref()),
                correlation_id: r.get(10)?,
            })
        })
        .optional()
    })
    .map_err(map_err)?
    .ok_or_else(|| StoreError::NotFound { what: "task", id: task_id.to_string() })
}

/// A task's steps, as the decider sees them; in no particular order.
pub(crate) const STEP_VIEWS: &str = "SELECT id, name, kind, state, input, output, last_error, updated_at, compensates
     FROM steps WHERE task_id = ?1";

pub fn load_views(t: &Tx<'_>, task_id: TaskId) -> Result<Vec<StepView>, StoreError> {
    // Read in the order of the (task_id, name) index and sorted by id here: `ORDER BY id` made
    // SQLite build and drop a sorter on every run, which was most of this read's cost.
    let mut st = t.tx.prepare_cached(STEP_VIEWS).map_err(map_err)?;
    let rows = st
        .query_map([task_id.0], |r| {
            Ok(StepView {
                id: r.get(0)?,
                name: r.get(1)?,
                kind: step_kind(r, 2)?,
                state: parsed::<StepState>(r, 3, "steps.state")?,
                input: json(r, 4, "steps.input")?,
                output: opt_json(r, 5, "steps.output")?,
                last_error: r.get(6)?,
                updated_at: Timestamp(r.get(7)?),
                compensates: r.get(8)?,
            })
        })
        .map_err(map_err)?;
    let mut views: Vec<StepView> = rows.collect::<Result<_, _>>().map_err(map_err)?;
    views.sort_unstable_by_key(|v| v.id);
    Ok(views)
}

/// Writes a step row; its bucket is its task's.
pub fn insert_row(
    t: &Tx<'_>,
    task_id: TaskId,
    name: &str,
    state: StepState,
    compensates: Option<&str>,
    row: &StepRow,
) -> Result<StepId, StoreError> {
    t.tx.prepare_cached(
        "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, output, idempotency_key, timeout_ms,
                            config, retry, created_at, updated_at, bucket, kind, compensates, domain, fallback_at,
                            response_timeout_ms, on_timeout, claim_timeout_ms, deadline_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, (SELECT bucket FROM tasks WHERE id = ?1),
                 ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
    )
    .and_then(|mut st| {
        st.execute(params![
            task_id.0,
            name,
            row.agent,
            state.as_str(),
            row.due_at,
            row.priority,
            row.input,
            row.output,
            row.idempotency_key,
            row.timeout_ms,
            row.config,
            row.retry,
            t.now.0,
            row.kind,
            compensates,
            row.domain,
            row.fallback_at,
            row.response_timeout_ms,
            row.on_timeout,
            row.claim_timeout_ms,
            row.deadline_at,
        ])
    })
    .map_err(map_err)?;
    Ok(StepId(t.tx.last_insert_rowid()))
}

/// Moves a step; returns its id.
pub fn update_step(
    t: &Tx<'_>,
    task_id: TaskId,
    name: &str,
    state: StepState,
    output: Option<&Value>,
    error: Option<&str>,
) -> Result<Option<StepId>, StoreError> {
    t.tx.prepare_cached(
        "UPDATE steps SET state = ?3, output = ?4, last_error = ?5, updated_at = ?6
         WHERE task_id = ?1 AND name = ?2 RETURNING id",
    )
    .and_then(|mut st| {
        st.query_row(params![task_id.0, name, state.as_str(), output.map(Value::to_string), error, t.now.0], |r| {
            r.get(0)
        })
        .optional()
    })
    .map(|id| id.map(StepId))
    .map_err(map_err)
}

pub fn latest_version(t: &Tx<'_>, name: &str) -> Result<Option<u32>, StoreError> {
    t.tx.query_row("SELECT max(version) FROM workflows WHERE name = ?1", [name], |r| r.get(0)).map_err(map_err)
}

/// The task a key names, live or archived: its id, workflow and input as stored.
pub fn key_owner(t: &Tx<'_>, key: &str) -> Result<Option<KeyOwner>, StoreError> {
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

fn kind_of(text: &str) -> Result<StepKind, StoreError> {
    StepKind::parse(text).ok_or_else(|| StoreError::Incompatible(format!("steps.kind: unknown kind {text:?}")))
}

impl WriteTx for Tx<'_> {
    fn now(&self) -> Timestamp {
        self.now
    }

    async fn definition(&self, name: &str, version: u32) -> Result<Arc<WorkflowDef>, StoreError> {
        Tx::definition(self, name, version)
    }

    async fn latest_version(&self, name: &str) -> Result<Option<u32>, StoreError> {
        latest_version(self, name)
    }

    async fn load_task(&self, task: TaskId) -> Result<TaskRow, StoreError> {
        load_task(self, task)
    }

    async fn load_steps(&self, task: TaskId) -> Result<Vec<StepView>, StoreError> {
        load_views(self, task)
    }

    async fn event(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &'static str,
        level: EventLevel,
        actor: &str,
        detail: Value,
    ) -> Result<(), StoreError> {
        Tx::event(self, task, step, kind, level, actor, detail)
    }

    /// One writer at a time: the transaction holds the whole file.
    async fn lock_tasks(&self, _tasks: &[TaskId]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn lock_child(&self, _child: TaskId) -> Result<(), StoreError> {
        Ok(())
    }

    async fn insert_task(&self, new: &NewTask<'_>) -> Result<Option<TaskId>, StoreError> {
        let (parent, parent_step) = match new.parent {
            Some((id, step)) => (Some(id.0), Some(step)),
            None => (None, None),
        };
        let inserted = self
            .tx
            .prepare_cached(
                "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                                    bucket, parent_task_id, parent_step, depth, deadline_at, domains, correlation_id)
                 VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (task_key) DO NOTHING",
            )
            .and_then(|mut st| {
                st.execute(params![
                    new.key,
                    new.workflow,
                    new.version,
                    new.priority,
                    new.input.to_string(),
                    self.now.0,
                    bucket_of(new.key),
                    parent,
                    parent_step,
                    new.depth,
                    new.deadline_at,
                    new.domains,
                    new.correlation_id,
                ])
            })
            .map_err(map_err)?;
        Ok((inserted == 1).then(|| TaskId(self.tx.last_insert_rowid())))
    }

    async fn insert_task_subscription(
        &self,
        task: TaskId,
        target: &shiftboss_store::WebhookTarget,
    ) -> Result<(), StoreError> {
        crate::webhooks::insert(self, target, Some(task), None, None).map(|_| ())
    }

    /// One writer at a time: a key looked up here stays as it is until the insert.
    async fn insert_submitted(&self, new: &[NewTask<'_>]) -> Result<Vec<Keyed>, StoreError> {
        let mut out = Vec::with_capacity(new.len());
        for n in new {
            if let Some(owner) = key_owner(self, n.key)? {
                out.push(Keyed::Taken(owner));
                continue;
            }
            let id = self
                .insert_task(n)
                .await?
                .ok_or_else(|| StoreError::Backend(format!("task key {:?} was taken though no task held it", n.key)))?;
            out.push(Keyed::New(id));
        }
        Ok(out)
    }

    async fn set_task_state(&self, task: TaskId, state: TaskState, output: Option<&Value>) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("UPDATE tasks SET state = ?2, output = coalesce(?3, output), updated_at = ?4 WHERE id = ?1")
            .and_then(|mut st| st.execute(params![task.0, state.as_str(), output.map(Value::to_string), self.now.0]))
            .map_err(map_err)?;
        Ok(())
    }

    async fn clear_task_output(&self, task: TaskId) -> Result<(), StoreError> {
        self.tx.execute("UPDATE tasks SET output = NULL WHERE id = ?1", [task.0]).map_err(map_err)?;
        Ok(())
    }

    async fn children_of(&self, parent: TaskId, step: &str) -> Result<Vec<TaskId>, StoreError> {
        let mut st = self
            .tx
            .prepare_cached(
                "SELECT id FROM tasks WHERE parent_task_id = ?1 AND parent_step = ?2
                 AND state IN ('running', 'paused', 'compensating') ORDER BY id",
            )
            .map_err(map_err)?;
        let ids = st.query_map(params![parent.0, step], |r| r.get(0).map(TaskId)).map_err(map_err)?;
        ids.collect::<Result<_, _>>().map_err(map_err)
    }

    async fn parent_of(&self, child: TaskId) -> Result<Option<(TaskId, String)>, StoreError> {
        let link: Option<(Option<i64>, Option<String>)> = self
            .tx
            .prepare_cached("SELECT parent_task_id, parent_step FROM tasks WHERE id = ?1")
            .and_then(|mut st| st.query_row([child.0], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(map_err)?;
        Ok(match link {
            Some((Some(parent), Some(step))) => Some((TaskId(parent), step)),
            _ => None,
        })
    }

    async fn insert_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        compensates: Option<&str>,
        row: &StepRow,
    ) -> Result<StepId, StoreError> {
        // No channel to ring: other processes' watchers see the commit in the WAL (`wake.rs`).
        insert_row(self, task, name, state, compensates, row)
    }

    async fn update_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        output: Option<&Value>,
        error: Option<&str>,
    ) -> Result<Option<StepId>, StoreError> {
        update_step(self, task, name, state, output, error)
    }

    async fn cancel_live_step(&self, task: TaskId, name: &str) -> Result<Option<(StepId, StepKind)>, StoreError> {
        let row: Option<(i64, String)> = self
            .tx
            .prepare_cached(
                "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = ?3
                 WHERE task_id = ?1 AND name = ?2 AND state IN ('pending', 'processing') RETURNING id, kind",
            )
            .and_then(|mut st| {
                st.query_row(params![task.0, name, self.now.0], |r| Ok((r.get(0)?, r.get(1)?))).optional()
            })
            .map_err(map_err)?;
        row.map(|(id, kind)| Ok((StepId(id), kind_of(&kind)?))).transpose()
    }

    async fn end_child_step(
        &self,
        parent: TaskId,
        step: &str,
        child: TaskId,
        state: StepState,
        output: &Value,
        error: Option<&str>,
    ) -> Result<Option<StepId>, StoreError> {
        self.tx
            .query_row(
                "UPDATE steps SET state = ?3, output = ?4, last_error = ?5, updated_at = ?6
                 WHERE task_id = ?1 AND name = ?2 AND state = 'processing' AND kind = 'sub_workflow'
                   AND json_extract(output, '$.task_id') = ?7 RETURNING id",
                params![parent.0, step, state.as_str(), output.to_string(), error, self.now.0, child.0],
                |r| r.get(0).map(StepId),
            )
            .optional()
            .map_err(map_err)
    }

    async fn find_step(&self, step: StepId) -> Result<Option<(TaskId, String)>, StoreError> {
        self.tx
            .query_row("SELECT task_id, name FROM steps WHERE id = ?1", [step.0], |r| {
                Ok((TaskId(r.get(0)?), r.get(1)?))
            })
            .optional()
            .map_err(map_err)
    }

    async fn replied_step(&self, step: StepId) -> Result<Option<RepliedStep>, StoreError> {
        self.tx
            .prepare_cached("SELECT task_id, state, lease_token, kind, output, last_error FROM steps WHERE id = ?1")
            .and_then(|mut st| {
                st.query_row([step.0], |r| {
                    Ok(RepliedStep {
                        task_id: TaskId(r.get(0)?),
                        state: parsed(r, 1, "steps.state")?,
                        lease_token: r.get(2)?,
                        kind: step_kind(r, 3)?,
                        output: opt_json(r, 4, "steps.output")?,
                        last_error: r.get(5)?,
                    })
                })
                .optional()
            })
            .map_err(map_err)
    }

    async fn step_id(&self, task: TaskId, name: &str) -> Result<Option<StepId>, StoreError> {
        self.tx
            .query_row("SELECT id FROM steps WHERE task_id = ?1 AND name = ?2", params![task.0, name], |r| r.get(0))
            .optional()
            .map(|id| id.map(StepId))
            .map_err(map_err)
    }

    async fn hold_pending_steps(&self, task: TaskId) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE steps SET due_at = ?2, updated_at = ?3 WHERE task_id = ?1 AND state = 'pending'",
                params![task.0, HELD, self.now.0],
            )
            .map_err(map_err)?;
        Ok(())
    }

    async fn release_held_steps(&self, task: TaskId) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE steps SET due_at = ?3, updated_at = ?3 WHERE task_id = ?1 AND state = 'pending' AND due_at = ?2",
                params![task.0, HELD, self.now.0],
            )
            .map_err(map_err)?;
        Ok(())
    }

    async fn reset_step(&self, task: TaskId, name: &str, due_at: i64) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE steps SET state = 'pending', failure_count = 0, due_at = ?3, locked_by = NULL,
                        complete_by = NULL, last_error = NULL, updated_at = ?4,
                        -- tried again from the start: its total timeout counts from now
                        deadline_at = ?4 + (deadline_at - created_at)
                 WHERE task_id = ?1 AND name = ?2",
                params![task.0, name, due_at, self.now.0],
            )
            .map_err(map_err)?;
        Ok(())
    }

    async fn delete_step(&self, task: TaskId, name: &str) -> Result<Option<StepKind>, StoreError> {
        let kind: Option<String> = self
            .tx
            .query_row(
                "DELETE FROM steps WHERE task_id = ?1 AND name = ?2 RETURNING kind",
                params![task.0, name],
                |r| r.get(0),
            )
            .optional()
            .map_err(map_err)?;
        kind.map(|k| kind_of(&k)).transpose()
    }

    async fn bump_generation(&self, task: TaskId) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("UPDATE tasks SET generation = generation + 1 WHERE id = ?1")
            .and_then(|mut st| st.execute([task.0]))
            .map_err(map_err)?;
        Ok(())
    }

    async fn finish_step(&self, task: TaskId, name: &str, output: &Value) -> Result<(), StoreError> {
        self.tx
            .execute(
                "UPDATE steps SET state = 'processed', output = ?3, locked_by = NULL, complete_by = NULL, updated_at = ?4
                 WHERE task_id = ?1 AND name = ?2",
                params![task.0, name, output.to_string(), self.now.0],
            )
            .map_err(map_err)?;
        Ok(())
    }

    async fn write_lapse(&self, step: StepId, lease_token: i64, plan: &LapsePlan) -> Result<bool, StoreError> {
        let changed = self
            .tx
            .prepare_cached(
                "UPDATE steps SET state = ?3, failure_count = ?4, last_error = ?6,
                        locked_by = NULL, complete_by = NULL, updated_at = ?7,
                        -- A paused task's step waits for the resume, like its other pending steps.
                        due_at = CASE WHEN (SELECT state FROM tasks WHERE id = steps.task_id) = 'paused'
                                      THEN ?8 ELSE ?5 END
                 WHERE id = ?1 AND lease_token = ?2 AND state = ?9",
            )
            .and_then(|mut st| {
                st.execute(params![
                    step.0,
                    lease_token,
                    plan.next.as_str(),
                    plan.failure_count,
                    plan.due_at.0,
                    plan.why,
                    self.now.0,
                    HELD,
                    plan.from.as_str(),
                ])
            })
            .map_err(map_err)?;
        Ok(changed == 1)
    }

    async fn mark_overdue(&self, step: StepId, lease_token: i64) -> Result<bool, StoreError> {
        let changed = self
            .tx
            .execute(
                "UPDATE steps SET complete_by = ?3, updated_at = ?4
                 WHERE id = ?1 AND lease_token = ?2 AND state = 'processing'",
                params![step.0, lease_token, HELD, self.now.0],
            )
            .map_err(map_err)?;
        Ok(changed == 1)
    }

    async fn mark_unclaimed(&self, step: StepId, lease_token: i64) -> Result<bool, StoreError> {
        let changed = self
            .tx
            .execute(
                "UPDATE steps SET claim_timeout_ms = NULL, updated_at = ?3
                 WHERE id = ?1 AND lease_token = ?2 AND state = 'pending'",
                params![step.0, lease_token, self.now.0],
            )
            .map_err(map_err)?;
        Ok(changed == 1)
    }
}
