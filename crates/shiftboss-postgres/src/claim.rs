//! The scheduler's claim (P14): due Pending steps become Processing under one instance's lease.
//!
//! One statement picks, locks, updates and records. `picked` locks the rows it picks with
//! FOR UPDATE SKIP LOCKED, so concurrent claimers (in this process or another) each take other
//! rows instead of queueing behind one another, and a row changed since the statement's snapshot is
//! re-checked against `state = 'pending'` before it is locked. Claims take no task lock: they
//! touch no other step of the task and run no decider.
//!
//! `picked` is a MATERIALIZED CTE, not `UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP
//! LOCKED)`: the planner may run that subquery as the inner side of a nested-loop semi join, once per
//! outer row, and each rerun skips the rows this statement has just updated and returns the next
//! ones, so one claim takes more than `n` steps. A materialized CTE runs once.
//!
//! The update finds the picked rows by id alone (`id = ANY(ARRAY(...))`), so that its only index is
//! the primary key: one lookup per picked step whatever the planner believes. Joined to `picked`,
//! or with `state = 'pending'` repeated (which lets it read the pending steps' partial indexes), it
//! was planned from the table's statistics: with a million finished steps analyzed and few pending
//! (a store whose archiver is off), the planner expected one pending row and scanned every pending
//! step once per picked id (60,000 comparisons for 100 steps over 600 pending; a claim went from
//! 4-5 to 12-19 ms). Repeating the state adds no safety: `picked` locked each row after checking
//! that its newest version is pending, and no other transaction can change it until this one ends.
//!
//! Agents with a concurrency or rate limit are claimed on their own, within what the limit leaves
//! (see `limits`).
//!
//! The lease token grows by 1 plus a random number below 2^31 at each claim, not by 1 (issue 26):
//! a standby promoted without the last commits has the step's older token, and a claim counted
//! up from it would hand out again a token that a holder of the lost claim still carries, whose
//! reply would then be taken for the new claim's. Random steps make that a 1-in-2^31 chance
//! while tokens still grow, as the fence's readers (and the chaos audit) expect. 2^32 claims of
//! one step fit below i64::MAX.

use crate::claim_floor::{self, ClaimFloors};
use crate::limits::{Allowances, lock_limited};
use crate::next::next_claimable_expr;
use crate::rows::{get, json};
use crate::tx::{Conn, DB_NOW_EXPR, Tx};
use shiftboss_core::{LeaseToken, StepId, TaskId, Timestamp};
use shiftboss_store::{AgentLimit, ClaimDueSteps, ClaimedStep, ClaimedWork, ExtendLease, StoreError, event_kind as ev};
use std::sync::LazyLock;
use tokio_postgres::Row;

/// The claim statement: it picks, locks, updates and records, and reports the store's time and the
/// next due time of what it left, so that a claim without limited agents is one statement and one
/// round trip ([`claim_work_at_once`]).
///
/// `$2` is the store's time when the caller has it (a transaction's, a manual clock's); NULL takes
/// the database's clock, read once in `clock`. With a response timeout, complete-by starts at the
/// first response window; heartbeats move it on (see [`extend_lease`]). A step routed to a domain
/// is claimed only by an instance serving it, until its fallback time.
///
/// `next` is read only when the caller asks (`$8`: a claim of several agent groups reads it once,
/// for all its agents, in `next::next_claimable`) and the claim took fewer than its limit: a full
/// claim may leave more due now, and the fallback part reads every step due now (tens of thousands
/// in a drain). It reads the statement's snapshot, from before the claim: the steps it counts are due after now, or due now
/// but not this claimer's, which the claim does not touch. It is MATERIALIZED so that it runs once,
/// not once per claimed row. The last SELECT returns one row even when nothing was claimed. It
/// reads each claimed step's task key (a primary-key lookup per step, for every claimer: a remote
/// worker's poll hands it out; the in-process drain moved within its noise, 2026-11-28).
///
/// It runs with its generic plan ([`Conn::query_generic`]). Left to choose, PostgreSQL planned it
/// anew at every execution: the generic plan's cost, with `LIMIT $4` unknown, looked higher than
/// a plan for the limit given, so the custom plan always won, at about 1 ms of planning per claim
/// (`pg_stat_statements` with `track_planning`: 1,207 ms of planning for 1,127 claims of a
/// 64-slot drain, more than the claims' execution). What the plan does hangs on no parameter's
/// value: the pick reads `steps_due` in its order and stops at the limit, and the update finds
/// the picked rows by primary key (above).
static CLAIM: LazyLock<String> = LazyLock::new(|| claim_sql("", &pick_from_front("picked", ""), ""));

