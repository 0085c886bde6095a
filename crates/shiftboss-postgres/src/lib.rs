//! The PostgreSQL state store: many schedulers, agents and supervisors, on many machines, share one
//! database (P10, P11).
//!
//! Layout: [`migrate`] checks and migrates the store's schema; one module per group of store
//! operations (`submit`, `claim`, `replies` with `reply_set`, `expire`, `leader`, `reconcile`,
//! `schedulers`, `query`, `tokens`, `enqueue` and `jobs` for retry jobs, `archive` for the history tables);
//! `writes` is the SQL of the shared write path (`shiftboss_store::advance`), which runs the decider
//! inside the transaction that changed a step; `lock` holds the per-task lock (C7), `limits` the
//! per-agent limits of claims, `listen` the due-work channel, `next` the next due times, `planner`
//! the background ANALYZE; `tx`, `rows` and `error` are shared plumbing. SQL lives only in this crate.
//!
//! # Concurrency
//!
//! Writes run at READ COMMITTED. That is enough because every check-then-write is one of:
//!
//! - **one statement with the check in its WHERE**: the claim (`UPDATE ... WHERE id IN (SELECT ...
//!   FOR UPDATE SKIP LOCKED)`), every reply, heartbeat and expiry write (fenced by lease token and
//!   `state = 'processing'`), the election (`INSERT ... ON CONFLICT DO UPDATE ... WHERE`), resign,
//!   and "insert unless it exists" for definitions and task keys (`ON CONFLICT DO NOTHING`, then a
//!   read of the row that won; a key archived to `tasks_history` is read after the insert, see
//!   `writes::archived_owner`);
//! - **done under a row lock**: every operation that runs the decider or moves a task's steps on its
//!   behalf (submit, record_replies, expire_leases, release_instance_claims, resubmit_step,
//!   operate_task and cancel_task, reconcile) locks the task row (`SELECT ... FOR UPDATE`) before
//!   it reads the task's steps, so two deciders never interleave on one task (C7). A task is locked
//!   with all its ancestors (a sub-workflow's child ends by moving its parent on), in ascending id
//!   order, which puts a parent before its child; children are locked below a held parent (a
//!   cancelled parent cancels them). A step is never locked before its task. So these operations
//!   cannot deadlock each other (see `lock`). The archiver takes finished roots `FOR UPDATE SKIP
//!   LOCKED`, then their descendants, so it never moves a task that is being decided and never
//!   waits on a decider (see `archive`). A claim waits for nothing but the rate rows of limited
//!   agents, which claims alone lock, in agent order (see `limits`), so it cannot be part of a
//!   deadlock either. Leader-only writes (the sweep, the reconciler) also hold their leader row FOR
//!   SHARE, so no new term is elected while they run.
//!
//! A serialization failure or deadlock that happens anyway is `Unavailable`: the caller retries.
//!
//! Reads of several statements (get_task, summarize) run in one REPEATABLE READ READ ONLY
//! transaction; single-statement reads need none.
//!
//! # Time
//!
//! With [`Clock::Database`], `now` is read from the database server once per transaction (see
//! `tx::DB_NOW`), so machines whose clocks disagree still agree on when a lease lapsed.

mod ahead;
mod archive;
mod begin;
mod claim;
mod claim_floor;
mod connect;
mod cursors;
mod documents;
mod enqueue;
mod error;
mod expire;
mod fence;
mod jobs;
mod leader;
mod limits;
mod listen;
mod listeners;
mod lock;
pub mod migrate;
mod next;
mod planner;
mod query;
mod rates;
mod reconcile;
mod replication;
mod replies;
mod reply_set;
mod rows;
mod schedulers;
mod stalled;
mod step_logs;
mod stream;
mod submit;
mod tokens;
mod tx;
mod webhooks;
mod workers;
mod writes;

#[doc(hidden)]
pub use claim::{claim_from_floor_statement, claim_statement};
#[doc(hidden)]
pub use fence::fenced_statements;
pub use migrate::SCHEMA_VERSION;
#[doc(hidden)]
pub use query::QUEUE_STATS;
#[doc(hidden)]
pub use tx::{query_generic_alone_on, query_generic_on};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use error::{map_err, pool_err};
use shiftboss_core::buckets::Member;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskId, TaskState, Timestamp};
use shiftboss_store::advance;
use shiftboss_store::*;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::IsolationLevel;
use tx::{Conn, DefCache, Tx};

