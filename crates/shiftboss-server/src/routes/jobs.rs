//! Retry jobs (M1): enqueue one or a batch, list and search (live or history), read one, and
//! send given-up jobs back to run.

use crate::auth::Principal;
use crate::error::{ApiError, Problem};
use crate::json::Json;
use crate::limits::{self, MAX_BATCH};
use crate::query::{Path, Query};
use crate::state::AppState;
use crate::wire::{self, Job, JobPage, Submitted};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiftboss_core::jobs::JobState;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::time::serde_duration;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_engine::JobOptions;
use shiftboss_store::{EnqueueJobs, JobPlace, JobQuery, JobRef, ResubmitJobs};
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(enqueue_job, list_jobs))
        .routes(routes!(enqueue_batch))
        .routes(routes!(get_job))
        .routes(routes!(get_job_by_key))
        .routes(routes!(resubmit_jobs))
}

/// A job to enqueue. (Serialize too: the CLI's API client sends this very type.)
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJob {
    /// The agent type that runs it.
    pub handler: String,
    /// The handler's parameters: a JSON object (default `{}`).
    #[serde(default)]
    pub params: Option<Value>,
    /// A unique key: the same key again (live or in history) gives back the same job when the
    /// handler and params match, and 409 otherwise.
    #[serde(default)]
    pub key: Option<String>,
    /// Not before this time (RFC 3339).
    #[serde(default)]
    pub due_at: Option<String>,
    /// Not before this long after the enqueue, by the store's clock: milliseconds, or text like "30s".
    #[serde(default, with = "serde_duration::option")]
    #[schema(value_type = Option<String>)]
    pub delay: Option<Duration>,
    /// The retry policy; the server's policy for the handler when none.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub retry: Option<RetryPolicy>,
    /// The complete-by window of each try (default 30 s): milliseconds, or text like "30s".
    #[serde(default, with = "serde_duration::option")]
    #[schema(value_type = Option<String>)]
    pub timeout: Option<Duration>,
    /// A higher priority is claimed first.
    #[serde(default)]
    pub priority: i32,
    /// The load-balance bucket (0 to 255); the server's balance strategy picks one when none.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 255)]
    pub bucket: Option<u16>,
}

/// Jobs enqueued together, in one transaction: all or none.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobBatch {
    /// At most 1,000 jobs.
    jobs: Vec<NewJob>,
}

/// What a batch enqueue did, in the order of the request's jobs.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchEnqueued {
    pub items: Vec<Submitted>,
}

fn to_store(state: &AppState, j: NewJob) -> Result<(shiftboss_store::EnqueueJob, String), ApiError> {
    let due_at = match j.due_at.as_deref() {
        None => None,
        Some(t) => Some(parse_time(t).map_err(|e| ApiError::invalid(format!("due_at: {e}")))?),
    };
    let o = JobOptions {
        due_at,
        delay: j.delay,
        retry: j.retry,
        timeout: j.timeout,
        priority: j.priority,
        bucket: j.bucket,
        unique_key: j.key.clone(),
    };
    let job = state.engine.jobs().job(&j.handler, j.params.unwrap_or_else(|| serde_json::json!({})), o);
    Ok((job, j.key.unwrap_or_default()))
}

async fn enqueue(
    state: &AppState,
    principal: &Principal,
    jobs: Vec<NewJob>,
) -> Result<(bool, Vec<Submitted>), ApiError> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut keys = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.into_iter().enumerate() {
        let (job, key) = to_store(state, j).map_err(|e| ApiError { detail: format!("jobs[{i}].{}", e.detail), ..e })?;
        out.push(job);
        keys.push(key);
    }
    let done = state.store().enqueue_jobs(EnqueueJobs { jobs: out, actor: principal.name.clone() }).await?;
    state.engine.wake();
    let created = done.iter().any(|s| s.created);
    let items = done
        .into_iter()
        .zip(keys)
        .map(|(s, key)| Submitted { id: s.task_id.to_string(), key, created: s.created })
        .collect();
    Ok((created, items))
}

