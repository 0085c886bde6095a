//! Step rows written ahead: a submission reserves step ids from the table's sequence in the same
//! round trip as its task rows, so the first steps its decide creates get their ids at once and
//! are inserted later, all with one statement pipelined with the transaction's end. Without it,
//! each first step was a round trip of its own (most of a batch submission's).
//!
//! The rows wait in the transaction (`Tx::ahead`). Whatever touches the steps table in it first
//! inserts them ([`Tx::flush_steps`], which every `WriteTx` method on steps calls), so no
//! statement ever misses one; the commit path inserts what is left (`Tx::finish_with`). Ids come
//! from the identity's own sequence, in the order reserved and handed out, so a task's rows keep
//! their creation order by id; a reserved id left unused is a gap in the sequence, nothing more.

use crate::error::map_err;
use crate::rows::get;
use crate::tx::Tx;
use shiftboss_core::{StepId, StepState, TaskId};
use shiftboss_store::StoreError;
use shiftboss_store::decided::StepRow;
use std::collections::{HashMap, VecDeque};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// Reserves `$1` step ids. The sequence is looked up once (the subquery is kept apart by its
/// OFFSET): `pg_get_serial_sequence` in the select list ran for every id, its catalog lookups 3.5
/// µs of the 4 µs an id took (`psql`, 200,000 ids: 708 ms against 85).
pub const RESERVE_STEP_IDS: &str = "SELECT nextval(s.seq)
       FROM (SELECT pg_get_serial_sequence('steps', 'id')::regclass AS seq OFFSET 0) s, generate_series(1, $1::int)";

/// Inserts the rows of a [`StepColumns`], each with its reserved id and its task's bucket.
///
/// The bucket is a column of the batch, not a join on `tasks`: with the join, the generic plan
/// (which assumes ten rows) cost more than a custom one, so PostgreSQL planned the statement anew
/// at every execution, about 0.2 ms of the server's time each (measured with `EXPLAIN ANALYZE`).
pub const INSERT_STEPS: &str = "INSERT INTO steps (id, task_id, name, agent, state, due_at, priority, input, output,
                           idempotency_key, timeout_ms, config, retry, created_at, updated_at, bucket, kind,
                           compensates, domain, fallback_at, response_timeout_ms, on_timeout, claim_timeout_ms,
                           deadline_at)
     OVERRIDING SYSTEM VALUE
     SELECT s.id, s.task_id, s.name, s.agent, s.state, s.due_at, s.priority, s.input, s.output, s.idempotency_key,
            s.timeout_ms, s.config, s.retry, $21, $21, s.bucket, s.kind, s.compensates, s.domain, s.fallback_at,
            s.response_timeout_ms, s.on_timeout, s.claim_timeout_ms, s.deadline_at
       FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::int[],
                   $8::text[], $9::text[], $10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[],
                   $15::text[], $16::text[], $17::bigint[], $18::bigint[], $19::text[], $20::int[], $22::bigint[],
                   $23::bigint[])
            AS s(id, task_id, name, agent, state, due_at, priority, input, output, idempotency_key, timeout_ms,
                 config, retry, kind, compensates, domain, fallback_at, response_timeout_ms, on_timeout, bucket,
                 claim_timeout_ms, deadline_at)";

/// Reserved ids not handed out yet, and the rows written ahead under the others.
#[derive(Default)]
pub struct Ahead {
    spare: VecDeque<i64>,
    rows: Vec<AheadStep>,
    /// The buckets of the tasks this transaction inserted: only their steps are written ahead.
    buckets: HashMap<i64, i32>,
}

struct AheadStep {
    id: i64,
    task: i64,
    bucket: i32,
    name: String,
    state: StepState,
    compensates: Option<String>,
    row: StepRow,
}

