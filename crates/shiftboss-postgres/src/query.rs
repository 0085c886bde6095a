//! Reads for operators and tools.
//!
//! A read of several statements (get_task, summarize) runs in one REPEATABLE READ READ ONLY
//! transaction, opened by the caller, so that all its statements see one snapshot; its statements
//! are sent together (tokio-postgres pipelines concurrent queries on one connection), so a snapshot
//! costs one round trip more than a single statement, not one per statement.

use crate::rows::{EVENT_COLUMNS, STEP_COLUMNS, TASK_COLUMN_COUNT, TASK_COLUMNS, get, parsed};
use crate::tx::{Conn, DefCache, pg_int};
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepState, TaskId, TaskState};
use shiftboss_store::{
    ListTasks, StoreError, Summary, TaskDetail, TaskEvents, TaskFilter, WorkflowSummary, event_kind as ev,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// Runs statements together (pipelined on the connection: one round trip) and binds each result
/// to its name, or returns the error that caused the others (see [`crate::error::first_cause`]).
macro_rules! together {
    ($($name:ident = $statement:expr),+ $(,)?) => {
        let ($($name,)+) = tokio::join!($($statement),+);
        let ($($name,)+) = match ($($name,)+) {
            ($(Ok($name),)+) => ($($name,)+),
            ($($name,)+) => return Err(crate::error::first_cause([$($name.err()),+])),
        };
    };
}

/// Which tables a read looks at: the hot ones, or history (same columns, `_history` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Hot,
    History,
}

impl Place {
    fn suffix(self) -> &'static str {
        match self {
            Place::Hot => "",
            Place::History => "_history",
        }
    }
}

/// In one snapshot.
/// A task with its steps and its first `events` events (all of them when none).
pub async fn get_task(
    c: Conn<'_>,
    id: TaskId,
    place: Place,
    events: Option<u32>,
) -> Result<Option<TaskDetail>, StoreError> {
    let h = place.suffix();
    let task = format!("SELECT {TASK_COLUMNS} FROM tasks{h} WHERE id = $1");
    let steps = format!("SELECT {STEP_COLUMNS} FROM steps{h} WHERE task_id = $1 ORDER BY id");
    // LIMIT NULL is no limit.
    let events_sql = format!("SELECT {EVENT_COLUMNS} FROM events{h} WHERE task_id = $1 ORDER BY id LIMIT $2");
    let limit = events.map(i64::from);
    let by_id: [&(dyn ToSql + Sync); 1] = [&id.0];
    let limited: [&(dyn ToSql + Sync); 2] = [&id.0, &limit];
    together!(
        task = c.query_opt(&task, &by_id),
        steps = c.query(&steps, &by_id),
        events = c.query(&events_sql, &limited)
    );
    let Some(task) = task else { return Ok(None) };
    Ok(Some(TaskDetail {
        task: TaskRecord { archived: place == Place::History, ..crate::rows::task(&task)? },
        steps: steps.iter().map(crate::rows::step).collect::<Result<_, _>>()?,
        events: events.iter().map(crate::rows::event).collect::<Result<_, _>>()?,
    }))
}

pub async fn find_task_by_key(c: Conn<'_>, key: &str, place: Place) -> Result<Option<TaskRecord>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks{} WHERE task_key = $1", place.suffix());
    let row = c.query_opt(&sql, &[&key]).await?;
    let task = row.as_ref().map(crate::rows::task).transpose()?;
    Ok(task.map(|t| TaskRecord { archived: place == Place::History, ..t }))
}