/// The claim as a statement that commits on its own ([`claim_work_at_once`]), without waiting for
/// its WAL flush: see [`claim_work_at_once`].
static CLAIM_AT_ONCE: LazyLock<String> = LazyLock::new(|| claim_sql(LAZY, &pick_from_front("picked", ""), ""));

/// [`CLAIM_AT_ONCE`] reading the steps due from `$9` on, and from the front when there are none
/// (see `claim_floor`).
static CLAIM_AT_ONCE_FROM_FLOOR: LazyLock<String> =
    LazyLock::new(|| claim_sql(LAZY, &pick_from_floor(), ", NOT EXISTS (SELECT 1 FROM from_floor)"));

const LAZY: &str = ", set_config('synchronous_commit', 'off', true) AS lazy";

/// Which due steps this claimer may take: its agents, its buckets, and its domains (or any domain
/// once the step's fallback time has come).
const CLAIMABLE: &str = "agent = ANY($3)
       AND ($6::int[] IS NULL OR bucket = ANY($6))
       AND (domain IS NULL OR domain = ANY($7) OR fallback_at <= (SELECT now FROM clock))";

/// The CTE `name`: the due steps to claim, highest priority first, read from the front of
/// `steps_due`; `gate` is a condition of its own (with its AND), or nothing.
fn pick_from_front(name: &str, gate: &str) -> String {
    format!(
        "{name} AS MATERIALIZED (
    SELECT id FROM steps
     WHERE {gate}state = 'pending' AND due_at <= (SELECT now FROM clock) AND {CLAIMABLE}
     ORDER BY priority DESC, due_at, id
     LIMIT $4
       FOR UPDATE SKIP LOCKED
)"
    )
}

/// The same, among the steps due from `$9` on, and from the front only when there are none:
/// `due` reads them by due time (`steps_next_due`, whose range starts there, past the dead entries
/// before it), `from_floor` orders them as the front's pick does and locks the first `$4` it can,
/// skipping those another claim holds; `from_front` is the front's pick, which runs only when
/// `from_floor` took nothing (a one-time filter): a step due before the floor (a late commit) is
/// taken in the same round trip. `due` is MATERIALIZED so that the planner cannot read it
/// through `steps_due` from its front. It reads 4,097 steps at most: past 4,096 due since the
/// floor (a burst of submissions since the last claim), ordering them all would cost more than
/// the front's read (some 3 µs a step), so `from_floor` takes nothing and the front is read. The
/// statement's last column says whether the front was read.
fn pick_from_floor() -> String {
    let from_front = pick_from_front("from_front", "NOT EXISTS (SELECT 1 FROM from_floor) AND ");
    format!(
        "due AS MATERIALIZED (
    SELECT id, priority, due_at FROM steps
     WHERE state = 'pending' AND due_at >= $9 AND due_at <= (SELECT now FROM clock) AND {CLAIMABLE}
     ORDER BY due_at
     LIMIT 4097
), from_floor AS MATERIALIZED (
    SELECT s.id FROM due d JOIN steps s ON s.id = d.id
     WHERE (SELECT count(*) FROM due) <= 4096 AND s.state = 'pending'
     ORDER BY d.priority DESC, d.due_at, d.id
     LIMIT $4
       FOR UPDATE OF s SKIP LOCKED
), {from_front}, picked AS MATERIALIZED (
    SELECT id FROM from_floor UNION ALL SELECT id FROM from_front
)"
    )
}

