//! Reading records out of rows.

use crate::error::bad_column;
use rusqlite::Row;
use shiftboss_core::model::{EventLevel, EventRecord, StepRecord, TaskRecord};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use std::time::Duration;

pub const TASK_COLUMNS: &str = "id, task_key, workflow, workflow_version, state, priority, input, output, created_at, updated_at, bucket, \
     parent_task_id, deadline_at, correlation_id, domains";

/// How many columns [`TASK_COLUMNS`] names: a column a query adds after them is at this index.
pub const TASK_COLUMN_COUNT: usize = 15;

pub const STEP_COLUMNS: &str = "id, task_id, name, agent, state, locked_by, complete_by, lease_token, due_at, \
     priority, failure_count, attempts, last_error, input, output, idempotency_key, timeout_ms, config, retry, \
     created_at, updated_at, bucket, kind, compensates, progress, domain, fallback_at";

pub const EVENT_COLUMNS: &str = "id, task_id, step_id, at, kind, level, actor, detail";

pub fn json(row: &Row<'_>, idx: usize, name: &str) -> rusqlite::Result<serde_json::Value> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| bad_column(name, e))
}

pub fn opt_json(row: &Row<'_>, idx: usize, name: &str) -> rusqlite::Result<Option<serde_json::Value>> {
    let text: Option<String> = row.get(idx)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| bad_column(name, e))).transpose()
}

pub fn parsed<T: std::str::FromStr>(row: &Row<'_>, idx: usize, name: &str) -> rusqlite::Result<T>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.get(idx)?;
    text.parse().map_err(|e| bad_column(name, e))
}

pub fn task(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: TaskId(row.get(0)?),
        key: row.get(1)?,
        workflow: row.get(2)?,
        workflow_version: row.get(3)?,
        state: parsed(row, 4, "tasks.state")?,
        priority: row.get(5)?,
        input: json(row, 6, "tasks.input")?,
        output: opt_json(row, 7, "tasks.output")?,
        created_at: Timestamp(row.get(8)?),
        updated_at: Timestamp(row.get(9)?),
        bucket: row.get(10)?,
        parent_task_id: row.get::<_, Option<i64>>(11)?.map(TaskId),
        deadline_at: row.get::<_, Option<i64>>(12)?.map(Timestamp),
        correlation_id: row.get(13)?,
        domains: shiftboss_store::advance::domains_of(row.get::<_, Option<String>>(14)?.as_deref()),
        // The reads of history set it.
        archived: false,
    })
}

/// A step's own retry policy (the `retry` column), if it has one.
pub fn retry_policy(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<RetryPolicy>> {
    opt_json(row, idx, "steps.retry")?.map(serde_json::from_value).transpose().map_err(|e| bad_column("steps.retry", e))
}

pub fn step(row: &Row<'_>) -> rusqlite::Result<StepRecord> {
    let retry = retry_policy(row, 18)?;
    Ok(StepRecord {
        id: StepId(row.get(0)?),
        task_id: TaskId(row.get(1)?),
        name: row.get(2)?,
        agent: row.get(3)?,
        state: parsed(row, 4, "steps.state")?,
        locked_by: row.get(5)?,
        complete_by: row.get::<_, Option<i64>>(6)?.map(Timestamp),
        lease_token: LeaseToken(row.get(7)?),
        due_at: Timestamp(row.get(8)?),
        priority: row.get(9)?,
        failure_count: row.get(10)?,
        attempts: row.get(11)?,
        last_error: row.get(12)?,
        input: json(row, 13, "steps.input")?,
        output: opt_json(row, 14, "steps.output")?,
        idempotency_key: row.get(15)?,
        timeout: Duration::from_millis(row.get::<_, i64>(16)?.max(0) as u64),
        config: json(row, 17, "steps.config")?,
        retry,
        created_at: Timestamp(row.get(19)?),
        updated_at: Timestamp(row.get(20)?),
        bucket: row.get(21)?,
        kind: step_kind(row, 22)?,
        compensates: row.get(23)?,
        progress: opt_json(row, 24, "steps.progress")?,
        domain: row.get(25)?,
        fallback_at: row.get::<_, Option<i64>>(26)?.map(Timestamp),
    })
}

pub fn step_kind(row: &Row<'_>, idx: usize) -> rusqlite::Result<StepKind> {
    let text: String = row.get(idx)?;
    StepKind::parse(&text).ok_or_else(|| bad_column("steps.kind", format!("unknown step kind {text:?}")))
}

pub fn event(row: &Row<'_>) -> rusqlite::Result<EventRecord> {
    let level = match row.get::<_, String>(5)?.as_str() {
        "alert" => EventLevel::Alert,
        _ => EventLevel::Info,
    };
    Ok(EventRecord {
        id: row.get(0)?,
        task_id: TaskId(row.get(1)?),
        step_id: row.get::<_, Option<i64>>(2)?.map(StepId),
        at: Timestamp(row.get(3)?),
        kind: row.get(4)?,
        level,
        actor: row.get(6)?,
        detail: json(row, 7, "events.detail")?,
    })
}
