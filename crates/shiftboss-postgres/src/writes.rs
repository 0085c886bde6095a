//! The SQL of the shared write path (`shiftboss_store::advance`): [`WriteTx`] for a PostgreSQL
//! write transaction. Task locks (C7) are taken as `lock` describes; work that becomes due rings
//! the due-work channel at commit (`Tx::mark_queued`).

use crate::lock::{held, lock_child, lock_tasks};
use crate::rows::{get, json, opt_json, parsed, step_kind};
use crate::tx::{Tx, pg_int};
use serde_json::Value;
use shiftboss_core::buckets::bucket_of;
use shiftboss_core::decider::StepView;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_core::{StepId, StepState, TaskId, TaskState, Timestamp};
use shiftboss_store::StoreError;
use shiftboss_store::advance::{HELD, Keyed, NewTask, RepliedStep, TaskRow, WriteTx};
use shiftboss_store::decided::StepRow;
use shiftboss_store::lapse::LapsePlan;
use std::sync::Arc;
use tokio_postgres::Row;

/// The columns [`task_row`] reads, in its order.
pub const TASK_ROW_COLUMNS: &str = "state, workflow, workflow_version, input, task_key, priority, depth, parent_task_id IS NOT NULL, generation, \
     domains, correlation_id";

/// A [`TaskRow`] from [`TASK_ROW_COLUMNS`], starting at column `at`.
pub fn task_row(row: &Row, at: usize) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        state: parsed(row, at, "tasks.state")?,
        workflow: get(row, at + 1)?,
        version: crate::rows::count(row, at + 2, "tasks.workflow_version")?,
        input: json(row, at + 3, "tasks.input")?,
        key: get(row, at + 4)?,
        priority: get(row, at + 5)?,
        depth: i64::from(get::<i32>(row, at + 6)?),
        is_child: get(row, at + 7)?,
        generation: get(row, at + 8)?,
        domains: shiftboss_store::advance::domains_of(get::<Option<&str>>(row, at + 9)?),
        correlation_id: get(row, at + 10)?,
    })
}

/// The columns [`step_view`] reads, in its order.
pub const STEP_VIEW_COLUMNS: &str = "id, name, kind, state, input, output, last_error, updated_at, compensates";

/// A [`StepView`] from [`STEP_VIEW_COLUMNS`], starting at column `at`.
pub fn step_view(r: &Row, at: usize) -> Result<StepView, StoreError> {
    Ok(StepView {
        id: get(r, at)?,
        name: get(r, at + 1)?,
        kind: step_kind(r, at + 2)?,
        state: parsed(r, at + 3, "steps.state")?,
        input: json(r, at + 4, "steps.input")?,
        output: opt_json(r, at + 5, "steps.output")?,
        last_error: get(r, at + 6)?,
        updated_at: Timestamp(get(r, at + 7)?),
        compensates: get(r, at + 8)?,
    })
}

pub async fn latest_version(t: &Tx<'_>, name: &str) -> Result<Option<u32>, StoreError> {
    let row = t.query_one("SELECT max(version) FROM workflows WHERE name = $1", &[&name]).await?;
    Ok(get::<Option<i32>>(&row, 0)?.map(|v| v as u32))
}

fn kind_of(text: &str) -> Result<StepKind, StoreError> {
    StepKind::parse(text).ok_or_else(|| StoreError::Incompatible(format!("steps.kind: unknown kind {text:?}")))
}

/// What a running sub-workflow step's output holds: its child (as `advance::children` writes it).
fn child_ref(child: TaskId) -> String {
    serde_json::json!({"task_id": child.0}).to_string()
}

