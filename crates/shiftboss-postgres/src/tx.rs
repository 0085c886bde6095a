//! What every operation works with: a connection (inside a transaction or not) whose statements go
//! through the pool's statement cache, the store's time, and the parsed definitions.

use crate::error::{bad_column, map_err};
use deadpool_postgres::StatementCache;
use shiftboss_core::model::EventLevel;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepId, TaskId, Timestamp};
use shiftboss_store::StoreError;
use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

pub type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// Statements on one connection. Inside a transaction, `client` is the transaction's own client:
/// tokio-postgres runs a transaction's statements on that client, so both paths share this code.
#[derive(Clone, Copy)]
pub struct Conn<'a> {
    client: &'a Client,
    /// Prepared statements of this connection, kept across calls. None for a caller's own
    /// connection (submit_task_in): its statements are prepared each time.
    cache: Option<&'a StatementCache>,
}

impl<'a> Conn<'a> {
    pub fn new(client: &'a Client, cache: Option<&'a StatementCache>) -> Self {
        Conn { client, cache }
    }

    /// The connection, for statements that are pipelined (sent together, see `Tx::finish_with`).
    pub fn client(&self) -> &'a Client {
        self.client
    }

    /// `sql` prepared on this connection (from the cache when it has one).
    pub async fn prepare(&self, sql: &str) -> Result<Statement, StoreError> {
        match self.cache {
            Some(cache) => cache.prepare(self.client, sql).await,
            None => self.client.prepare(sql).await,
        }
        .map_err(map_err)
    }

    pub async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        let st = self.prepare(sql).await?;
        self.client.query(&st, params).await.map_err(map_err)
    }

    pub async fn query_opt(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>, StoreError> {
        let st = self.prepare(sql).await?;
        self.client.query_opt(&st, params).await.map_err(map_err)
    }

    pub async fn query_one(&self, sql: &str, params: Params<'_>) -> Result<Row, StoreError> {
        let st = self.prepare(sql).await?;
        self.client.query_one(&st, params).await.map_err(map_err)
    }

    pub async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        let st = self.prepare(sql).await?;
        self.client.execute(&st, params).await.map_err(map_err)
    }

    /// [`Conn::query`] with the statement's generic plan, kept with the prepared statement and so
    /// planned once per connection. For statements whose plan does not hang on their parameters'
    /// values but which PostgreSQL would plan anew at every execution (see the claim's `CLAIM`
    /// for the one it is used for, and why).
    ///
    /// `plan_cache_mode` is read when the statement is bound, so it is set just before and reset
    /// just after, in the same round trip: the three are sent together, in order (`join3` polls in
    /// order and tokio-postgres sends a request at its future's first poll), and the RESET runs
    /// even if the statement fails. Inside a transaction a SET that the transaction's failure
    /// rolls back goes with it. No other statement of the connection runs between them.
    pub async fn query_generic(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.query_between("SET plan_cache_mode = force_generic_plan", sql, params, "RESET plan_cache_mode").await
    }

    /// [`Conn::query_generic`] on a connection outside any transaction: the statement runs in a
    /// transaction of its own, whose `SET LOCAL` ends with it. The same round trip (the three are
    /// sent together), but one transaction where a SET, the statement and a RESET in autocommit
    /// are three: PostgreSQL counts each, and an idle `serve` claims at every poll. A failed
    /// statement's COMMIT rolls the transaction back, the setting with it.
    pub async fn query_generic_alone(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.query_between("BEGIN; SET LOCAL plan_cache_mode = force_generic_plan", sql, params, "COMMIT").await
    }

    /// `sql` with `before` and `after` sent together with it, in order, in one round trip (`join3`
    /// polls in order and tokio-postgres sends a request at its future's first poll); `after` runs
    /// even if `sql` fails. The statement's own error comes first: it says what went wrong.
    async fn query_between(
        &self,
        before: &str,
        sql: &str,
        params: Params<'_>,
        after: &str,
    ) -> Result<Vec<Row>, StoreError> {
        let st = self.prepare(sql).await?;
        let (before, rows, after) = futures_util::future::join3(
            self.client.batch_execute(before),
            self.client.query(&st, params),
            self.client.batch_execute(after),
        )
        .await;
        let rows = rows.map_err(map_err)?;
        before.map_err(map_err)?;
        after.map_err(map_err)?;
        Ok(rows)
    }
}

/// [`Conn::query_generic`] on a connection of the caller's, for tests of its SET and RESET.
#[doc(hidden)]
pub async fn query_generic_on(client: &Client, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
    Conn::new(client, None).query_generic(sql, params).await
}

/// [`Conn::query_generic_alone`] on a connection of the caller's, for its tests.
#[doc(hidden)]
pub async fn query_generic_alone_on(client: &Client, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
    Conn::new(client, None).query_generic_alone(sql, params).await
}