/// Enqueues a job: it runs on the first server that claims it once due.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = NewJob, security(("token" = ["submit"])),
    responses((status = 201, body = Submitted), (status = 200, description = "The key existed: that job", body = Submitted),
        (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn enqueue_job(
    State(state): State<AppState>,
    principal: Principal,
    Json(j): Json<NewJob>,
) -> Result<Response, ApiError> {
    let (created, mut items) = enqueue(&state, &principal, vec![j]).await?;
    let item = items.pop().ok_or_else(|| ApiError::unavailable("the store returned no outcome for the job"))?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(item)).into_response())
}

/// Enqueues jobs in one transaction: all or none.
#[utoipa::path(post, path = "/v1/jobs/batch", tag = "jobs", request_body = JobBatch, security(("token" = ["submit"])),
    responses((status = 201, body = BatchEnqueued), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn enqueue_batch(
    State(state): State<AppState>,
    principal: Principal,
    Json(b): Json<JobBatch>,
) -> Result<Response, ApiError> {
    if b.jobs.is_empty() || b.jobs.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!("jobs: give 1 to {MAX_BATCH} jobs")));
    }
    let (_, items) = enqueue(&state, &principal, b.jobs).await?;
    Ok((StatusCode::CREATED, Json(BatchEnqueued { items })).into_response())
}

/// A job search; every filter given must match.
#[derive(Debug, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct JobFilter {
    /// Search history (archived jobs) instead of the live tables.
    #[serde(default)]
    pub(crate) history: bool,
    /// Only jobs of this handler.
    pub(crate) handler: Option<String>,
    /// pending, running, succeeded, given_up or cancelled.
    pub(crate) state: Option<String>,
    /// Last changed at or after this time (RFC 3339).
    pub(crate) from: Option<String>,
    /// Last changed before this time (RFC 3339).
    pub(crate) to: Option<String>,
    /// The last failure's reason contains this text.
    pub(crate) reason: Option<String>,
    /// The cursor from the previous page's `next`.
    #[serde(default)]
    pub(crate) before: Option<String>,
    /// At most this many (1 to 1000, default 50).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1000)]
    pub(crate) limit: Option<u32>,
}

impl JobFilter {
    /// The store's search, each value parsed (the console's jobs page searches through it too).
    pub(crate) fn query(self) -> Result<JobQuery, ApiError> {
        let state = match self.state.as_deref() {
            None => None,
            Some(s) => Some(s.parse::<JobState>().map_err(|e| ApiError::bad_request(format!("state: {e}")))?),
        };
        let time = |what: &str, t: Option<String>| -> Result<Option<Timestamp>, ApiError> {
            t.map(|t| parse_time(&t).map_err(|e| ApiError::bad_request(format!("{what}: {e}")))).transpose()
        };
        Ok(JobQuery {
            place: if self.history { JobPlace::History } else { JobPlace::Live },
            handler: self.handler,
            state,
            from: time("from", self.from)?,
            to: time("to", self.to)?,
            reason: self.reason,
            ..JobQuery::default()
        })
    }
}

/// Lists jobs, newest first, live or from history.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", params(JobFilter), security(("token" = ["read"])),
    responses((status = 200, body = JobPage), (status = 400, body = Problem)))]
async fn list_jobs(State(state): State<AppState>, Query(f): Query<JobFilter>) -> Result<Json<JobPage>, ApiError> {
    let limit = limits::page(f.limit)?;
    let before = match f.before.as_deref() {
        None => None,
        Some(c) => Some(wire::task_id(c).ok_or_else(|| ApiError::bad_request("before: not a cursor this API gave"))?),
    };
    let q = JobQuery { before, limit: limit + 1, ..f.query()? };
    let mut jobs = state.store().list_jobs(q).await?;
    let more = jobs.len() > limit as usize;
    jobs.truncate(limit as usize);
    let next = if more { jobs.last().map(|j| j.id.to_string()) } else { None };
    Ok(Json(JobPage { items: jobs.into_iter().map(Job::from).collect(), next }))
}

