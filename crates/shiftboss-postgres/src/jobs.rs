//! Retry jobs as an operator sees them (M2, M7): search over the hot tables or history, one job
//! by id or key, and bulk resubmit of given-up jobs (enqueueing is `enqueue`).

use crate::archive::restore_tree;
use crate::lock::lock_tasks;
use crate::rows::{bucket, count, get, json, opt_json, parsed};
use crate::tx::{Conn, Tx};
use shiftboss_core::jobs::{self, JobState};
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_store::{
    JobPlace, JobQuery, JobRecord, JobRef, OperateTask, ResubmitJobs, ResubmitReport, StoreError, TaskCommand,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// The columns of a job row, from a task and its `run` step (`t` and `s`).
const JOB_COLUMNS: &str = "t.id, t.task_key, t.workflow, t.state, t.bucket, t.priority, t.input, t.output, \
     t.created_at, t.updated_at, s.state, s.due_at, s.failure_count, s.attempts, s.last_error";

fn job(row: &Row, archived: bool) -> Result<JobRecord, StoreError> {
    let workflow: String = get(row, 2)?;
    let state = JobState::of(parsed(row, 3, "tasks.state")?, parsed(row, 10, "steps.state")?);
    let updated_at = Timestamp(get(row, 9)?);
    Ok(JobRecord {
        id: TaskId(get(row, 0)?),
        key: get(row, 1)?,
        handler: jobs::handler_of(&workflow).unwrap_or(&workflow).to_owned(),
        state,
        bucket: bucket(row, 4)?,
        priority: get(row, 5)?,
        params: json(row, 6, "tasks.input")?,
        output: opt_json(row, 7, "tasks.output")?,
        created_at: Timestamp(get(row, 8)?),
        due_at: if state.is_finished() { updated_at } else { Timestamp(get(row, 11)?) },
        updated_at,
        retries: count(row, 12, "steps.failure_count")?,
        attempts: count(row, 13, "steps.attempts")?,
        last_error: get(row, 14)?,
        archived,
    })
}

fn tables(place: JobPlace) -> (&'static str, &'static str) {
    match place {
        JobPlace::Live => ("tasks", "steps"),
        JobPlace::History => ("tasks_history", "steps_history"),
    }
}

/// The condition on `t` (task) and `s` (step) for a job state.
fn state_condition(state: JobState) -> &'static str {
    match state {
        JobState::Succeeded => "t.state = 'completed'",
        JobState::GivenUp => "t.state = 'failed'",
        JobState::Cancelled => "t.state IN ('cancelled', 'terminated', 'compensated')",
        JobState::Running => "t.state IN ('running', 'paused', 'compensating') AND s.state = 'processing'",
        JobState::Pending => "t.state IN ('running', 'paused', 'compensating') AND s.state <> 'processing'",
    }
}

/// The FROM and WHERE of a job search, with its parameters. Only the filters given go into the
/// statement, so that each shape gets a plan of its own (as `list_tasks`). Job workflows are found
/// by LIKE, not by a range of text: a range depends on the database's collation.
struct Search<'q> {
    sql: String,
    params: Vec<&'q (dyn ToSql + Sync)>,
}

struct Filters {
    handler: Option<String>,
    from: Option<i64>,
    to: Option<i64>,
    reason: Option<String>,
    before: Option<i64>,
    id: Option<i64>,
}

impl Filters {
    fn of(q: &JobQuery) -> Filters {
        Filters {
            handler: q.handler.as_deref().map(jobs::workflow_name),
            from: q.from.map(|t| t.0),
            to: q.to.map(|t| t.0),
            reason: q.reason_pattern(),
            before: q.before.map(|b| b.0),
            id: q.id.map(|i| i.0),
        }
    }

    fn search(&self, place: JobPlace, state: Option<JobState>) -> Search<'_> {
        let (tasks, steps) = tables(place);
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
        let mut filters = vec![format!("t.workflow LIKE '{}%'", jobs::WORKFLOW_PREFIX)];
        if let Some(w) = &self.handler {
            params.push(w);
            filters.push(format!("t.workflow = ${}", params.len()));
        }
        if let Some(f) = &self.from {
            params.push(f);
            filters.push(format!("t.updated_at >= ${}", params.len()));
        }
        if let Some(to) = &self.to {
            params.push(to);
            filters.push(format!("t.updated_at < ${}", params.len()));
        }
        if let Some(r) = &self.reason {
            params.push(r);
            filters.push(format!("s.last_error LIKE ${} ESCAPE '\\'", params.len()));
        }
        if let Some(b) = &self.before {
            params.push(b);
            filters.push(format!("t.id < ${}", params.len()));
        }
        if let Some(i) = &self.id {
            params.push(i);
            filters.push(format!("t.id = ${}", params.len()));
        }
        if let Some(s) = state {
            filters.push(state_condition(s).to_owned());
        }
        let sql = format!(
            "FROM {tasks} t JOIN {steps} s ON s.task_id = t.id AND s.name = '{step}' WHERE {}",
            filters.join(" AND "),
            step = jobs::STEP,
        );
        Search { sql, params }
    }
}

