//! Reading records out of rows. Column lists here and the readers below go together.

use crate::error::{bad_column, map_err};
use shiftboss_core::model::{EventLevel, EventRecord, StepRecord, TaskRecord};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::StoreError;
use std::time::Duration;
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

pub const TASK_COLUMNS: &str = "id, task_key, workflow, workflow_version, state, priority, input, output, created_at, \
     updated_at, bucket, parent_task_id, deadline_at, correlation_id, domains";

/// How many columns [`TASK_COLUMNS`] names: a column a query adds after them is at this index.
pub const TASK_COLUMN_COUNT: usize = 15;

pub const STEP_COLUMNS: &str = "id, task_id, name, agent, state, locked_by, complete_by, lease_token, due_at, \
     priority, failure_count, attempts, last_error, input, output, idempotency_key, timeout_ms, config, retry, \
     created_at, updated_at, bucket, kind, compensates, progress, domain, fallback_at";

pub const EVENT_COLUMNS: &str = "id, task_id, step_id, at, kind, level, actor, detail";

pub fn get<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, StoreError> {
    row.try_get(idx).map_err(map_err)
}

/// An INTEGER column that holds one of our unsigned counts.
pub fn bucket(row: &Row, idx: usize) -> Result<u16, StoreError> {
    let b: i32 = get(row, idx)?;
    u16::try_from(b).map_err(|_| StoreError::Incompatible(format!("bucket {b} out of range")))
}

pub fn count(row: &Row, idx: usize, name: &str) -> Result<u32, StoreError> {
    let v: i32 = get(row, idx)?;
    u32::try_from(v).map_err(|e| bad_column(name, e))
}

pub fn json(row: &Row, idx: usize, name: &str) -> Result<serde_json::Value, StoreError> {
    let text: &str = get(row, idx)?;
    serde_json::from_str(text).map_err(|e| bad_column(name, e))
}

pub fn opt_json(row: &Row, idx: usize, name: &str) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<&str> = get(row, idx)?;
    text.map(|t| serde_json::from_str(t).map_err(|e| bad_column(name, e))).transpose()
}

pub fn parsed<T: std::str::FromStr>(row: &Row, idx: usize, name: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    let text: &str = get(row, idx)?;
    text.parse().map_err(|e| bad_column(name, e))
}

pub fn task(row: &Row) -> Result<TaskRecord, StoreError> {
    Ok(TaskRecord {
        id: TaskId(get(row, 0)?),
        key: get(row, 1)?,
        workflow: get(row, 2)?,
        workflow_version: count(row, 3, "tasks.workflow_version")?,
        state: parsed(row, 4, "tasks.state")?,
        priority: get(row, 5)?,
        input: json(row, 6, "tasks.input")?,
        output: opt_json(row, 7, "tasks.output")?,
        created_at: Timestamp(get(row, 8)?),
        updated_at: Timestamp(get(row, 9)?),
        bucket: bucket(row, 10)?,
        parent_task_id: get::<Option<i64>>(row, 11)?.map(TaskId),
        deadline_at: get::<Option<i64>>(row, 12)?.map(Timestamp),
        correlation_id: get(row, 13)?,
        domains: shiftboss_store::advance::domains_of(get::<Option<&str>>(row, 14)?),
        // The reads of history set it.
        archived: false,
    })
}

/// A step's own retry policy (the `retry` column), if it has one.
pub fn retry_policy(row: &Row, idx: usize) -> Result<Option<RetryPolicy>, StoreError> {
    opt_json(row, idx, "steps.retry")?.map(serde_json::from_value).transpose().map_err(|e| bad_column("steps.retry", e))
}

pub fn step(row: &Row) -> Result<StepRecord, StoreError> {
    Ok(StepRecord {
        id: StepId(get(row, 0)?),
        task_id: TaskId(get(row, 1)?),
        name: get(row, 2)?,
        kind: step_kind(row, 22)?,
        agent: get(row, 3)?,
        state: parsed(row, 4, "steps.state")?,
        locked_by: get(row, 5)?,
        complete_by: get::<Option<i64>>(row, 6)?.map(Timestamp),
        lease_token: LeaseToken(get(row, 7)?),
        due_at: Timestamp(get(row, 8)?),
        priority: get(row, 9)?,
        failure_count: count(row, 10, "steps.failure_count")?,
        attempts: count(row, 11, "steps.attempts")?,
        last_error: get(row, 12)?,
        input: json(row, 13, "steps.input")?,
        output: opt_json(row, 14, "steps.output")?,
        idempotency_key: get(row, 15)?,
        timeout: Duration::from_millis(get::<i64>(row, 16)?.max(0) as u64),
        config: json(row, 17, "steps.config")?,
        retry: retry_policy(row, 18)?,
        created_at: Timestamp(get(row, 19)?),
        updated_at: Timestamp(get(row, 20)?),
        bucket: bucket(row, 21)?,
        compensates: get(row, 23)?,
        progress: opt_json(row, 24, "steps.progress")?,
        domain: get(row, 25)?,
        fallback_at: get::<Option<i64>>(row, 26)?.map(Timestamp),
    })
}

pub fn step_kind(row: &Row, idx: usize) -> Result<StepKind, StoreError> {
    let text: &str = get(row, idx)?;
    StepKind::parse(text).ok_or_else(|| bad_column("steps.kind", format!("unknown step kind {text:?}")))
}

pub fn event(row: &Row) -> Result<EventRecord, StoreError> {
    let level = match get::<&str>(row, 5)? {
        "alert" => EventLevel::Alert,
        _ => EventLevel::Info,
    };
    Ok(EventRecord {
        id: get(row, 0)?,
        task_id: TaskId(get(row, 1)?),
        step_id: get::<Option<i64>>(row, 2)?.map(StepId),
        at: Timestamp(get(row, 3)?),
        kind: get(row, 4)?,
        level,
        actor: get(row, 6)?,
        detail: json(row, 7, "events.detail")?,
    })
}