/// One job by id, live or archived.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", params(("id" = String, Path)), security(("token" = ["read"])),
    responses((status = 200, body = Job), (status = 404, body = Problem)))]
async fn get_job(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Job>, ApiError> {
    let not_found = || ApiError::not_found(format!("no job {id}"));
    let task_id: TaskId = wire::task_id(&id).ok_or_else(not_found)?;
    let job = state.store().find_job(JobRef::Id(task_id)).await?;
    job.map(|j| Json(Job::from(j))).ok_or_else(not_found)
}

/// One job by its unique key, live or archived.
#[utoipa::path(get, path = "/v1/jobs/by-key/{key}", tag = "jobs", params(("key" = String, Path)), security(("token" = ["read"])),
    responses((status = 200, body = Job), (status = 404, body = Problem)))]
async fn get_job_by_key(State(state): State<AppState>, Path(key): Path<String>) -> Result<Json<Job>, ApiError> {
    let job = state.store().find_job(JobRef::Key(key.clone())).await?;
    job.map(|j| Json(Job::from(j))).ok_or_else(|| ApiError::not_found(format!("no job with key {key:?}")))
}

/// Given-up jobs to send back to run: a filter (state is given_up unless named), a reason, and
/// whether only to count them. (Serialize too: the CLI's API client sends this very type.)
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResubmitRequest {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub handler: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub reason_contains: Option<String>,
    /// Count only: change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// At most this many jobs (1 to 10,000, the default).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
    /// Why, for the event log.
    pub reason: String,
}

/// The most jobs one resubmission takes.
pub const MAX_RESUBMIT: u32 = limits::MAX_PAGE * 10;

/// What a resubmission did (or, dry, would do).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Resubmitted {
    pub matched: u64,
    pub resubmitted: u64,
    pub dry_run: bool,
}

/// Sends given-up jobs matching a filter back to run (one job by `id`, or many); with
/// `dry_run`, only counts them.
#[utoipa::path(post, path = "/v1/jobs/resubmit", tag = "jobs", request_body = ResubmitRequest, security(("token" = ["operate"])),
    responses((status = 200, body = Resubmitted), (status = 422, body = Problem)))]
async fn resubmit_jobs(
    State(state): State<AppState>,
    principal: Principal,
    Json(r): Json<ResubmitRequest>,
) -> Result<Json<Resubmitted>, ApiError> {
    let id = match r.id.as_deref() {
        None => None,
        Some(i) => Some(wire::task_id(i).ok_or_else(|| ApiError::not_found(format!("no job {i}")))?),
    };
    let filter = JobFilter {
        history: false,
        handler: r.handler,
        state: None,
        from: r.from,
        to: r.to,
        reason: r.reason_contains,
        before: None,
        limit: None,
    };
    let limit = match r.limit {
        None => MAX_RESUBMIT,
        Some(n) if (1..=MAX_RESUBMIT).contains(&n) => n,
        Some(_) => return Err(ApiError::invalid(format!("limit: 1 to {MAX_RESUBMIT}"))),
    };
    let query = JobQuery { id, limit, ..filter.query().map_err(|e| ApiError::invalid(e.detail))? };
    let report = state
        .store()
        .resubmit_jobs(ResubmitJobs { query, dry_run: r.dry_run, actor: principal.name.clone(), reason: r.reason })
        .await?;
    if !r.dry_run {
        state.engine.wake();
    }
    Ok(Json(Resubmitted { matched: report.matched, resubmitted: report.resubmitted, dry_run: r.dry_run }))
}

/// An RFC 3339 time.
pub fn parse_time(s: &str) -> Result<Timestamp, String> {
    humantime::parse_rfc3339_weak(s)
        .map(Timestamp::from_system)
        .map_err(|_| format!("{s:?} is not an RFC 3339 time such as 2026-11-25T12:00:00Z"))
}