pub async fn list(c: Conn<'_>, q: &JobQuery) -> Result<Vec<JobRecord>, StoreError> {
    let filters = Filters::of(q);
    let Search { sql, mut params } = filters.search(q.place, q.state);
    let limit = i64::from(q.limit);
    params.push(&limit);
    let sql = format!("SELECT {JOB_COLUMNS} {sql} ORDER BY t.id DESC LIMIT ${}", params.len());
    let archived = q.place == JobPlace::History;
    c.query(&sql, &params).await?.iter().map(|r| job(r, archived)).collect()
}

pub async fn find(c: Conn<'_>, r: &JobRef) -> Result<Option<JobRecord>, StoreError> {
    match r {
        JobRef::Id(id) => find_by(c, "id", &id.0).await,
        JobRef::Key(key) => find_by(c, "task_key", &key.as_str()).await,
    }
}

/// One statement over both tables, so one snapshot: a job being archived (or restored) meanwhile
/// is found in one of them, never in neither.
async fn find_by(c: Conn<'_>, column: &str, value: &(dyn ToSql + Sync)) -> Result<Option<JobRecord>, StoreError> {
    let one = |place: JobPlace| {
        let (tasks, steps) = tables(place);
        format!(
            "SELECT {JOB_COLUMNS}, {archived} FROM {tasks} t JOIN {steps} s ON s.task_id = t.id AND s.name = '{step}'
             WHERE t.{column} = $1 AND t.workflow LIKE '{prefix}%'",
            archived = place == JobPlace::History,
            step = jobs::STEP,
            prefix = jobs::WORKFLOW_PREFIX,
        )
    };
    let sql = format!("{} UNION ALL {} LIMIT 1", one(JobPlace::Live), one(JobPlace::History));
    let row = c.query_opt(&sql, &[value]).await?;
    row.map(|r| job(&r, get(&r, 15)?)).transpose()
}

/// Given-up jobs back to run: from the hot tables, then from history (each brought back first),
/// `limit` in all; each by the operator's Retry, which locks its task (see `lock`).
pub async fn resubmit(t: &Tx<'_>, p: &ResubmitJobs) -> Result<ResubmitReport, StoreError> {
    let mut report = ResubmitReport::default();
    let mut left = p.query.limit;
    let filters = Filters::of(&p.query);
    for place in [JobPlace::Live, JobPlace::History] {
        let Search { sql, mut params } = filters.search(place, Some(JobState::GivenUp));
        let matched: i64 = get(&t.query_one(&format!("SELECT count(*) {sql}"), &params).await?, 0)?;
        report.matched += matched as u64;
        if p.dry_run || left == 0 {
            continue;
        }
        // A parameter, not text: each statement text stays in the connection's cache of prepared ones.
        let limit = i64::from(left);
        params.push(&limit);
        let rows = t.query(&format!("SELECT t.id {sql} ORDER BY t.id LIMIT ${}", params.len()), &params).await?;
        let ids = rows.iter().map(|r| get(r, 0).map(TaskId)).collect::<Result<Vec<_>, _>>()?;
        let ids = match place {
            JobPlace::Live => still_given_up(t, &ids).await?,
            JobPlace::History => {
                let mut restored = Vec::with_capacity(ids.len());
                for id in ids {
                    // Another resubmit (or the purge) may have taken it since the search.
                    if restore_tree(t, id, &p.actor).await? {
                        restored.push(id);
                    }
                }
                restored
            }
        };
        for task_id in ids {
            let command = TaskCommand::Retry;
            shiftboss_store::advance::operate_task(
                t,
                &OperateTask { task_id, actor: p.actor.clone(), reason: p.reason.clone(), command },
            )
            .await?;
            report.resubmitted += 1;
            left -= 1;
        }
    }
    Ok(report)
}

/// Of live jobs found given up, those still given up under their tasks' locks: another operator
/// may have retried one, or the archiver moved it, since the search read it.
async fn still_given_up(t: &Tx<'_>, ids: &[TaskId]) -> Result<Vec<TaskId>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    lock_tasks(t, ids).await?;
    let raw: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let rows = t.query("SELECT id FROM tasks WHERE id = ANY($1) AND state = 'failed' ORDER BY id", &[&raw]).await?;
    rows.iter().map(|r| get(r, 0).map(TaskId)).collect()
}