fn claim_sql(clock_extra: &str, pick: &str, out_extra: &str) -> String {
    format!(
        "
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::bigint, ({DB_NOW_EXPR})) AS now{clock_extra}
), {pick}, claimed AS (
    UPDATE steps s SET state = 'processing', locked_by = $1,
           complete_by = least(c.now + least(s.timeout_ms, coalesce(s.response_timeout_ms, s.timeout_ms)), s.deadline_at),
           claimed_at = c.now, lease_token = s.lease_token + 1 + floor(random() * 2147483648)::bigint, attempts = s.attempts + 1, updated_at = c.now
      FROM clock c
     WHERE s.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING s.id, s.task_id, s.name, s.agent, s.lease_token, s.complete_by, s.attempts, s.input, s.config,
              s.idempotency_key, s.progress
), recorded AS (
    INSERT INTO events (task_id, step_id, at, kind, level, actor, detail)
    SELECT task_id, id, (SELECT now FROM clock), $5, 'info', $1,
           json_build_object('lease_token', lease_token, 'complete_by', complete_by, 'attempt', attempts)::text
      FROM claimed
     ORDER BY id
), next AS MATERIALIZED (
    SELECT CASE WHEN $8 AND (SELECT count(*) FROM claimed) < $4 THEN {next} END AS at FROM clock
)
SELECT c.now, n.at, s.id, s.task_id, s.name, s.agent, s.lease_token, s.complete_by, s.attempts, s.input, s.config,
       s.idempotency_key, (SELECT t.task_key FROM tasks t WHERE t.id = s.task_id), s.progress{out_extra}
  FROM clock c CROSS JOIN next n LEFT JOIN claimed s ON true",
        next = next_claimable_expr("now", "$3", "$6", "$7")
    )
}

/// The claim statement's text, for tests that read its plan.
#[doc(hidden)]
pub fn claim_statement() -> &'static str {
    &CLAIM
}

/// The claim from a floor's text, for tests that read its plan.
#[doc(hidden)]
pub fn claim_from_floor_statement() -> &'static str {
    &CLAIM_AT_ONCE_FROM_FLOOR
}

/// Which claim statement runs.
#[derive(Debug, Clone, Copy)]
enum Statement {
    /// [`CLAIM`], in the caller's transaction.
    InTransaction,
    /// [`CLAIM_AT_ONCE`].
    AtOnce,
    /// [`CLAIM_AT_ONCE_FROM_FLOOR`], from this due time.
    AtOnceFrom(Timestamp),
}

impl Statement {
    fn text(self) -> &'static str {
        match self {
            Statement::InTransaction => &CLAIM,
            Statement::AtOnce => &CLAIM_AT_ONCE,
            Statement::AtOnceFrom(_) => &CLAIM_AT_ONCE_FROM_FLOOR,
        }
    }
}

/// What a claim statement returned: the store's time, the next due time of what it left, and the
/// steps it claimed.
struct Claimed {
    now: Timestamp,
    /// Whether it read the due steps from the front.
    from_front: bool,
    next_due: Option<Timestamp>,
    steps: Vec<ClaimedStep>,
}

async fn run_claim(
    c: &Conn<'_>,
    p: &ClaimDueSteps,
    now: Option<Timestamp>,
    agents: &[String],
    limit: u32,
    want_next: bool,
    statement: Statement,
) -> Result<Claimed, StoreError> {
    let buckets: Option<Vec<i32>> = p.buckets.as_ref().map(|b| b.iter().map(|&x| i32::from(x)).collect());
    let now = now.map(|t| t.0);
    let limit = i64::from(limit);
    let floor = match statement {
        Statement::AtOnceFrom(floor) => Some(floor.0),
        Statement::InTransaction | Statement::AtOnce => None,
    };
    let instance = p.instance.as_str();
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
        vec![&instance, &now, &agents, &limit, &ev::STEP_CLAIMED, &buckets, &p.domains, &want_next];
    if let Some(floor) = &floor {
        params.push(floor);
    }
    let rows = match statement {
        Statement::InTransaction => c.query_generic(statement.text(), &params).await?,
        Statement::AtOnce | Statement::AtOnceFrom(_) => c.query_generic_alone(statement.text(), &params).await?,
    };
    let first = rows.first().ok_or_else(|| StoreError::Backend("the claim statement returned no row".into()))?;
    let now = Timestamp(get(first, 0)?);
    let next_due = get::<Option<i64>>(first, 1)?.map(Timestamp);
    let from_front = match floor {
        // The column after the claimed step's (`claimed_step` reads 2..=13).
        Some(_) => get::<bool>(first, 14)?,
        None => true,
    };
    let mut steps = Vec::with_capacity(rows.len());
    for r in &rows {
        // The one row of a claim that took nothing has no step.
        if get::<Option<i64>>(r, 2)?.is_some() {
            steps.push(claimed_step(r, 2, now)?);
        }
    }
    Ok(Claimed { now, from_front, next_due, steps })
}