impl WriteTx for Tx<'_> {
    fn now(&self) -> Timestamp {
        self.now
    }

    async fn definition(&self, name: &str, version: u32) -> Result<Arc<WorkflowDef>, StoreError> {
        Tx::definition(self, name, version).await
    }

    async fn latest_version(&self, name: &str) -> Result<Option<u32>, StoreError> {
        latest_version(self, name).await
    }

    async fn load_task(&self, task: TaskId) -> Result<TaskRow, StoreError> {
        let row = self
            .query_opt(&format!("SELECT {TASK_ROW_COLUMNS} FROM tasks WHERE id = $1"), &[&task.0])
            .await?
            .ok_or_else(|| StoreError::NotFound { what: "task", id: task.to_string() })?;
        task_row(&row, 0)
    }

    async fn load_steps(&self, task: TaskId) -> Result<Vec<StepView>, StoreError> {
        self.flush_steps().await?;
        let rows = self
            .query(&format!("SELECT {STEP_VIEW_COLUMNS} FROM steps WHERE task_id = $1 ORDER BY id"), &[&task.0])
            .await?;
        rows.iter().map(|r| step_view(r, 0)).collect()
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
        Tx::event(self, task, step, kind, level, actor, detail).await
    }

    async fn lock_tasks(&self, tasks: &[TaskId]) -> Result<(), StoreError> {
        lock_tasks(self, tasks).await
    }

    async fn lock_child(&self, child: TaskId) -> Result<(), StoreError> {
        lock_child(self, child).await
    }

    /// ON CONFLICT DO NOTHING waits for a concurrent insert of the same key to commit; the caller
    /// then reads the row that won. The new row is not visible to anyone before the commit, so it
    /// counts as locked by this transaction.
    async fn insert_task(&self, new: &NewTask<'_>) -> Result<Option<TaskId>, StoreError> {
        let (parent, parent_step) = match new.parent {
            Some((id, step)) => (Some(id.0), Some(step)),
            None => (None, None),
        };
        let depth = i32::try_from(new.depth).map_err(|_| StoreError::InvalidInput("task depth out of range".into()))?;
        let row = self
            .query_opt(
                "INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, created_at, updated_at,
                                    bucket, parent_task_id, parent_step, depth, deadline_at, domains, correlation_id)
                 VALUES ($1, $2, $3, 'running', $4, $5, $6, $6, $7, $8, $9, $10, $11, $12, $13)
                 ON CONFLICT (task_key) DO NOTHING
                 RETURNING id",
                &[
                    &new.key,
                    &new.workflow,
                    &pg_int(new.version)?,
                    &new.priority,
                    &new.input.to_string(),
                    &self.now.0,
                    &i32::from(bucket_of(new.key)),
                    &parent,
                    &parent_step,
                    &depth,
                    &new.deadline_at,
                    &new.domains,
                    &new.correlation_id,
                ],
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        let id = TaskId(get(&row, 0)?);
        held(self, id);
        self.task_bucket(id, i32::from(bucket_of(new.key)));
        Ok(Some(id))
    }

    async fn insert_task_subscription(
        &self,
        task: TaskId,
        target: &shiftboss_store::WebhookTarget,
    ) -> Result<(), StoreError> {
        // The task row must be in the table first: ahead-written rows are flushed with the events.
        crate::webhooks::insert(self, target, Some(task), None, None).await.map(|_| ())
    }

    async fn insert_submitted(&self, new: &[NewTask<'_>]) -> Result<Vec<Keyed>, StoreError> {
        crate::submit::insert_submitted(self, new).await
    }

    async fn set_task_state(&self, task: TaskId, state: TaskState, output: Option<&Value>) -> Result<(), StoreError> {
        self.execute(
            "UPDATE tasks SET state = $2, output = coalesce($3, output), updated_at = $4 WHERE id = $1",
            &[&task.0, &state.as_str(), &output.map(Value::to_string), &self.now.0],
        )
        .await?;
        Ok(())
    }

    async fn clear_task_output(&self, task: TaskId) -> Result<(), StoreError> {
        self.execute("UPDATE tasks SET output = NULL WHERE id = $1", &[&task.0]).await?;
        Ok(())
    }

    async fn children_of(&self, parent: TaskId, step: &str) -> Result<Vec<TaskId>, StoreError> {
        let rows = self
            .query(
                "SELECT id FROM tasks WHERE parent_task_id = $1 AND parent_step = $2
                 AND state IN ('running', 'paused', 'compensating') ORDER BY id",
                &[&parent.0, &step],
            )
            .await?;
        rows.iter().map(|r| get(r, 0).map(TaskId)).collect()
    }

    async fn parent_of(&self, child: TaskId) -> Result<Option<(TaskId, String)>, StoreError> {
        let link = self.query_opt("SELECT parent_task_id, parent_step FROM tasks WHERE id = $1", &[&child.0]).await?;
        let Some(link) = link else { return Ok(None) };
        Ok(match (get::<Option<i64>>(&link, 0)?, get::<Option<String>>(&link, 1)?) {
            (Some(parent), Some(step)) => Some((TaskId(parent), step)),
            _ => None,
        })
    }

    /// A step takes its task's stored bucket (a task from before buckets keeps bucket 0 for all
    /// its steps).
    async fn insert_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        compensates: Option<&str>,
        new: &StepRow,
    ) -> Result<StepId, StoreError> {
        if new.queues_work(state) {
            self.mark_queued();
        }
        if let Some(id) = self.step_ahead(task, name, state, compensates, new) {
            return Ok(id);
        }
        self.flush_steps().await?;
        let row = self
            .query_one(
                "INSERT INTO steps (task_id, name, agent, state, due_at, priority, input, output, idempotency_key,
                                    timeout_ms, config, retry, created_at, updated_at, bucket, kind, compensates, domain,
                                    fallback_at, response_timeout_ms, on_timeout, claim_timeout_ms, deadline_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13,
                         (SELECT bucket FROM tasks WHERE id = $1), $14, $15, $16, $17, $18, $19, $20, $21)
                 RETURNING id",
                &[
                    &task.0,
                    &name,
                    &new.agent,
                    &state.as_str(),
                    &new.due_at,
                    &new.priority,
                    &new.input,
                    &new.output,
                    &new.idempotency_key,
                    &new.timeout_ms,
                    &new.config,
                    &new.retry,
                    &self.now.0,
                    &new.kind,
                    &compensates,
                    &new.domain,
                    &new.fallback_at,
                    &new.response_timeout_ms,
                    &new.on_timeout,
                    &new.claim_timeout_ms,
                    &new.deadline_at,
                ],
            )
            .await?;
        Ok(StepId(get(&row, 0)?))
    }

    async fn update_step(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        output: Option<&Value>,
        error: Option<&str>,
    ) -> Result<Option<StepId>, StoreError> {
        self.flush_steps().await?;
        let row = self
            .query_opt(
                "UPDATE steps SET state = $3, output = $4, last_error = $5, updated_at = $6
                 WHERE task_id = $1 AND name = $2 RETURNING id",
                &[&task.0, &name, &state.as_str(), &output.map(Value::to_string), &error, &self.now.0],
            )
            .await?;
        row.map(|r| get(&r, 0).map(StepId)).transpose()
    }

    /// A claim of this step that is committing is waited for, and the step cancelled all the same.
    async fn cancel_live_step(&self, task: TaskId, name: &str) -> Result<Option<(StepId, StepKind)>, StoreError> {
        self.flush_steps().await?;
        let row = self
            .query_opt(
                "UPDATE steps SET state = 'cancelled', locked_by = NULL, complete_by = NULL, updated_at = $3
                 WHERE task_id = $1 AND name = $2 AND state IN ('pending', 'processing') RETURNING id, kind",
                &[&task.0, &name, &self.now.0],
            )
            .await?;
        row.map(|r| Ok((StepId(get(&r, 0)?), kind_of(get(&r, 1)?)?))).transpose()
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
        self.flush_steps().await?;
        let row = self
            .query_opt(
                "UPDATE steps SET state = $3, output = $4, last_error = $5, updated_at = $6
                 WHERE task_id = $1 AND name = $2 AND (state = 'processing') IS TRUE AND kind = 'sub_workflow' AND output = $7
                 RETURNING id",
                &[&parent.0, &step, &state.as_str(), &output.to_string(), &error, &self.now.0, &child_ref(child)],
            )
            .await?;
        row.map(|r| get(&r, 0).map(StepId)).transpose()
    }

    async fn find_step(&self, step: StepId) -> Result<Option<(TaskId, String)>, StoreError> {
        self.flush_steps().await?;
        let row = self.query_opt("SELECT task_id, name FROM steps WHERE id = $1", &[&step.0]).await?;
        row.map(|r| Ok((TaskId(get(&r, 0)?), get(&r, 1)?))).transpose()
    }

    async fn replied_step(&self, step: StepId) -> Result<Option<RepliedStep>, StoreError> {
        self.flush_steps().await?;
        let row = self
            .query_opt(
                "SELECT task_id, state, lease_token, kind, output, last_error FROM steps WHERE id = $1",
                &[&step.0],
            )
            .await?;
        row.map(|r| {
            Ok(RepliedStep {
                task_id: TaskId(get(&r, 0)?),
                state: parsed(&r, 1, "steps.state")?,
                lease_token: get(&r, 2)?,
                kind: step_kind(&r, 3)?,
                output: opt_json(&r, 4, "steps.output")?,
                last_error: get(&r, 5)?,
            })
        })
        .transpose()
    }

    async fn step_id(&self, task: TaskId, name: &str) -> Result<Option<StepId>, StoreError> {
        self.flush_steps().await?;
        let row = self.query_opt("SELECT id FROM steps WHERE task_id = $1 AND name = $2", &[&task.0, &name]).await?;
        row.map(|r| get(&r, 0).map(StepId)).transpose()
    }

    async fn hold_pending_steps(&self, task: TaskId) -> Result<(), StoreError> {
        self.flush_steps().await?;
        self.execute(
            "UPDATE steps SET due_at = $2, updated_at = $3 WHERE task_id = $1 AND (state = 'pending') IS TRUE",
            &[&task.0, &HELD, &self.now.0],
        )
        .await?;
        Ok(())
    }

    async fn release_held_steps(&self, task: TaskId) -> Result<(), StoreError> {
        self.flush_steps().await?;
        let released = self
            .execute(
                "UPDATE steps SET due_at = $3, updated_at = $3 WHERE task_id = $1 AND (state = 'pending') IS TRUE AND due_at = $2",
                &[&task.0, &HELD, &self.now.0],
            )
            .await?;
        if released > 0 {
            self.mark_queued();
        }
        Ok(())
    }

    async fn reset_step(&self, task: TaskId, name: &str, due_at: i64) -> Result<(), StoreError> {
        self.flush_steps().await?;
        self.execute(
            "UPDATE steps SET state = 'pending', failure_count = 0, due_at = $3, locked_by = NULL,
                    complete_by = NULL, last_error = NULL, updated_at = $4,
                    -- tried again from the start: its total timeout counts from now
                    deadline_at = $4 + (deadline_at - created_at)
             WHERE task_id = $1 AND name = $2",
            &[&task.0, &name, &due_at, &self.now.0],
        )
        .await?;
        if due_at < HELD {
            self.mark_queued();
        }
        Ok(())
    }

    async fn delete_step(&self, task: TaskId, name: &str) -> Result<Option<StepKind>, StoreError> {
        self.flush_steps().await?;
        let row = self
            .query_opt("DELETE FROM steps WHERE task_id = $1 AND name = $2 RETURNING kind", &[&task.0, &name])
            .await?;
        row.map(|r| kind_of(get(&r, 0)?)).transpose()
    }

    async fn bump_generation(&self, task: TaskId) -> Result<(), StoreError> {
        self.execute("UPDATE tasks SET generation = generation + 1 WHERE id = $1", &[&task.0]).await?;
        Ok(())
    }

    async fn finish_step(&self, task: TaskId, name: &str, output: &Value) -> Result<(), StoreError> {
        self.flush_steps().await?;
        self.execute(
            "UPDATE steps SET state = 'processed', output = $3, locked_by = NULL, complete_by = NULL, updated_at = $4
             WHERE task_id = $1 AND name = $2",
            &[&task.0, &name, &output.to_string(), &self.now.0],
        )
        .await?;
        Ok(())
    }

    async fn write_lapse(&self, step: StepId, lease_token: i64, plan: &LapsePlan) -> Result<bool, StoreError> {
        self.flush_steps().await?;
        let changed = self
            .execute(
                // A paused task's steps wait, as its other pending steps do, until it resumes.
                "UPDATE steps SET state = $3, failure_count = $4, last_error = $6,
                        due_at = CASE WHEN (SELECT state FROM tasks WHERE id = steps.task_id) = 'paused'
                                      THEN $8::bigint ELSE $5::bigint END,
                        locked_by = NULL, complete_by = NULL, updated_at = $7
                 WHERE id = $1 AND lease_token = $2 AND (state = $9) IS TRUE",
                &[
                    &step.0,
                    &lease_token,
                    &plan.next.as_str(),
                    &pg_int(plan.failure_count)?,
                    &plan.due_at.0,
                    &plan.why,
                    &self.now.0,
                    &HELD,
                    &plan.from.as_str(),
                ],
            )
            .await?;
        if changed == 1 && plan.next == StepState::Pending {
            // Back in the queue, now or after its retry delay: sleeping schedulers must learn of it
            // (a sweep's re-queue would otherwise wait for their next poll).
            self.mark_queued();
        }
        Ok(changed == 1)
    }

    async fn mark_overdue(&self, step: StepId, lease_token: i64) -> Result<bool, StoreError> {
        self.flush_steps().await?;
        let changed = self
            .execute(
                "UPDATE steps SET complete_by = $3, updated_at = $4
                 WHERE id = $1 AND lease_token = $2 AND (state = 'processing') IS TRUE",
                &[&step.0, &lease_token, &HELD, &self.now.0],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn mark_unclaimed(&self, step: StepId, lease_token: i64) -> Result<bool, StoreError> {
        self.flush_steps().await?;
        let changed = self
            .execute(
                "UPDATE steps SET claim_timeout_ms = NULL, updated_at = $3
                 WHERE id = $1 AND lease_token = $2 AND (state = 'pending') IS TRUE",
                &[&step.0, &lease_token, &self.now.0],
            )
            .await?;
        Ok(changed == 1)
    }
}
