//! Retry jobs (M1..M8) in the console: live or archived, searched by handler, state, the text of
//! their last error and time, newest first; the given-up ones sent back to run in bulk, after a
//! dry run that counts them. A job is a task of a one-step workflow, so its page is a task's.

use super::html::{esc, page};
use super::pages::urlencode;
use super::{Refused, check_csrf, session};
use crate::state::AppState;
use axum::extract::{Form, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use serde::Deserialize;
use shiftboss_core::jobs::JobState;
use shiftboss_core::token::Scope;
use shiftboss_store::{JobPlace, JobQuery, JobRecord, ResubmitJobs, StoreError};
use std::fmt::Write;

const PAGE: u32 = 50;
/// The most jobs one bulk resubmission takes (as the API's).
const MAX_RESUBMIT: u32 = crate::routes::jobs::MAX_RESUBMIT;

#[derive(Deserialize, Default)]
pub struct JobParams {
    handler: Option<String>,
    state: Option<String>,
    /// Text the last error contains.
    error: Option<String>,
    from: Option<String>,
    to: Option<String>,
    /// "on": archived jobs instead of live ones.
    history: Option<String>,
    before: Option<String>,
    csrf: Option<String>,
    reason: Option<String>,
}

impl JobParams {
    fn given(&self) -> Vec<(&'static str, &str)> {
        let pairs = [
            ("handler", &self.handler),
            ("state", &self.state),
            ("error", &self.error),
            ("from", &self.from),
            ("to", &self.to),
            ("history", &self.history),
        ];
        pairs.into_iter().filter_map(|(k, v)| Some((k, v.as_deref().filter(|v| !v.trim().is_empty())?))).collect()
    }

    fn query_string(&self) -> String {
        self.given().iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&")
    }

    /// The store's search, parsed as the API's job search parses it; a value that does not
    /// parse is a message for the page.
    fn query(&self) -> Result<JobQuery, String> {
        let text = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        let f = crate::routes::jobs::JobFilter {
            history: self.history.as_deref() == Some("on"),
            handler: text(&self.handler),
            state: text(&self.state),
            from: text(&self.from),
            to: text(&self.to),
            reason: text(&self.error),
            before: None,
            limit: None,
        };
        f.query().map_err(|e| e.detail)
    }
}

fn form(b: &mut String, q: &JobParams, state: &AppState) {
    let mut handlers = String::new();
    for a in state.engine.agent_names().iter().chain(state.engine.remote_agents()) {
        let _ = write!(handlers, r#"<option value="{}">"#, esc(a));
    }
    let chosen = q.state.as_deref().unwrap_or("");
    let mut options = String::from(r#"<option value="">any</option>"#);
    for st in JobState::ALL {
        let sel = if chosen == st.as_str() { " selected" } else { "" };
        let _ = write!(options, r#"<option{sel}>{}</option>"#, st.as_str());
    }
    let v = |o: &Option<String>| esc(o.as_deref().unwrap_or(""));
    let _ = write!(
        b,
        r#"<form class="filters" method="get" action="/console/jobs">
<label>Handler<input name="handler" list="handlers" value="{}"></label><datalist id="handlers">{handlers}</datalist>
<label>State<select name="state">{options}</select></label>
<label>Last error contains<input name="error" value="{}"></label>
<label>Last change from<input name="from" value="{}" placeholder="2026-01-31T12:00:00Z"></label>
<label>to<input name="to" value="{}"></label>
<label><input type="checkbox" name="history"{}> archived</label><button>Search</button></form>"#,
        v(&q.handler),
        v(&q.error),
        v(&q.from),
        v(&q.to),
        if q.history.as_deref() == Some("on") { " checked" } else { "" }
    );
}

fn row(b: &mut String, j: &JobRecord) {
    let _ = write!(
        b,
        r#"<tr><td><a href="/console/tasks/{0}">{0}</a></td><td>{1}</td><td>{2}</td><td><span class="state s-{3}">{3}</span></td><td>{4}</td><td>{5}</td><td>{6}</td><td>{7}</td></tr>"#,
        j.id,
        esc(&j.key),
        esc(&j.handler),
        j.state.as_str(),
        j.attempts,
        j.due_at,
        j.updated_at,
        esc(j.last_error.as_deref().unwrap_or(""))
    );
}

pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<JobParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let mut b = String::from("<h1>Retry jobs</h1>");
    form(&mut b, &q, &state);
    let query = match q.query() {
        Ok(query) => query,
        Err(e) => {
            let _ = write!(b, r#"<p class="error">{}</p>"#, esc(&e));
            return Ok(Html(page("Retry jobs", who, &b)));
        }
    };
    let before = q.before.as_deref().and_then(crate::wire::task_id);
    let mut jobs = match state.store().list_jobs(JobQuery { before, limit: PAGE + 1, ..query }).await {
        Ok(j) => j,
        Err(StoreError::InvalidInput(e)) => {
            let _ = write!(b, r#"<p class="error">{}</p>"#, esc(&e));
            return Ok(Html(page("Retry jobs", who, &b)));
        }
        Err(e) => return Err(e.into()),
    };
    let more = jobs.len() > PAGE as usize;
    jobs.truncate(PAGE as usize);
    b.push_str(r#"<div data-live data-stream="/v1/events/stream?kinds=task.received,task.completed,task.failed,task.cancelled,step.resubmitted">"#);
    b.push_str("<table><tr><th>Job</th><th>Key</th><th>Handler</th><th>State</th><th>Attempts</th><th>Due</th><th>Last change</th><th>Last error</th></tr>");
    for j in &jobs {
        row(&mut b, j);
    }
    if jobs.is_empty() {
        b.push_str(r#"<tr><td colspan="8" class="muted">No job matches.</td></tr>"#);
    }
    b.push_str("</table></div>");
    let qs = q.query_string();
    if more && let Some(last) = jobs.last() {
        let next = format!("/console/jobs?before={}{}{qs}", last.id, if qs.is_empty() { "" } else { "&" });
        let _ = write!(b, r#"<p><a href="{}">Older jobs →</a></p>"#, esc(&next));
    }
    if s.principal.scopes.allows(Scope::Operate) && q.history.as_deref() != Some("on") {
        let _ = write!(
            b,
            r#"<div class="actions"><a href="/console/jobs/resubmit?{}"><button type="button">Resubmit the given-up jobs of this search…</button></a></div>"#,
            esc(&qs)
        );
    }
    Ok(Html(page("Retry jobs", who, &b)))
}

/// The bulk resubmission's confirmation: how many given-up jobs the search holds (a dry run).
pub async fn confirm(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<JobParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let query = q.query().map_err(Refused::Forbidden)?;
    let p = ResubmitJobs {
        // Given-up jobs only, whatever state the search showed (as the API's resubmission).
        query: JobQuery { place: JobPlace::Live, state: None, limit: MAX_RESUBMIT, ..query },
        dry_run: true,
        actor: s.principal.name.clone(),
        reason: String::new(),
    };
    let report = state.store().resubmit_jobs(p).await?;
    let hidden: String = q
        .given()
        .iter()
        .filter(|(k, _)| !matches!(*k, "history" | "state"))
        .map(|(k, v)| format!(r#"<input type="hidden" name="{k}" value="{}">"#, esc(v)))
        .collect();
    let body = format!(
        r#"<h1>Resubmit given-up jobs?</h1><p><b data-count>{}</b> given-up job(s) of this search will run again, each with its failure count reset (at most {MAX_RESUBMIT} at once).</p>
<form method="post" action="/console/jobs/resubmit" class="filters"><input type="hidden" name="csrf" value="{}">{hidden}
<label>Reason<input name="reason" required size="40"></label><button class="danger">Resubmit</button>
<a href="/console/jobs?{}">Back</a></form>"#,
        report.matched,
        esc(&s.csrf),
        esc(&q.query_string())
    );
    Ok(Html(page("Confirm", who, &body)))
}

pub async fn resubmit(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(q): Form<JobParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    check_csrf(&s, q.csrf.as_deref())?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let query = q.query().map_err(Refused::Forbidden)?;
    let p = ResubmitJobs {
        query: JobQuery { place: JobPlace::Live, state: None, limit: MAX_RESUBMIT, ..query },
        dry_run: false,
        actor: s.principal.name.clone(),
        reason: q.reason.clone().unwrap_or_default(),
    };
    let report = state.store().resubmit_jobs(p).await?;
    state.engine.wake();
    let body = format!(
        r#"<h1>Resubmitted</h1><p><b data-acted>{}</b> of {} given-up job(s) run again.</p><p><a href="/console/jobs?{}">Back to the jobs</a></p>"#,
        report.resubmitted,
        report.matched,
        esc(&q.query_string())
    );
    Ok(Html(page("Resubmitted", who, &body)))
}