/// How to connect to the database and which schema holds the store.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The schema that holds the store's tables. Every connection of the store has its
    /// `search_path` set to it. Lower-case letters, digits and underscores.
    pub schema: String,
    /// The most connections this store opens at once.
    pub pool_size: usize,
    /// Apply missing migrations at connect (creating the schema if needed). When false, connect
    /// only checks that the schema is at this build's version, and changes nothing.
    pub run_migrations: bool,
    /// How long one host may take to accept a new connection (TCP, startup, authentication and the
    /// URL's `target_session_attrs` check) before the next host of a multi-host URL is tried. A
    /// primary that is frozen (its processes stopped, its sockets open) is given up after this.
    pub connect_timeout: Duration,
    /// The longest any one transaction or statement of the store may take, and the longest a call
    /// waits for a free connection when all are in use: the client gives up then (the call fails as `Unavailable`, and the
    /// connections the pool holds are closed, as they likely lead to the same silent server),
    /// and the server's `statement_timeout` is set to it too, so that it stops work nobody waits
    /// for. Migrations are exempt.
    pub store_timeout: Duration,
    /// How long a connection may go unanswered (data sent and not acknowledged, or keepalive
    /// probes unanswered) before the client drops it: a statement on a silent network fails then
    /// instead of waiting for the kernel's retransmissions (about 15 minutes).
    pub network_timeout: Duration,
    /// The server ends a session of ours that sits idle inside a transaction this long (a process
    /// that stopped or lost its network mid-transaction), so that its row locks do not outlive it.
    pub idle_in_transaction_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "shiftboss".into(),
            pool_size: 8,
            run_migrations: true,
            connect_timeout: Duration::from_secs(5),
            store_timeout: Duration::from_secs(10),
            network_timeout: Duration::from_secs(30),
            idle_in_transaction_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// For the LISTEN connections of due-work subscriptions.
    config: tokio_postgres::Config,
    defs: DefCache,
    clock: Clock,
    schema: String,
    /// Counts bulk inserts, to analyze when they outgrow the planner's statistics.
    freshness: Arc<planner::Freshness>,
    /// See [`PgOptions::store_timeout`].
    store_timeout: Duration,
    /// See [`PgOptions::connect_timeout`]: for the LISTEN connections.
    connect_timeout: Duration,
    /// Which host of a multi-host URL new connections try first.
    hosts: Arc<connect::Hosts>,
    /// This store's due-work subscribers, rung in process by its own writes.
    own_rings: listen::OwnRings,
    /// One listening connection per channel, shared by this store's subscriptions to it.
    listeners: listeners::Listeners,
    /// Where this store's claims of due steps start (see `claim_floor`).
    claim_floors: claim_floor::ClaimFloors,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("schema", &self.inner.schema).finish()
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`), then migrates the schema or checks its
    /// version (see [`PgOptions::run_migrations`]). A schema written by a newer shiftboss is refused
    /// before anything is changed.
    pub async fn connect(url: &str, opts: &PgOptions) -> Result<Self> {
        Self::connect_with_clock(url, opts, Clock::Database).await
    }

    pub async fn connect_with_clock(url: &str, opts: &PgOptions, clock: Clock) -> Result<Self> {
        migrate::check_schema_name(&opts.schema)?;
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::InvalidInput(format!("database URL: {e}")))?;
        let search_path = format!(
            "-c search_path={} -c idle_in_transaction_session_timeout={} -c statement_timeout={}",
            opts.schema,
            opts.idle_in_transaction_timeout.as_millis(),
            opts.store_timeout.as_millis()
        );
        // JIT compiles a statement whose estimated cost passes `jit_above_cost`; the store's
        // statements are short, and the outbox trigger's (a subquery per message) passes it once
        // the tables are large: 50 to 100 ms of compiling for a few ms of work, on every
        // reply batch (seen with auto_explain; the drain with a channel per task ran at a third of
        // the drain without). Off by default; a URL's own `options` may turn it on again.
        let options = match config.get_options() {
            Some(o) if !o.is_empty() => format!("-c jit=off {o} {search_path}"),
            _ => format!("-c jit=off {search_path}"),
        };
        config.options(options);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(opts.connect_timeout);
        }
        // Bounded waits on a silent network: keepalive probes on an idle connection, and a limit on
        // unacknowledged data for one that is sending (Linux's TCP_USER_TIMEOUT).
        config.keepalives(true);
        config.keepalives_idle(opts.network_timeout / 3);
        config.keepalives_interval(opts.network_timeout / 9);
        config.keepalives_retries(3);
        config.tcp_user_timeout(opts.network_timeout);
        if config.get_application_name().is_none() {
            config.application_name("shiftboss");
        }
        // Each host within its own bound (see `connect`); the pool's bound on a new connection
        // covers them all, one after the other.
        let hosts = Arc::new(connect::Hosts::default());
        let connector = connect::PerHost { timeout: opts.connect_timeout, hosts: hosts.clone() };
        let all_hosts = opts.connect_timeout * connect::host_count(&config) as u32 + Duration::from_secs(1);
        let manager =
            Manager::from_connect(config.clone(), connector, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(opts.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(opts.store_timeout))
            .create_timeout(Some(all_hosts))
            .build()
            .map_err(|e| StoreError::InvalidInput(format!("connection pool: {e}")))?;
        let store = PostgresStore {
            inner: Arc::new(Inner {
                pool,
                config,
                defs: DefCache::default(),
                clock,
                schema: opts.schema.clone(),
                freshness: Default::default(),
                store_timeout: opts.store_timeout,
                connect_timeout: opts.connect_timeout,
                hosts,
                own_rings: listen::OwnRings::default(),
                listeners: Default::default(),
                claim_floors: Default::default(),
            }),
        };
        if opts.run_migrations {
            store.migrate().await?;
        } else {
            let c = store.inner.pool.get().await.map_err(pool_err)?;
            let schema = store.inner.schema.clone();
            store.bounded(async move { migrate::check(&c, &schema).await }).await?;
        }
        Ok(store)
    }

    /// Applies the migrations this build knows that the schema lacks (creating the schema if it
    /// does not exist) and returns how many it applied. Safe to run from many processes at once.
    pub async fn migrate(&self) -> Result<usize> {
        let mut c = self.inner.pool.get().await.map_err(pool_err)?;
        migrate::migrate(&mut c, &self.inner.schema).await
    }

    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// Runs `f` in one READ COMMITTED transaction with the store's `now`, and commits if it succeeds.
    /// An error rolls everything back. BEGIN goes with the clock's read, and the transaction's
    /// last statements (its steps written ahead, its events) with the COMMIT, and the due-work
    /// notification, when it queued work, right behind the COMMIT (see `listen::ring_after_commit`):
    /// a write costs its own statements plus two round trips.
    async fn write<T>(&self, f: impl AsyncFnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        let c = self.inner.pool.get().await.map_err(pool_err)?;
        self.bounded(self.write_on(c, f)).await
    }

    /// `wake` rung by the LISTEN connection on `channel` (one per channel, shared by this store's
    /// subscriptions), within the store's bounds and trying the hosts as the pool does. With
    /// `own_writes`, also rung in process by this store's writes that queue work, right after
    /// their commit (the due-work channel: see `listen::OwnRings`); the outbox's channel is rung by
    /// its trigger alone, only when deliveries were written.
    ///
    /// A quiet listener asks its server for an answer every `store_timeout`, to find a server that
    /// went silent (and a promoted standby) soon; the outbox's, whose lost rings only wait for the
    /// dispatcher's poll, asks six times less often: each question is a transaction of an idle
    /// process.
    fn listen(&self, channel: String, own_writes: bool, wake: WakeFn) -> Subscription {
        let i = &self.inner;
        let quiet = if own_writes { i.store_timeout } else { i.store_timeout * 6 };
        let bounds = listen::Bounds { connect: i.connect_timeout, answer: i.store_timeout, quiet };
        let own = own_writes.then_some(&i.own_rings);
        i.listeners.subscribe(channel.clone(), own_writes, wake, |ring| {
            listen::subscribe(i.config.clone(), bounds, i.hosts.clone(), channel, own, ring)
        })
    }

    /// Runs `call`, the statements of one call on a connection it holds, within
    /// [`PgOptions::store_timeout`]. When the database does not answer in time, the call's
    /// connection is dropped (a write's is closed, see `begin`) and the pool's idle connections are
    /// closed too: they lead to the same server, likely as silent (a frozen primary, a cut
    /// network), and each would hold its next caller for the whole bound again. The next call
    /// connects afresh, host by host, and so finds a promoted standby.
    async fn bounded<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        // A statement of its own, so that the call (and the connection it owns) is dropped, back
        // to the pool, before the pool is emptied below.
        let answered = tokio::time::timeout(self.inner.store_timeout, call).await;
        match answered {
            Ok(r) => r,
            Err(_) => {
                self.inner.pool.retain(|_, _| false);
                self.inner.hosts.suspect(&self.inner.config);
                Err(StoreError::Unavailable(format!(
                    "the database did not answer within {:?}",
                    self.inner.store_timeout
                )))
            }
        }
    }

    async fn write_on<T>(&self, c: deadpool_postgres::Object, f: impl AsyncFnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        let (mut w, now) = begin::WriteConn::begin(c, &self.inner.clock).await?;
        let client = w.client()?;
        let t = Tx::new(Conn::new(client, w.cache()), now, &self.inner.defs);
        let out = match f(&t).await {
            Ok(out) => out,
            Err(e) => {
                drop(t);
                w.rollback().await;
                return Err(e);
            }
        };
        fault::reached(fault::FaultPoint::BeforeCommit);
        let ring = t.due_now.load(std::sync::atomic::Ordering::Relaxed).then(|| listen::channel(&self.inner.schema));
        let commit = async {
            let (committed, ()) = futures_util::future::join(begin::WriteConn::commit(client), async {
                if let Some(channel) = &ring {
                    listen::ring_after_commit(client, channel, self.inner.own_rings.nonce()).await;
                }
            })
            .await;
            committed
        };
        let committed = t.finish_with(None, commit).await;
        drop(t);
        match committed {
            Ok(Ok(())) => w.ended(),
            // The COMMIT failed, or ran after a failed statement and rolled back: the transaction
            // is over either way.
            Ok(Err(e)) | Err(e) => {
                w.rollback().await;
                return Err(e);
            }
        }
        if ring.is_some() {
            self.inner.own_rings.ring();
        }
        fault::reached(fault::FaultPoint::AfterCommit);
        Ok(out)
    }

    /// Runs `f` in one REPEATABLE READ READ ONLY transaction: every statement sees one snapshot.
    async fn snapshot<T>(&self, f: impl AsyncFnOnce(Conn<'_>) -> Result<T>) -> Result<T> {
        let mut c = self.inner.pool.get().await.map_err(pool_err)?;
        self.bounded(async move {
            let tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(map_err)?;
            let out = f(Conn::new(tx.client(), Some(&tx.statement_cache))).await?;
            // Nothing was written: the commit only ends the snapshot.
            tx.commit().await.map_err(map_err)?;
            Ok(out)
        })
        .await
    }

    /// Runs one statement's read outside any explicit transaction.
    async fn read<T>(&self, f: impl AsyncFnOnce(Conn<'_>) -> Result<T>) -> Result<T> {
        let c = self.inner.pool.get().await.map_err(pool_err)?;
        self.bounded(async move { f(Conn::new(&c, Some(&c.statement_cache))).await }).await
    }
}

/// Submits a task inside the caller's own transaction, so that an application writes its business
/// record (the order row) and the task atomically (P12): both commit or neither does.
///
/// `schema` is the store's schema (as in [`PgOptions::schema`]). The caller's `search_path` is
/// set to it for the statements of this call only and put back before it returns, so the caller's
/// own unqualified table names resolve as before. Time is the database's clock. The caller
/// commits; schedulers notice the new task at their next poll. After an error other than
/// `InvalidInput` or `Conflict` the transaction may be aborted (as after any failed statement)
/// and must be rolled back.
pub async fn submit_task_in(tx: &tokio_postgres::Transaction<'_>, schema: &str, p: &SubmitTask) -> Result<Submitted> {
    p.validate()?;
    migrate::check_schema_name(schema)?;
    in_schema(tx, schema, async |t| submit::submit(t, p).await).await
}

/// Enqueues retry jobs inside the caller's own transaction (M1, P12): the business record and the
/// jobs commit together or not at all. Like [`submit_task_in`]: `schema` is the store's schema,
/// the caller's `search_path` is put back before this returns, time is the database's clock, and
/// the caller commits (listeners are notified then, if a job is due now). On `InvalidInput` or
/// `Conflict` no job of this call is left in the transaction (a handler's job workflow registered
/// on first use may be); after another error it may be aborted and must be rolled back.
pub async fn enqueue_jobs_in(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
    p: &EnqueueJobs,
) -> Result<Vec<Submitted>> {
    check_batch(p)?;
    migrate::check_schema_name(schema)?;
    in_schema(tx, schema, async |t| enqueue::enqueue(t, &p.jobs, &p.actor).await).await
}

/// Refuses a batch before anything is written.
fn check_batch(p: &EnqueueJobs) -> Result<()> {
    if p.jobs.len() > MAX_ENQUEUE_BATCH {
        return Err(StoreError::InvalidInput(format!("at most {MAX_ENQUEUE_BATCH} jobs per call")));
    }
    p.jobs.iter().try_for_each(EnqueueJob::validate)
}

/// Runs `f` in a caller's transaction with its `search_path` set to the store's schema for the
/// call, and the database's clock; notifies listeners (at the caller's commit) if `f` made work due.
async fn in_schema<T>(
    tx: &tokio_postgres::Transaction<'_>,
    schema: &str,
    f: impl AsyncFnOnce(&Tx<'_>) -> Result<T>,
) -> Result<T> {
    // The caller's path, the store's set in its place, and the clock: one statement. The subquery
    // (kept apart by OFFSET 0) reads the path before the outer select list changes it.
    // The caller's connection may be the first on a server promoted since the store's last
    // connection: its sequences are raised before this call draws an id (migration 16).
    let begin = format!(
        "SELECT s.saved, set_config('search_path', $1, true), {}, {}.raise_id_floors($2) \
           FROM (SELECT current_setting('search_path') AS saved OFFSET 0) s",
        tx::DB_NOW_EXPR,
        migrate::ident(schema)
    );
    let row = tx.query_one(&begin, &[&migrate::ident(schema), &schema]).await.map_err(map_err)?;
    let saved: String = rows::get(&row, 0)?;
    let now = Timestamp(rows::get(&row, 2)?);
    let set = "SELECT set_config('search_path', $1, true)";
    let db = Conn::new(tx.client(), None);
    let defs = DefCache::default();
    let restore = async || tx.execute(set, &[&saved]).await.map_err(map_err);
    let t = Tx::new(db, now, &defs);
    let (out, restored) = match f(&t).await {
        // The call's last statements, pipelined with the caller's path put back.
        Ok(s) => match t.finish_with(Some(schema), restore()).await {
            Ok(restored) => (Ok(s), restored),
            Err(e) => (Err(e), Ok(0)),
        },
        Err(e) => (Err(e), restore().await),
    };
    // The caller's path is put back whatever happened; unless the transaction is aborted (then the
    // caller must roll back anyway, and the call's own error is the one to report).
    let out = out?;
    restored?;
    Ok(out)
}

#[async_trait]
impl Store for PostgresStore {
    async fn now(&self) -> Result<Timestamp> {
        match &self.inner.clock {
            Clock::Manual(m) => Ok(m.now()),
            Clock::Database => self.read(async |c| tx::db_now(&c).await).await,
        }
    }

    async fn register_workflow(&self, def: &WorkflowDef) -> Result<RegisterOutcome> {
        self.write(async |t| submit::register_workflow(t, def).await).await
    }

    async fn get_workflow(&self, name: &str, version: Option<u32>) -> Result<Option<WorkflowDef>> {
        self.read(async |c| query::get_workflow(c, &self.inner.defs, name, version).await).await
    }

    async fn submit_task(&self, p: SubmitTask) -> Result<Submitted> {
        p.validate()?;
        self.write(async |t| submit::submit(t, &p).await).await
    }

    async fn submit_tasks(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>> {
        validate_batch(&tasks)?;
        let out = self.write(async |t| submit::submit_many(t, &tasks).await).await?;
        self.inner.freshness.wrote(out.len() as u64, &self.inner.pool);
        Ok(out)
    }

    async fn submit_tasks_and_claim(
        &self,
        tasks: Vec<SubmitTask>,
        claims: Vec<ClaimDueSteps>,
    ) -> Result<SubmittedAndClaimed> {
        validate_batch(&tasks)?;
        let out = self
            .write(async |t| {
                let submitted = submit::submit_many(t, &tasks).await?;
                let claimed = claim::claim_after_writes(t, &claims).await?;
                Ok(SubmittedAndClaimed { submitted, claimed })
            })
            .await?;
        self.inner.freshness.wrote(out.submitted.len() as u64, &self.inner.pool);
        Ok(out)
    }

    async fn claim_due_work(&self, p: ClaimDueSteps) -> Result<ClaimedWork> {
        if !claim::has_limited_agent(&p) {
            let manual = match &self.inner.clock {
                Clock::Database => None,
                Clock::Manual(m) => Some(m.now()),
            };
            let c = self.inner.pool.get().await.map_err(pool_err)?;
            // One statement commits on its own: a crash before it has sent nothing, after it the
            // claim is committed, as for a transaction's commit.
            fault::reached(fault::FaultPoint::BeforeCommit);
            let work = self
                .bounded(async move {
                    claim::claim_work_at_once(
                        &Conn::new(&c, Some(&c.statement_cache)),
                        &p,
                        manual,
                        &self.inner.claim_floors,
                    )
                    .await
                })
                .await?;
            fault::reached(fault::FaultPoint::AfterCommit);
            return Ok(work);
        }
        self.write(async |t| {
            let steps = claim::claim_due_steps(t, &p).await?;
            // A full claim may leave more due now: the caller claims again at once.
            let next_due = if steps.len() < p.limit as usize { next::next_claimable(t, &p).await? } else { None };
            Ok(ClaimedWork { steps, now: t.now, next_due })
        })
        .await
    }

    async fn record_replies(&self, p: RecordReplies) -> Result<Vec<ReplyOutcome>> {
        if p.replies.is_empty() {
            return Ok(Vec::new());
        }
        self.write(async |t| replies::record_replies(t, p.instance.as_str(), &p.replies, &p.policies).await).await
    }

    async fn sweep(&self, p: ExpireLeases) -> Result<Swept> {
        self.write(async |t| {
            let report = expire::expire_leases(t, &p.leader, p.limit, &p.policies).await?;
            let (next_complete_by, next_due) = next::after_sweep(t).await?;
            Ok(Swept { report, now: t.now, next_complete_by, next_due })
        })
        .await
    }

    async fn release_instance_claims(&self, p: ReleaseInstanceClaims) -> Result<ExpiryReport> {
        self.write(async |t| expire::release_instance_claims(t, p.instance.as_str(), &p.policies).await).await
    }

    async fn elect_leader(&self, p: ElectLeader) -> Result<Option<LeaderTerm>> {
        self.write(async |t| leader::elect(t, &p).await).await
    }

    async fn resign_leader(&self, term: &LeaderTerm) -> Result<()> {
        self.write(async |t| leader::resign(t, term).await).await
    }

    async fn resubmit_step(&self, p: ResubmitStep) -> Result<()> {
        p.validate()?;
        self.write(async |t| advance::resubmit_step(t, &p).await).await
    }

    async fn cancel_task(&self, p: CancelTask) -> Result<()> {
        let p = OperateTask::from(p);
        p.validate()?;
        self.write(async |t| advance::operate_task(t, &p).await).await
    }

    async fn operate_task(&self, p: OperateTask) -> Result<()> {
        p.validate()?;
        self.write(async |t| advance::operate_task(t, &p).await).await
    }

    async fn reconcile_pass(&self, p: Reconcile) -> Result<Reconciled> {
        self.write(async |t| {
            let report = reconcile::reconcile(t, &p).await?;
            Ok(Reconciled { report, now: t.now, next_at: next::after_reconcile(t).await? })
        })
        .await
    }

    async fn extend_lease(&self, p: ExtendLease) -> Result<Timestamp> {
        p.validate()?;
        self.write(async |t| claim::extend_lease(t, &p).await).await
    }

    async fn enqueue_jobs(&self, p: EnqueueJobs) -> Result<Vec<Submitted>> {
        check_batch(&p)?;
        let out = self.write(async |t| enqueue::enqueue(t, &p.jobs, &p.actor).await).await?;
        self.inner.freshness.wrote(out.len() as u64, &self.inner.pool);
        Ok(out)
    }

    async fn list_jobs(&self, q: JobQuery) -> Result<Vec<JobRecord>> {
        q.validate()?;
        self.read(async |c| jobs::list(c, &q).await).await
    }

    async fn find_job(&self, job: JobRef) -> Result<Option<JobRecord>> {
        self.read(async |c| jobs::find(c, &job).await).await
    }

    async fn resubmit_jobs(&self, p: ResubmitJobs) -> Result<ResubmitReport> {
        p.query.validate()?;
        self.write(async |t| jobs::resubmit(t, &p).await).await
    }

    async fn archive(&self, p: Archive) -> Result<ArchiveReport> {
        self.write(async |t| archive::archive(t, &p).await).await
    }

    async fn archive_task(&self, p: ArchiveTask) -> Result<ArchiveReport> {
        p.validate()?;
        self.write(async |t| archive::archive_task(t, &p).await).await
    }

    async fn list_workflows(&self) -> Result<Vec<WorkflowSummary>> {
        self.read(async |c| query::list_workflows(c).await).await
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        self.snapshot(async |c| query::get_task(c, id, query::Place::Hot, None).await).await
    }

    async fn get_archived_task(&self, id: TaskId) -> Result<Option<TaskDetail>> {
        self.snapshot(async |c| query::get_task(c, id, query::Place::History, None).await).await
    }

    async fn get_task_head(&self, id: TaskId, archived: bool, events: u32) -> Result<Option<TaskDetail>> {
        let place = if archived { query::Place::History } else { query::Place::Hot };
        self.snapshot(async |c| query::get_task(c, id, place, Some(events)).await).await
    }

    async fn find_archived_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        self.read(async |c| query::find_task_by_key(c, key, query::Place::History).await).await
    }

    async fn find_task_by_key(&self, key: &str) -> Result<Option<TaskRecord>> {
        self.read(async |c| query::find_task_by_key(c, key, query::Place::Hot).await).await
    }

    async fn list_tasks(&self, p: ListTasks) -> Result<Vec<TaskRecord>> {
        p.validate()?;
        self.read(async |c| query::list_tasks(c, &p).await).await
    }

    async fn summarize(&self) -> Result<Summary> {
        self.snapshot(async |c| query::summarize(c).await).await
    }

    async fn task_counts(&self) -> Result<Vec<(TaskState, u64)>> {
        self.read(async |c| query::task_counts(c).await).await
    }

    async fn heartbeat(&self, p: Heartbeat) -> Result<Vec<Member>> {
        self.write(async |t| schedulers::heartbeat(t, &p).await).await
    }

    async fn sign_off(&self, instance: &InstanceId) -> Result<()> {
        self.write(async |t| schedulers::sign_off(t, instance).await).await
    }

    fn subscribe_due_work(&self, wake: WakeFn) -> Subscription {
        self.listen(listen::channel(&self.inner.schema), true, wake)
    }

    /// Half the pool, at most four: commits of separate transactions flush together, and the
    /// other half is left to claims, replies and reads. Four measured best with 8 connections.
    fn concurrent_writes(&self) -> usize {
        (self.inner.pool.status().max_size / 2).clamp(1, 4)
    }

    async fn create_api_token(&self, p: NewApiToken) -> Result<ApiToken> {
        p.validate()?;
        self.write(async |t| tokens::create(t, &p).await).await
    }

    async fn find_api_token(&self, secret_hash: &str) -> Result<Option<ApiToken>> {
        self.read(async |c| tokens::find(c, secret_hash).await).await
    }

    async fn list_api_tokens(&self) -> Result<Vec<ApiToken>> {
        self.read(async |c| tokens::list(c).await).await
    }

    async fn revoke_api_token(&self, name: &str) -> Result<bool> {
        self.write(async |t| tokens::revoke(t, name).await).await
    }

    async fn task_events(&self, p: TaskEvents) -> Result<Vec<EventRecord>> {
        p.validate()?;
        self.read(async |c| query::task_events(c, &p).await).await
    }

    async fn read_events(&self, p: ReadEvents) -> Result<EventsRead> {
        p.validate()?;
        self.read(async |c| stream::read_events(c, &p).await).await
    }

    async fn queue_stats(&self) -> Result<QueueStats> {
        let now = self.now().await?;
        self.read(async |c| query::queue_stats(c, now).await).await
    }

    async fn bulk_operate(&self, p: BulkOperate) -> Result<BulkReport> {
        p.validate()?;
        let ids = self.read(async |c| query::task_ids(c, &p.filter, p.limit + 1).await).await?;
        let p = &p;
        Ok(shiftboss_store::bulk::run_bulk(p, ids, |id| self.write(async move |t| advance::bulk_act(t, id, p).await))
            .await)
    }

    async fn record_workers_seen(&self, p: WorkersSeen) -> Result<()> {
        p.validate()?;
        self.write(async |t| workers::record_seen(t, &p).await).await
    }

    async fn list_agent_workers(&self) -> Result<Vec<AgentWorker>> {
        self.read(async |c| workers::list(c).await).await
    }

    async fn create_subscription(&self, p: NewSubscription) -> Result<SubscriptionRecord> {
        p.validate()?;
        self.write(async |t| webhooks::create(t, &p).await).await
    }

    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>> {
        self.read(async |c| webhooks::list(c).await).await
    }

    async fn get_subscription(&self, id: i64) -> Result<Option<SubscriptionRecord>> {
        self.read(async |c| webhooks::get_one(c, id).await).await
    }

    async fn set_subscription_state(&self, p: SetSubscriptionState) -> Result<SubscriptionRecord> {
        self.write(async |t| webhooks::set_state(t, &p).await).await
    }

    async fn delete_subscription(&self, id: i64) -> Result<bool> {
        self.write(async |t| webhooks::delete(t, id).await).await
    }

    async fn claim_deliveries(&self, p: ClaimDeliveries) -> Result<ClaimedDeliveries> {
        self.write(async |t| webhooks::claim(t, &p).await).await
    }

    async fn record_deliveries(&self, outcomes: Vec<DeliveryOutcome>) -> Result<Vec<bool>> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.write(async |t| webhooks::record(t, &outcomes).await).await
    }

    async fn delivery_backlog(&self, cap: u32) -> Result<DeliveryBacklog> {
        let now = self.now().await?;
        self.read(async |c| webhooks::backlog(c, cap, now).await).await
    }

    async fn list_deliveries(&self, q: DeliveryQuery) -> Result<Vec<DeliveryRecord>> {
        self.read(async |c| webhooks::list_deliveries(c, &q).await).await
    }

    async fn get_delivery(&self, id: i64) -> Result<Option<DeliveryRecord>> {
        self.read(async |c| webhooks::get_delivery(c, id).await).await
    }

    async fn redeliver(&self, p: Redeliver) -> Result<RedeliverReport> {
        p.validate()?;
        self.write(async |t| webhooks::redeliver(t, &p).await).await
    }

    /// The outbox trigger rings the schema's outbox channel at the commit of a transaction that
    /// wrote deliveries, whichever process wrote it.
    fn subscribe_deliveries(&self, wake: WakeFn) -> Subscription {
        self.listen(webhooks::channel(&self.inner.schema), false, wake)
    }

    async fn replication(&self) -> Result<Option<Replication>> {
        self.read(async |c| replication::read(c).await).await.map(Some)
    }

    async fn read_cursor(&self, name: &str) -> Result<Option<i64>> {
        shiftboss_store::cursors::validate_cursor_name(name)?;
        self.read(async |c| cursors::read(c, name).await).await
    }

    async fn advance_cursor(&self, name: &str, to: i64) -> Result<()> {
        shiftboss_store::cursors::validate_cursor_name(name)?;
        shiftboss_store::cursors::validate_cursor_position(to)?;
        self.write(async |t| cursors::advance(t, name, to).await).await
    }

    async fn put_documents(&self, kind: DocumentKind, docs: Vec<(String, serde_json::Value)>) -> Result<()> {
        shiftboss_store::documents::validate_documents(&docs)?;
        self.write(async |t| documents::put(t, kind, &docs).await).await
    }

    async fn list_documents(&self, kind: DocumentKind) -> Result<Vec<(String, serde_json::Value)>> {
        self.read(async |c| documents::list(c, kind).await).await
    }

    async fn get_document(&self, kind: DocumentKind, name: &str) -> Result<Option<serde_json::Value>> {
        self.read(async |c| documents::get_one(c, kind, name).await).await
    }

    async fn delete_document(&self, kind: DocumentKind, name: &str) -> Result<bool> {
        self.write(async |t| documents::delete(t, kind, name).await).await
    }

    async fn append_step_logs(&self, p: StepLogs) -> Result<()> {
        p.validate()?;
        self.write(async |t| step_logs::append(t, &p).await).await
    }

    async fn step_logs(&self, step: shiftboss_core::StepId) -> Result<Vec<EventRecord>> {
        self.read(async |c| step_logs::read(c, step).await).await
    }

    async fn count_events(&self, p: CountEvents) -> Result<EventCounts> {
        p.validate()?;
        self.read(async |c| rates::count(c, &p).await).await
    }

    async fn stalled_tasks(&self, p: StalledTasks) -> Result<Vec<StalledTask>> {
        p.validate()?;
        self.read(async |c| stalled::find(c, &p).await).await
    }
}
