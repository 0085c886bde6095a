//! The long poll: claim up to the worker's capacity through the scheduler's own claim; when
//! nothing is due, wait for the store's due-work ring (or the next due time the claim reported),
//! bounded by the wait asked for, and claim again.

use super::wire::{PollAnswer, PollRequest, WorkItem};
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::state::AppState;
use axum::extract::State;
use shiftboss_core::InstanceId;
use shiftboss_store::{ClaimDueSteps, ClaimedStep, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

/// The longest a poll waits for work.
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// Left between the end of the longest wait and the server's request timeout, so that a poll
/// answers before the timeout could drop it (with steps claimed and not handed out).
const TIMEOUT_MARGIN: Duration = Duration::from_secs(5);
/// The most steps one poll hands out.
pub const MAX_CAPACITY: u32 = 1000;
/// The most agent types, and domains, one poll names.
const MAX_NAMES: usize = 64;
/// How long past its wait a poll waits for the submissions' transaction that took its offer
/// (see `shiftboss_engine::group_commit::handoff`); within `TIMEOUT_MARGIN`.
const HANDOFF_GRACE: Duration = Duration::from_secs(2);
/// With a store that cannot ring: how often a waiting poll claims again.
const UNRUNG_POLL: Duration = Duration::from_millis(250);

/// Claims up to `capacity` due steps of the named agent types for the worker, highest priority
/// first. Waits up to `wait_ms` when none is due: a step submitted meanwhile is handed out
/// within milliseconds. An empty list after the wait means nothing became due.
#[utoipa::path(post, path = "/v1/agents/poll", tag = "agents", request_body = PollRequest,
    security(("token" = ["agent"])),
    responses(
        (status = 200, description = "The steps claimed for the worker; empty when none became due in the wait", body = PollAnswer),
        (status = 422, description = "An agent type that is not remote, a bad worker id or capacity", body = Problem),
        (status = 503, body = Problem)))]
pub async fn poll(State(state): State<AppState>, Json(p): Json<PollRequest>) -> Result<Json<PollAnswer>, ApiError> {
    let instance = check(&state, &p)?;
    note_seen(&state, &p.worker, &p.agents).await;
    let claim = ClaimDueSteps {
        instance,
        limit: p.capacity,
        agents: p.agents,
        buckets: None,
        domains: p.domains,
        limits: state.engine.agent_limits().to_vec(),
    };
    let steps = claim_waiting(&state, claim, Duration::from_millis(p.wait_ms)).await?;
    Ok(Json(PollAnswer { steps: items(steps) }))
}

/// Writes the worker to the registry of workers seen, at most every few seconds per worker.
/// Advisory: a failed write must not cost the worker its work.
pub(crate) async fn note_seen(state: &AppState, worker: &str, agents: &[String]) {
    if let Some(seen) = state.remote.seen_due(worker, agents)
        && let Err(e) = state.store().record_workers_seen(seen).await
    {
        tracing::warn!(error = %e, worker = %worker, "could not record the worker as seen");
    }
}

/// The long poll's claim, shared with Conductor's poll: claims through the scheduler's own
/// verb; when nothing is due, waits for the store's ring (or the next due time the claim
/// reported), bounded by `wait` (itself capped below the request timeout), and claims again.
pub(crate) async fn claim_waiting(
    state: &AppState,
    claim: ClaimDueSteps,
    wait: Duration,
) -> Result<Vec<ClaimedStep>, ApiError> {
    let store = state.store().clone();
    let wait = wait.min(MAX_WAIT).min(state.remote.request_time.saturating_sub(TIMEOUT_MARGIN));
    let deadline = Instant::now() + wait;
    // Subscribed before the first claim: work queued between that claim and the wait still rings.
    let (mut rings, live) = match wait.is_zero() {
        true => (None, false),
        false => {
            let (r, live) = state.remote.listen(&store);
            (Some(r), live)
        }
    };
    let turn = state.remote.turn(&claim.agents, &claim.domains);
    let mut first = true;
    loop {
        let seen = rings.as_mut().map(|r| *r.borrow_and_update());
        let (steps, mut until) = match seen {
            // A poll rung after waiting claims in turn with the others of its agent types (its
            // first claim does not wait for a turn: under load polls come back to work that is
            // there, and claim side by side).
            Some(seen) if !first => {
                let Ok(mut drained) = tokio::time::timeout_at(deadline, turn.lock()).await else {
                    return Ok(Vec::new());
                };
                // Only a store that rings covers: without its rings, other processes' work is
                // found by claiming.
                match drained.covers(seen, Instant::now()).filter(|_| live) {
                    Some(until) => (Vec::new(), until.map_or(deadline, |t| t.min(deadline))),
                    None => {
                        let (steps, next_due) = claim_once(&store, &claim).await?;
                        if (steps.len() as u32) < claim.limit {
                            drained.note(seen, next_due);
                        }
                        (steps, next_due.map_or(deadline, |t| t.min(deadline)))
                    }
                }
            }
            _ => {
                let (steps, next_due) = claim_once(&store, &claim).await?;
                (steps, next_due.map_or(deadline, |t| t.min(deadline)))
            }
        };
        first = false;
        let now = Instant::now();
        if !steps.is_empty() || now >= deadline {
            return Ok(steps);
        }
        if !live {
            until = until.min(now + UNRUNG_POLL);
        }
        // While it waits, the claim rides with the next submissions' commit (the handoff).
        let mut offer = state.engine.offer_claim(&claim);
        let handed = async {
            match offer.as_mut() {
                Some(o) => o.handed().await,
                None => std::future::pending().await,
            }
        };
        let rung = async {
            match rings.as_mut() {
                Some(r) => {
                    if r.changed().await.is_err() {
                        sleep_until(until).await;
                    }
                }
                None => sleep_until(until).await,
            }
        };
        let steps = tokio::select! {
            steps = handed => steps,
            () = rung => Vec::new(),
            () = sleep_until(until) => Vec::new(),
        };
        if !steps.is_empty() {
            return Ok(steps);
        }
        // Woken otherwise: the offer is taken back, or, if a writer has it, its steps awaited.
        if let Some(o) = offer {
            let steps = o.withdraw(deadline + HANDOFF_GRACE).await;
            if !steps.is_empty() {
                return Ok(steps);
            }
        }
    }
}