/// A claim with no limited agent (see [`has_limited_agent`]), as one statement that commits on its
/// own: one round trip and one commit, where a transaction took five (begin, the clock, the claim,
/// the next due time, commit); that is most of an idle scheduler's pickup latency. `now` is the
/// store's manual clock, if it has one.
///
/// Its commit does not wait for the WAL flush (`synchronous_commit` off for this statement only):
/// a claim lost in a crash of PostgreSQL, or missing on a promoted standby, is the case the
/// random token step above is for. The step is pending again under its older token, is claimed
/// again under a new one, and the lost claim's holder is refused (`lease_lost`) when it replies or
/// beats: the step runs again, as after any lapsed lease, and nothing it did is recorded twice.
/// Every write that records an outcome (a reply, a sweep, a submission) still waits for its flush,
/// which carries every earlier record of the WAL, the claims included. Measured: a waiting remote
/// worker's claim of a new step went from 1.7-1.9 to 0.9-1.1 ms at p50 (issue 17).
///
/// It starts from the floor that `floors` keeps for its shape, when there is one (see
/// `claim_floor`); a claim that finds nothing past the floor reads from the front, in the same
/// statement.
pub async fn claim_work_at_once(
    c: &Conn<'_>,
    p: &ClaimDueSteps,
    now: Option<Timestamp>,
    floors: &ClaimFloors,
) -> Result<ClaimedWork, StoreError> {
    if p.limit == 0 || p.agents.is_empty() || p.buckets.as_ref().is_some_and(Vec::is_empty) {
        let now = match now {
            Some(now) => now,
            None => crate::tx::db_now(c).await?,
        };
        return Ok(ClaimedWork { steps: Vec::new(), now, next_due: None });
    }
    let shape = claim_floor::shape(p);
    let statement = floors.start(&shape).map_or(Statement::AtOnce, Statement::AtOnceFrom);
    let claimed = run_claim(c, p, now, &p.agents, p.limit, true, statement).await?;
    floors.claimed(shape, claimed.from_front, claimed.steps.len() >= p.limit as usize, claimed.now);
    Ok(ClaimedWork { steps: claimed.steps, now: claimed.now, next_due: claimed.next_due })
}

/// Claims in a submission's transaction, after its writes (`Store::submit_tasks_and_claim`): the
/// submission's steps and events are inserted first, so that the claims see the steps and their
/// `step.claimed` events follow the submission's in the log; then each claim as `claim_due_steps`
/// runs it. (The engine does not hand claims off on this store: `Store::hands_off_claims`.)
pub async fn claim_after_writes(t: &Tx<'_>, claims: &[ClaimDueSteps]) -> Result<Vec<Vec<ClaimedStep>>, StoreError> {
    t.flush_events().await?;
    let mut claimed = Vec::with_capacity(claims.len());
    for p in claims {
        claimed.push(claim_due_steps(t, p).await?);
    }
    Ok(claimed)
}