impl Tx<'_> {
    /// Ids this transaction may give the steps it creates without a round trip: the rows of a
    /// [`RESERVE_STEP_IDS`].
    pub fn reserve_step_ids(&self, reserved: &[Row]) -> Result<(), StoreError> {
        let ids = reserved.iter().map(|r| get::<i64>(r, 0)).collect::<Result<Vec<_>, _>>()?;
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).spare.extend(ids);
        Ok(())
    }

    /// A task this transaction inserted, with its bucket (its steps take it).
    pub fn task_bucket(&self, task: TaskId, bucket: i32) {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).buckets.insert(task.0, bucket);
    }

    /// Writes a step row ahead under a reserved id; `None` when none is left, or when its task
    /// was not inserted by this transaction.
    pub fn step_ahead(
        &self,
        task: TaskId,
        name: &str,
        state: StepState,
        compensates: Option<&str>,
        row: &StepRow,
    ) -> Option<StepId> {
        let mut ahead = self.ahead.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = *ahead.buckets.get(&task.0)?;
        let id = ahead.spare.pop_front()?;
        ahead.rows.push(AheadStep {
            id,
            task: task.0,
            bucket,
            name: name.to_owned(),
            state,
            compensates: compensates.map(str::to_owned),
            row: row.clone(),
        });
        Some(StepId(id))
    }

    /// Inserts the rows written ahead, if any: before any statement that reads or changes steps.
    pub async fn flush_steps(&self) -> Result<(), StoreError> {
        let Some(c) = StepColumns::take(self) else { return Ok(()) };
        let st = self.prepare(INSERT_STEPS).await?;
        self.client().execute(&st, &c.params()).await.map_err(map_err)?;
        Ok(())
    }
}

/// The rows written ahead, column by column for `unnest`.
pub struct StepColumns {
    id: Vec<i64>,
    task: Vec<i64>,
    name: Vec<String>,
    agent: Vec<String>,
    state: Vec<&'static str>,
    due_at: Vec<i64>,
    priority: Vec<i32>,
    input: Vec<String>,
    output: Vec<Option<String>>,
    idempotency_key: Vec<String>,
    timeout_ms: Vec<i64>,
    config: Vec<String>,
    retry: Vec<Option<String>>,
    kind: Vec<&'static str>,
    compensates: Vec<Option<String>>,
    domain: Vec<Option<String>>,
    fallback_at: Vec<Option<i64>>,
    response_timeout_ms: Vec<Option<i64>>,
    on_timeout: Vec<&'static str>,
    bucket: Vec<i32>,
    /// The transaction's time: each row's `created_at` and `updated_at`.
    at: i64,
    claim_timeout_ms: Vec<Option<i64>>,
    deadline_at: Vec<Option<i64>>,
}

impl StepColumns {
    /// The rows written ahead (taken out of the transaction); `None` when there are none.
    pub fn take(t: &Tx<'_>) -> Option<StepColumns> {
        let rows = std::mem::take(&mut t.ahead.lock().unwrap_or_else(|p| p.into_inner()).rows);
        if rows.is_empty() {
            return None;
        }
        let n = rows.len();
        let mut c = StepColumns {
            id: Vec::with_capacity(n),
            task: Vec::with_capacity(n),
            name: Vec::with_capacity(n),
            agent: Vec::with_capacity(n),
            state: Vec::with_capacity(n),
            due_at: Vec::with_capacity(n),
            priority: Vec::with_capacity(n),
            input: Vec::with_capacity(n),
            output: Vec::with_capacity(n),
            idempotency_key: Vec::with_capacity(n),
            timeout_ms: Vec::with_capacity(n),
            config: Vec::with_capacity(n),
            retry: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            compensates: Vec::with_capacity(n),
            domain: Vec::with_capacity(n),
            fallback_at: Vec::with_capacity(n),
            response_timeout_ms: Vec::with_capacity(n),
            on_timeout: Vec::with_capacity(n),
            bucket: Vec::with_capacity(n),
            at: t.now.0,
            claim_timeout_ms: Vec::with_capacity(n),
            deadline_at: Vec::with_capacity(n),
        };
        for s in rows {
            c.id.push(s.id);
            c.task.push(s.task);
            c.bucket.push(s.bucket);
            c.name.push(s.name);
            c.state.push(s.state.as_str());
            c.compensates.push(s.compensates);
            let r = s.row;
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
            c.claim_timeout_ms.push(r.claim_timeout_ms);
            c.deadline_at.push(r.deadline_at);
        }
        Some(c)
    }

    /// The parameters of [`INSERT_STEPS`].
    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.id,
            &self.task,
            &self.name,
            &self.agent,
            &self.state,
            &self.due_at,
            &self.priority,
            &self.input,
            &self.output,
            &self.idempotency_key,
            &self.timeout_ms,
            &self.config,
            &self.retry,
            &self.kind,
            &self.compensates,
            &self.domain,
            &self.fallback_at,
            &self.response_timeout_ms,
            &self.on_timeout,
            &self.bucket,
            &self.at,
            &self.claim_timeout_ms,
            &self.deadline_at,
        ]
    }
}