/// A task filter as a WHERE clause over numbered parameters, and their values. Only the filters
/// given go into the statement, so each shape gets a plan that uses its index (a generic plan of
/// "$1 IS NULL OR state = $1" cannot).
#[derive(Default)]
pub struct Where {
    conditions: Vec<String>,
    pub values: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Where {
    pub fn of(f: &TaskFilter, before: Option<TaskId>) -> Where {
        let mut w = Where::default();
        if let Some(s) = f.state {
            w.add("state = ?", Box::new(s.as_str()));
        }
        if let Some(wf) = &f.workflow {
            w.add("workflow = ?", Box::new(wf.clone()));
        }
        // Byte order whatever the database's collation, so that the range holds exactly the keys
        // that start with the prefix (history has an index in this collation; see migration 9).
        if let Some(c) = &f.correlation_id {
            w.add("correlation_id = ?", Box::new(c.clone()));
        }
        if let Some((lo, hi)) = f.key_range() {
            w.add("task_key COLLATE \"C\" >= ?", Box::new(lo.to_owned()));
            if let Some(hi) = hi {
                w.add("task_key COLLATE \"C\" < ?", Box::new(hi));
            }
        }
        for (column, op, t) in [
            ("created_at", ">=", f.created_from),
            ("created_at", "<", f.created_to),
            ("updated_at", ">=", f.updated_from),
            ("updated_at", "<", f.updated_to),
        ] {
            if let Some(t) = t {
                w.add(&format!("{column} {op} ?"), Box::new(t.0));
            }
        }
        if let Some(b) = before {
            w.add("id < ?", Box::new(b.0));
        }
        w
    }

    /// `condition` with one `?`, which becomes this value's number.
    pub fn add(&mut self, condition: &str, value: Box<dyn ToSql + Sync + Send>) {
        self.values.push(value);
        self.conditions.push(condition.replace('?', &format!("${}", self.values.len())));
    }

    /// `WHERE a AND b`, or nothing.
    pub fn clause(&self) -> String {
        if self.conditions.is_empty() { String::new() } else { format!("WHERE {}", self.conditions.join(" AND ")) }
    }

    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect()
    }
}

/// Live tasks, and with `include_archived` history's too: each table's newest page, merged.
pub async fn list_tasks(c: Conn<'_>, p: &ListTasks) -> Result<Vec<TaskRecord>, StoreError> {
    let mut w = Where::of(&p.filter, p.before);
    let filter = w.clause();
    w.values.push(Box::new(i64::from(p.limit)));
    let limit = format!("${}", w.values.len());
    let page = |table: &str, archived: bool| {
        format!("SELECT {TASK_COLUMNS}, {archived} AS archived FROM {table} {filter} ORDER BY id DESC LIMIT {limit}")
    };
    let sql = if p.include_archived {
        format!(
            "SELECT * FROM ({}) AS live UNION ALL SELECT * FROM ({}) AS old ORDER BY id DESC LIMIT {limit}",
            page("tasks", false),
            page("tasks_history", true)
        )
    } else {
        page("tasks", false)
    };
    let rows = c.query(&sql, &w.params()).await?;
    rows.iter().map(|r| Ok(TaskRecord { archived: get(r, TASK_COLUMN_COUNT)?, ..crate::rows::task(r)? })).collect()
}

/// The ids of the live tasks a filter matches, oldest first, at most `limit`.
pub async fn task_ids(c: Conn<'_>, f: &TaskFilter, limit: u32) -> Result<Vec<TaskId>, StoreError> {
    let mut w = Where::of(f, None);
    let filter = w.clause();
    w.values.push(Box::new(i64::from(limit)));
    let sql = format!("SELECT id FROM tasks {filter} ORDER BY id LIMIT ${}", w.values.len());
    c.query(&sql, &w.params()).await?.iter().map(|r| Ok(TaskId(get(r, 0)?))).collect()
}

/// One page of a task's events, from whichever table holds them (a task's events are all in one:
/// the archiver moves them with it, in one transaction; one statement reads one snapshot).
pub async fn task_events(c: Conn<'_>, p: &TaskEvents) -> Result<Vec<EventRecord>, StoreError> {
    let page = |table: &str| {
        format!("SELECT {EVENT_COLUMNS} FROM {table} WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3")
    };
    let sql = format!(
        "SELECT * FROM ({}) AS live UNION ALL SELECT * FROM ({}) AS old ORDER BY id LIMIT $3",
        page("events"),
        page("events_history")
    );
    let (after, limit) = (p.after.unwrap_or(0), i64::from(p.limit));
    c.query(&sql, &[&p.task_id.0, &after, &limit]).await?.iter().map(crate::rows::event).collect()
}