/// One claim; with the instant its next due time falls at, if it reported one.
async fn claim_once(
    store: &Arc<dyn Store>,
    claim: &ClaimDueSteps,
) -> Result<(Vec<ClaimedStep>, Option<Instant>), ApiError> {
    let work = store.claim_due_work(claim.clone()).await?;
    let now = Instant::now();
    // The store's clock counts whole milliseconds: one more, so the wake is never early.
    let next_due = work.next_due.map(|at| now + at.since(work.now) + Duration::from_millis(1));
    Ok((work.steps, next_due))
}

fn check(state: &AppState, p: &PollRequest) -> Result<InstanceId, ApiError> {
    if p.agents.is_empty() || p.agents.len() > MAX_NAMES || p.domains.len() > MAX_NAMES {
        return Err(ApiError::invalid(format!(
            "agents: name 1 to {MAX_NAMES} agent types (and at most {MAX_NAMES} domains)"
        )));
    }
    for (i, a) in p.agents.iter().enumerate() {
        check_remote(state, a).map_err(|e| ApiError { detail: format!("agents[{i}]: {}", e.detail), ..e })?;
    }
    for (i, d) in p.domains.iter().enumerate() {
        shiftboss_core::workflow::check_name("domain", d)
            .map_err(|e| ApiError::invalid(format!("domains[{i}]: {e}")))?;
    }
    if p.capacity == 0 || p.capacity > MAX_CAPACITY {
        return Err(ApiError::invalid(format!("capacity: 1 to {MAX_CAPACITY}")));
    }
    worker_instance(&p.worker)
}

/// The instance a worker's claims are held under, `worker:<id>`; 422 for a bad id.
pub(crate) fn worker_instance(worker: &str) -> Result<InstanceId, ApiError> {
    shiftboss_store::worker_instance(worker).map_err(|e| ApiError::invalid(format!("worker: {e}")))
}

/// 422 `agent_not_remote` unless the engine declares this agent type remote: a worker can never
/// take the steps of an in-process agent.
pub(crate) fn check_remote(state: &AppState, agent: &str) -> Result<(), ApiError> {
    let remote = state.engine.remote_agents();
    if remote.iter().any(|r| r == agent) {
        return Ok(());
    }
    let known =
        if remote.is_empty() { "none: start serve with --remote-agent NAME".to_owned() } else { remote.join(", ") };
    Err(ApiError::new(
        axum::http::StatusCode::UNPROCESSABLE_ENTITY,
        "agent_not_remote",
        format!("{agent:?} is not an agent type served by remote workers here (remote: {known})"),
    ))
}

/// The claimed steps as a worker reads them, each with its task's key (read by the claim).
fn items(steps: Vec<ClaimedStep>) -> Vec<WorkItem> {
    steps
        .into_iter()
        .map(|s| WorkItem {
            step_id: s.id.to_string(),
            task_id: s.task_id.to_string(),
            task_key: Some(s.task_key),
            name: s.name,
            agent: s.agent,
            attempt: s.attempt,
            input: s.input,
            config: s.config,
            idempotency_key: s.idempotency_key,
            lease_token: s.lease_token.0.to_string(),
            complete_by: crate::wire::time(s.complete_by),
            seconds_left: s.complete_by.since(s.claimed_at).as_secs_f64(),
            progress: s.progress,
        })
        .collect()
}