macro_rules! db_now_expr {
    () => {
        "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}

/// The store's time by the database's clock, in milliseconds.
///
/// `clock_timestamp()`, not `now()`: `now()` is frozen at the start of the transaction, and a
/// caller's transaction (submit_task_in) may have been open for a while; clock_timestamp() is the
/// time this statement runs. Taken once per transaction, so every comparison in it uses one instant.
/// Truncated like the host clock's milliseconds, so that `now` is never ahead of the server.
pub const DB_NOW: &str = concat!("SELECT ", db_now_expr!());
/// [`DB_NOW`]'s expression, for statements that read the clock themselves (the claim).
pub const DB_NOW_EXPR: &str = db_now_expr!();
/// BEGIN and [`DB_NOW`] in one simple-protocol message: a write transaction's first round trip.
pub const BEGIN_AND_NOW: &str = concat!("BEGIN; SELECT ", db_now_expr!());

pub async fn db_now(c: &Conn<'_>) -> Result<Timestamp, StoreError> {
    Ok(Timestamp(c.query_one(DB_NOW, &[]).await?.get(0)))
}

/// Parsed definitions by (name, version). A version never changes once registered, so entries
/// never go stale.
#[derive(Default)]
pub struct DefCache(Mutex<HashMap<(String, u32), Arc<WorkflowDef>>>);

impl DefCache {
    fn get(&self, name: &str, version: u32) -> Option<Arc<WorkflowDef>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&(name.to_owned(), version)).cloned()
    }

    /// Parses a stored definition and keeps it.
    pub fn parse(&self, name: &str, version: u32, text: &str) -> Result<Arc<WorkflowDef>, StoreError> {
        let def: WorkflowDef = serde_json::from_str(text)
            .map_err(|e| bad_column(&format!("workflows.definition of {name} v{version}"), e))?;
        let def = Arc::new(def);
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert((name.to_owned(), version), def.clone());
        Ok(def)
    }
}

/// A write transaction: its statements, its one `now`, and the definitions.
pub struct Tx<'a> {
    pub db: Conn<'a>,
    pub now: Timestamp,
    pub defs: &'a DefCache,
    /// Set when the transaction queues work (due now or later): its commit then notifies the
    /// listeners, which read their next due times again.
    pub due_now: std::sync::atomic::AtomicBool,
    /// The tasks whose rows this transaction holds locked (see `lock`), so that none is locked
    /// twice and a missing lock can be taken where it is found missing.
    pub locked: Mutex<HashSet<TaskId>>,
    /// Events recorded and not yet inserted: [`Tx::flush_events`] inserts them in one statement,
    /// in the order recorded, before the commit (and before anything in the transaction reads or
    /// moves events). One INSERT per event was a round trip each, most of a submission's.
    events: Mutex<Vec<NewEvent>>,
    /// Step rows written ahead under ids reserved beforehand (submissions, see `ahead`): inserted
    /// with one statement before anything else touches the steps table, or at the end.
    pub(crate) ahead: Mutex<crate::ahead::Ahead>,
}

/// An event waiting for [`Tx::flush_events`].
struct NewEvent {
    task: i64,
    step: Option<i64>,
    kind: String,
    level: &'static str,
    actor: String,
    detail: String,
}

/// The events of a transaction, column by column for `unnest`, and the channel to notify.
struct EventColumns {
    tasks: Vec<i64>,
    steps: Vec<Option<i64>>,
    kinds: Vec<String>,
    levels: Vec<&'static str>,
    actors: Vec<String>,
    details: Vec<String>,
    /// The transaction's time, each event's `at`.
    at: i64,
    notify: Option<String>,
}

impl EventColumns {
    /// The transaction's recorded events (taken out of it); `None` when there is nothing to
    /// send, neither events nor a notification.
    fn take(t: &Tx<'_>, notify: Option<String>) -> Option<EventColumns> {
        let events = std::mem::take(&mut *t.events.lock().unwrap_or_else(|p| p.into_inner()));
        if events.is_empty() && notify.is_none() {
            return None;
        }
        let n = events.len();
        let mut c = EventColumns {
            tasks: Vec::with_capacity(n),
            steps: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            levels: Vec::with_capacity(n),
            actors: Vec::with_capacity(n),
            details: Vec::with_capacity(n),
            at: t.now.0,
            notify,
        };
        for e in events {
            c.tasks.push(e.task);
            c.steps.push(e.step);
            c.kinds.push(e.kind);
            c.levels.push(e.level);
            c.actors.push(e.actor);
            c.details.push(e.detail);
        }
        Some(c)
    }

    fn sql(&self) -> &'static str {
        if self.tasks.is_empty() {
            return "SELECT pg_notify($1, '')";
        }
        // A data-modifying WITH runs once whether or not the query reads it; the notification is
        // sent only when asked for.
        "WITH inserted AS (
             INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
             SELECT e.task_id, e.step_id, $7, e.kind, e.level, e.actor, e.detail
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
                  WITH ORDINALITY AS e(task_id, step_id, kind, level, actor, detail, n)
             ORDER BY e.n
         )
         SELECT pg_notify($8, '') WHERE $8::text IS NOT NULL"
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        if self.tasks.is_empty() {
            return vec![&self.notify];
        }
        vec![&self.tasks, &self.steps, &self.kinds, &self.levels, &self.actors, &self.details, &self.at, &self.notify]
    }
}