pub async fn claim_due_steps(t: &Tx<'_>, p: &ClaimDueSteps) -> Result<Vec<ClaimedStep>, StoreError> {
    if p.limit == 0 || p.agents.is_empty() || p.buckets.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let limit_of = |agent: &str| limit_of(p, agent);
    let free: Vec<String> = p.agents.iter().filter(|a| limit_of(a).is_none()).cloned().collect();
    let mut claimed = Vec::new();
    if !free.is_empty() {
        claimed = claim_group(t, p, &free, p.limit).await?;
    }
    let limited: Vec<&AgentLimit> = p.agents.iter().filter_map(|a| limit_of(a)).collect();
    if limited.is_empty() {
        return Ok(claimed);
    }
    let mut allowances: Allowances = lock_limited(t, &limited).await?;
    for limit in limited {
        let room = p.limit.saturating_sub(claimed.len() as u32);
        if room == 0 {
            break;
        }
        let allowed = allowances.room(t, limit).await?.min(room);
        if allowed == 0 {
            continue;
        }
        let got = claim_group(t, p, std::slice::from_ref(&limit.agent), allowed).await?;
        allowances.used(t, limit, got.len() as u32).await?;
        claimed.extend(got);
    }
    Ok(claimed)
}

async fn claim_group(
    t: &Tx<'_>,
    p: &ClaimDueSteps,
    agents: &[String],
    limit: u32,
) -> Result<Vec<ClaimedStep>, StoreError> {
    Ok(run_claim(t, p, Some(t.now), agents, limit, false, Statement::InTransaction).await?.steps)
}

/// A claimed step from its row's columns `at..at + 11`: id, task_id, name, agent, lease_token,
/// complete_by, attempts, input, config, idempotency_key, the task's key.
pub fn claimed_step(r: &Row, at: usize, now: Timestamp) -> Result<ClaimedStep, StoreError> {
    Ok(ClaimedStep {
        id: StepId(get(r, at)?),
        task_id: TaskId(get(r, at + 1)?),
        name: get(r, at + 2)?,
        agent: get(r, at + 3)?,
        lease_token: LeaseToken(get(r, at + 4)?),
        complete_by: Timestamp(get(r, at + 5)?),
        claimed_at: now,
        attempt: crate::rows::count(r, at + 6, "steps.attempts")?,
        input: json(r, at + 7, "steps.input")?,
        config: json(r, at + 8, "steps.config")?,
        idempotency_key: get(r, at + 9)?,
        task_key: get(r, at + 10)?,
        progress: crate::rows::opt_json(r, at + 11, "steps.progress")?,
    })
}

/// Whether an agent of the claim has a concurrency or rate limit: such a claim locks the limits'
/// rows first, so it runs as a transaction of several statements.
pub fn has_limited_agent(p: &ClaimDueSteps) -> bool {
    p.agents.iter().any(|a| limit_of(p, a).is_some())
}

fn limit_of<'p>(p: &'p ClaimDueSteps, agent: &str) -> Option<&'p AgentLimit> {
    p.limits.iter().find(|l| l.agent == agent && (l.max_concurrent.is_some() || l.per_second.is_some()))
}

/// A step heartbeat: complete-by moves to now plus the response timeout, never past the claim's
/// start plus the step's timeout nor the step's deadline (its total timeout), and never back. Fenced by the lease token like a reply; it needs
/// no task lock, as it changes no state and runs no decider.
pub async fn extend_lease(t: &Tx<'_>, p: &ExtendLease) -> Result<Timestamp, StoreError> {
    let row = t
        .query_opt(
            "UPDATE steps SET complete_by = greatest(complete_by,
                     least($3 + coalesce(response_timeout_ms, timeout_ms), claimed_at + timeout_ms, deadline_at)), updated_at = $3,
                 progress = coalesce($4, progress)
             WHERE id = $1 AND lease_token = $2 AND (state = 'processing') IS TRUE AND kind = 'agent' RETURNING complete_by",
            &[&p.step_id.0, &p.lease_token.0, &t.now.0, &p.progress.as_ref().map(|v| v.to_string())],
        )
        .await?;
    match row {
        Some(r) => Ok(Timestamp(get(&r, 0)?)),
        None => Err(StoreError::Conflict(format!(
            "step {}: lease {} is not held (lapsed, or claimed again)",
            p.step_id, p.lease_token
        ))),
    }
}