/// The registered definition, the newest version when `version` is none.
pub async fn get_workflow(
    c: Conn<'_>,
    defs: &DefCache,
    name: &str,
    version: Option<u32>,
) -> Result<Option<WorkflowDef>, StoreError> {
    let version = version.map(pg_int).transpose()?;
    let row = c
        .query_opt(
            "SELECT version, definition FROM workflows WHERE name = $1 AND ($2::integer IS NULL OR version = $2)
             ORDER BY version DESC LIMIT 1",
            &[&name, &version],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let version = crate::rows::count(&row, 0, "workflows.version")?;
    Ok(Some((*defs.parse(name, version, get(&row, 1)?)?).clone()))
}

/// Every registered definition, by name then version. The description is read out of the stored
/// text here rather than by a jsonb cast, which refuses some texts JSON allows (a "\u0000").
pub async fn list_workflows(c: Conn<'_>) -> Result<Vec<WorkflowSummary>, StoreError> {
    let rows =
        c.query("SELECT name, version, definition, created_at FROM workflows ORDER BY name, version", &[]).await?;
    rows.iter()
        .map(|r| {
            let definition: &str = get(r, 2)?;
            let description = serde_json::from_str::<serde_json::Value>(definition)
                .ok()
                .and_then(|d| d.get("description").and_then(|v| v.as_str()).map(str::to_owned));
            Ok(WorkflowSummary {
                name: get(r, 0)?,
                version: crate::rows::count(r, 1, "workflows.version")?,
                description,
                created_at: shiftboss_core::Timestamp(get(r, 3)?),
            })
        })
        .collect()
}

pub async fn task_counts(c: Conn<'_>) -> Result<Vec<(TaskState, u64)>, StoreError> {
    let rows = c.query("SELECT state, count(*) FROM tasks GROUP BY state", &[]).await?;
    rows.iter().map(|r| Ok((parsed(r, 0, "tasks.state")?, get::<i64>(r, 1)? as u64))).collect()
}

/// In one snapshot.
pub async fn summarize(c: Conn<'_>) -> Result<Summary, StoreError> {
    let kind = "SELECT count(*) FROM events WHERE kind = $1";
    together!(
        tasks = task_counts(c),
        steps = c.query("SELECT state, count(*) FROM steps GROUP BY state", &[]),
        errors = c.query(
            "SELECT coalesce(last_error, '?'), count(*) FROM steps WHERE state = 'error'
             GROUP BY 1 ORDER BY 2 DESC LIMIT 20",
            &[],
        ),
        expiries = c.query_one(kind, &[&ev::STEP_EXPIRED]),
        releases = c.query_one(kind, &[&ev::STEP_RELEASED]),
        rejected = c.query_one(kind, &[&ev::REPLY_REJECTED]),
        retried = c.query_one("SELECT count(*) FROM steps WHERE attempts > 1", &[]),
        recovered = c.query_one(
            "SELECT count(*) FROM steps WHERE state = 'processed'
             AND id IN (SELECT step_id FROM events WHERE kind IN ($1, $2))",
            &[&ev::STEP_EXPIRED, &ev::STEP_RELEASED],
        ),
    );
    let n = |r: &Row| get::<i64>(r, 0).map(|n| n as u64);
    Ok(Summary {
        tasks,
        steps: steps
            .iter()
            .map(|r| Ok((parsed::<StepState>(r, 0, "steps.state")?, get::<i64>(r, 1)? as u64)))
            .collect::<Result<_, StoreError>>()?,
        expiries: n(&expiries)?,
        releases: n(&releases)?,
        rejected_replies: n(&rejected)?,
        steps_retried: n(&retried)?,
        recovered_after_expiry: n(&recovered)?,
        errors: errors.iter().map(|r| Ok((get(r, 0)?, get::<i64>(r, 1)? as u64))).collect::<Result<_, StoreError>>()?,
    })
}

/// The live agent steps by agent type and state (and for pending ones, whether due at `$1`): each
/// state counted through the partial indexes of that state (`steps_error` for steps in Error), so
/// that a scrape reads the live steps only, never the finished ones beside them.
pub const QUEUE_STATS: &str = "
SELECT agent, 'pending', due_at <= $1, count(*), min(due_at) FROM steps
 WHERE state = 'pending' AND kind = 'agent' GROUP BY agent, due_at <= $1
UNION ALL
SELECT agent, 'processing', false, count(*), min(due_at) FROM steps
 WHERE state = 'processing' AND kind = 'agent' GROUP BY agent
UNION ALL
SELECT agent, 'error', false, count(*), min(due_at) FROM steps
 WHERE state = 'error' AND kind = 'agent' GROUP BY agent";

/// Each agent type's queue at `now` (see [`shiftboss_store::QueueStats`]): live agent steps only.
pub async fn queue_stats(
    c: Conn<'_>,
    now: shiftboss_core::Timestamp,
) -> Result<shiftboss_store::QueueStats, StoreError> {
    let rows = c.query(QUEUE_STATS, &[&now.0]).await?;
    let rows = rows
        .iter()
        .map(|r| {
            Ok((
                get::<String>(r, 0)?,
                get::<String>(r, 1)?,
                get::<bool>(r, 2)?,
                get::<i64>(r, 3)? as u64,
                get::<Option<i64>>(r, 4)?,
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(shiftboss_store::QueueStats::from_rows(now, rows))
}