impl<'a> Tx<'a> {
    pub fn new(db: Conn<'a>, now: Timestamp, defs: &'a DefCache) -> Tx<'a> {
        Tx {
            db,
            now,
            defs,
            due_now: Default::default(),
            locked: Default::default(),
            events: Default::default(),
            ahead: Default::default(),
        }
    }
}

impl Tx<'_> {
    pub fn mark_due_now(&self) {
        self.mark_queued();
    }

    /// This transaction queues work due later (a delayed retry, a job due later, a timed wait):
    /// sleeping schedulers and supervisors must learn the new, possibly earlier, due time. One
    /// notification per transaction whatever it queued.
    pub fn mark_queued(&self) {
        self.due_now.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<'a> Deref for Tx<'a> {
    type Target = Conn<'a>;

    fn deref(&self) -> &Conn<'a> {
        &self.db
    }
}

impl Tx<'_> {
    /// Records an event of this transaction; it reaches the table at [`Tx::flush_events`].
    pub async fn event(
        &self,
        task: TaskId,
        step: Option<StepId>,
        kind: &str,
        level: EventLevel,
        actor: &str,
        detail: serde_json::Value,
    ) -> Result<(), StoreError> {
        let e = NewEvent {
            task: task.0,
            step: step.map(|s| s.0),
            kind: kind.to_owned(),
            level: level.as_str(),
            actor: actor.to_owned(),
            detail: detail.to_string(),
        };
        self.events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
        Ok(())
    }

    /// Inserts the steps written ahead and the events recorded so far, in the order they were
    /// recorded (their ids follow it). Whatever reads or moves the events table in a write
    /// transaction runs it first; the commit path runs [`Tx::finish_with`].
    pub async fn flush_events(&self) -> Result<(), StoreError> {
        self.finish_with(None, std::future::ready(())).await
    }

    /// What a write transaction does last: the steps written ahead and its events are inserted
    /// and, if it queued work, the schema's due-work notification is sent (PostgreSQL delivers it
    /// at commit and drops it on rollback), pipelined with `then` (the COMMIT, or a caller's
    /// transaction's `search_path` put back): one round trip for all of it. `then`'s output is
    /// returned when the statements before it succeeded; when one failed, `then` ran in an aborted
    /// transaction (a COMMIT there rolls back) and the statement's error is returned.
    pub async fn finish_with<F: std::future::Future>(
        &self,
        schema: Option<&str>,
        then: F,
    ) -> Result<F::Output, StoreError> {
        let notify =
            schema.filter(|_| self.due_now.load(std::sync::atomic::Ordering::Relaxed)).map(crate::listen::channel);
        let steps = crate::ahead::StepColumns::take(self);
        let events = EventColumns::take(self, notify);
        // Prepared first, so that the pipelined sends below go out in this order: a statement
        // that is not in the cache would be prepared inside its future, a round trip of its own,
        // and its execution would then be sent after the ones that follow it. Prepared together:
        // without a cache (a caller's own connection) that is one round trip for both.
        let steps_st = async {
            match &steps {
                Some(_) => self.prepare(crate::ahead::INSERT_STEPS).await.map(Some),
                None => Ok(None),
            }
        };
        let events_st = async {
            match &events {
                Some(e) => self.prepare(e.sql()).await.map(Some),
                None => Ok(None),
            }
        };
        let (steps_st, events_st) = futures_util::future::try_join(steps_st, events_st).await?;
        let client = self.db.client();
        let steps_params = steps.as_ref().map(crate::ahead::StepColumns::params);
        let events_params = events.as_ref().map(EventColumns::params);
        let write_steps = async {
            match (&steps_st, &steps_params) {
                (Some(st), Some(p)) => client.execute(st, p).await.map(|_| ()).map_err(map_err),
                _ => Ok(()),
            }
        };
        let write_events = async {
            match (&events_st, &events_params) {
                (Some(st), Some(p)) => client.query(st, p).await.map(|_| ()).map_err(map_err),
                _ => Ok(()),
            }
        };
        // `join3` polls in order, and tokio-postgres sends each request at its future's first poll.
        let (steps_done, events_done, out) = futures_util::future::join3(write_steps, write_events, then).await;
        steps_done?;
        events_done?;
        Ok(out)
    }

    /// A registered definition, from the cache or the table.
    pub async fn definition(&self, name: &str, version: u32) -> Result<Arc<WorkflowDef>, StoreError> {
        if let Some(d) = self.defs.get(name, version) {
            return Ok(d);
        }
        let row = self
            .query_opt("SELECT definition FROM workflows WHERE name = $1 AND version = $2", &[&name, &pg_int(version)?])
            .await?;
        let row = row.ok_or_else(|| StoreError::NotFound { what: "workflow", id: format!("{name} v{version}") })?;
        self.defs.parse(name, version, row.get(0))
    }
}

/// A u32 of ours (a version, a count) as PostgreSQL's INTEGER.
pub fn pg_int(v: u32) -> Result<i32, StoreError> {
    i32::try_from(v)
        .map_err(|_| StoreError::InvalidInput(format!("{v} is larger than the store can hold ({})", i32::MAX)))
}
