//! The pages: the overview, the task list with filters and paging, and a task with its steps,
//! why each waits, its event log, input and output, and the actions an operator may take.

use super::html::{count, esc, page};
use super::why::{Context, why};
use super::{Refused, session};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use serde::Deserialize;
use shiftboss_core::model::TaskRecord;
use shiftboss_core::token::Scope;
use shiftboss_core::{StepState, TaskState, Timestamp};
use shiftboss_store::{ListTasks, TaskFilter, event_kind as ev};
use std::fmt::Write;

fn state_badge(s: &str) -> String {
    format!(r#"<span class="state s-{0}">{0}</span>"#, esc(s))
}

/// Live workers: those seen polling within this long.
const LIVE_WORKER_MS: i64 = 60_000;

pub async fn overview(State(state): State<AppState>, headers: HeaderMap) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let store = state.store();
    let now = store.now().await?;
    let counts = store.task_counts().await?;
    let queues = store.queue_stats().await?;
    let workers = store.list_agent_workers().await?;
    let mut b = String::from(
        r#"<h1>Overview</h1><div data-live data-stream="/v1/events/stream?kinds=task.received,task.completed,task.failed,task.cancelled,task.paused,task.resumed,step.error,delivery.dead">"#,
    );
    b.push_str(r#"<h2>Tasks by state</h2><div class="cards">"#);
    for st in TaskState::ALL {
        let n = counts.iter().find(|(s, _)| *s == st).map_or(0, |(_, n)| *n);
        let _ = write!(
            b,
            r#"<a class="card" href="/console/tasks?state={0}"><span class="state s-{0}">{0}</span><b>{1}</b></a>"#,
            st.as_str(),
            count(n)
        );
    }
    b.push_str(r#"</div><p class="muted">Exact counts of the live tables; finished tasks the archiver moved to history are not counted.</p>"#);
    super::charts::render(&mut b, &state);
    b.push_str("<h2>Queues by agent type</h2><table><tr><th>Agent type</th><th>Due now</th><th>Oldest due for</th><th>Later</th><th>Running</th><th>In Error</th></tr>");
    for q in &queues.agents {
        let age = q.oldest_due_at.map(|t| format!("{} s", (now.0 - t.0).max(0) / 1000)).unwrap_or_else(|| "–".into());
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{age}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&q.agent),
            count(q.due),
            count(q.later),
            count(q.processing),
            count(q.error)
        );
    }
    if queues.agents.is_empty() {
        b.push_str(r#"<tr><td colspan="6" class="muted">No agent steps are live.</td></tr>"#);
    }
    b.push_str("</table><h2>Who serves</h2><table><tr><th>Where</th><th>Agent types</th><th>Last seen</th></tr>");
    let e = &state.engine;
    if e.runs_scheduler() {
        let _ = write!(
            b,
            "<tr><td>this process ({}), scheduler</td><td>{}</td><td>now</td></tr>",
            esc(e.instance().as_str()),
            esc(&e.agent_names().join(", "))
        );
    }
    for w in workers.iter().filter(|w| now.0 - w.last_seen_at.0 < LIVE_WORKER_MS) {
        let _ = write!(
            b,
            "<tr><td>remote worker {}</td><td>{}</td><td>{} s ago</td></tr>",
            esc(&w.worker),
            esc(&w.agent),
            (now.0 - w.last_seen_at.0) / 1000
        );
    }
    b.push_str("</table>");
    super::deliveries::recent_alerts(&mut b, store.as_ref()).await?;
    super::deliveries::backlog(&mut b, store.as_ref()).await?;
    let term = e.metrics().leader_term;
    let _ = write!(
        b,
        "<h2>Supervisor</h2><p>{}</p></div>",
        if term > 0 {
            format!("This process leads, term {term}.")
        } else {
            "Another process leads, or none does.".into()
        }
    );
    Ok(Html(page("Overview", Some((&s.principal.name, &s.csrf)), &b)))
}

#[derive(Deserialize, Default)]
pub struct ListParams {
    state: Option<String>,
    workflow: Option<String>,
    key: Option<String>,
    from: Option<String>,
    to: Option<String>,
    before: Option<String>,
}

impl ListParams {
    /// The filter's fields that are set, by name.
    fn given(&self) -> Vec<(&'static str, &str)> {
        [
            ("state", &self.state),
            ("workflow", &self.workflow),
            ("key", &self.key),
            ("from", &self.from),
            ("to", &self.to),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().filter(|v| !v.trim().is_empty()).map(|v| (k, v)))
        .collect()
    }
}

/// The store's filter for the list's fields (a field it cannot read is left out).
pub fn filter_of(q: &ListParams) -> TaskFilter {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
    TaskFilter {
        state: nonempty(&q.state).and_then(|v| v.parse::<TaskState>().ok()),
        workflow: nonempty(&q.workflow),
        key_prefix: nonempty(&q.key),
        created_from: time(q.from.as_deref()),
        created_to: time(q.to.as_deref()),
        ..TaskFilter::default()
    }
}

/// The list's filter as a query string.
pub fn query_of(q: &ListParams) -> String {
    q.given().iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&")
}

/// The list's filter as hidden form fields.
pub fn hidden_of(q: &ListParams) -> String {
    q.given().iter().map(|(k, v)| format!(r#"<input type="hidden" name="{k}" value="{}">"#, esc(v))).collect()
}

fn time(s: Option<&str>) -> Option<Timestamp> {
    let s = s.filter(|s| !s.is_empty())?;
    crate::routes::jobs::parse_time(s).ok()
}

const PAGE: u32 = 50;

pub async fn tasks(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ListParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let filter = filter_of(&q);
    let task_state = filter.state;
    let before = q.before.as_deref().and_then(crate::wire::task_id);
    let list = ListTasks { filter, include_archived: false, before, limit: PAGE + 1 };
    let mut rows = match state.store().list_tasks(list).await {
        Ok(r) => r,
        Err(shiftboss_store::StoreError::InvalidInput(e)) => {
            return Ok(Html(page(
                "Tasks",
                Some((&s.principal.name, &s.csrf)),
                &format!(r#"<p class="error">{}</p>"#, esc(&e)),
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let more = rows.len() > PAGE as usize;
    rows.truncate(PAGE as usize);
    let v = |o: &Option<String>| esc(o.as_deref().unwrap_or(""));
    let mut b = String::from("<h1>Tasks</h1>");
    let mut options = String::from(r#"<option value="">any</option>"#);
    for st in TaskState::ALL {
        let sel = if task_state == Some(st) { " selected" } else { "" };
        let _ = write!(options, r#"<option{sel}>{}</option>"#, st.as_str());
    }
    let _ = write!(
        b,
        r#"<form class="filters" method="get" action="/console/tasks">
<label>State<select name="state">{options}</select></label>
<label>Workflow<input name="workflow" value="{}"></label>
<label>Key starts with<input name="key" value="{}"></label>
<label>Submitted from<input name="from" value="{}" placeholder="2026-01-31T12:00:00Z"></label>
<label>to<input name="to" value="{}"></label><button>Filter</button></form>"#,
        v(&q.workflow),
        v(&q.key),
        v(&q.from),
        v(&q.to)
    );
    b.push_str(r#"<div data-live data-stream="/v1/events/stream?kinds=task.received,task.completed,task.failed,task.cancelled,task.paused,task.resumed,task.terminated,task.compensated">"#);
    b.push_str("<table><tr><th>Task</th><th>Key</th><th>Workflow</th><th>State</th><th>Submitted</th><th>Last change</th></tr>");
    for t in &rows {
        row(&mut b, t);
    }
    if rows.is_empty() {
        b.push_str(r#"<tr><td colspan="6" class="muted">No task matches.</td></tr>"#);
    }
    b.push_str("</table></div>");
    if more && let Some(last) = rows.last() {
        let q = query_of(&q);
        let next = format!("/console/tasks?before={}{}{q}", last.id, if q.is_empty() { "" } else { "&" });
        let _ = write!(b, r#"<p><a href="{}">Older tasks →</a></p>"#, esc(&next));
    }
    if s.principal.scopes.allows(Scope::Operate) && !rows.is_empty() {
        let q = query_of(&q);
        let amp = if q.is_empty() { "" } else { "&" };
        b.push_str(r#"<h2>Every task of this filter</h2><div class="actions">"#);
        for a in ["retry", "resubmit", "cancel"] {
            let _ = write!(
                b,
                r#"<a href="/console/bulk?do={a}{amp}{}"><button type="button">{}…</button></a>"#,
                esc(&q),
                title(a)
            );
        }
        b.push_str(r#"</div><p class="muted">Each shows how many live tasks it would touch before it acts.</p>"#);
    }
    Ok(Html(page("Tasks", Some((&s.principal.name, &s.csrf)), &b)))
}

fn title(a: &str) -> String {
    let mut c = a.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

pub fn row(b: &mut String, t: &TaskRecord) {
    let _ = write!(
        b,
        r#"<tr><td><a href="/console/tasks/{0}">{0}</a></td><td>{1}</td><td>{2} v{3}</td><td>{4}</td><td>{5}</td><td>{6}</td></tr>"#,
        t.id,
        esc(&t.key),
        esc(&t.workflow),
        t.workflow_version,
        state_badge(t.state.as_str()),
        t.created_at,
        t.updated_at
    );
}

/// A time the page counts towards or from, live (the script fills the `.left` beside it).
pub fn countdown(at: shiftboss_core::Timestamp) -> String {
    format!(r#"<time data-at="{}">{at}</time> <span class="left muted"></span>"#, at.0)
}

/// Each agent step's timeline, from the task's events: scheduled, every claim (attempt, holder,
/// lease token), lapse, failure and end, with the reason where there is one.
fn timelines(b: &mut String, d: &shiftboss_store::TaskDetail) {
    let agents: Vec<_> = d.steps.iter().filter(|s| s.kind == shiftboss_core::workflow::StepKind::Agent).collect();
    if agents.is_empty() {
        return;
    }
    b.push_str(r#"<h2>Step timelines</h2>"#);
    for st in agents {
        let events: Vec<_> = d.events.iter().filter(|e| e.step_id == Some(st.id)).collect();
        let _ = write!(
            b,
            r#"<details class="timeline" id="timeline-{}"><summary>{} · {} attempt{} · {} failure{} · {}</summary><ol>"#,
            st.id,
            esc(&st.name),
            st.attempts,
            if st.attempts == 1 { "" } else { "s" },
            st.failure_count,
            if st.failure_count == 1 { "" } else { "s" },
            st.state.as_str()
        );
        if let Some(p) = &st.progress {
            let _ = write!(
                b,
                r#"<li class="progress">its worker's last progress report: <code>{}</code></li>"#,
                esc(&p.to_string())
            );
        }
        for e in &events {
            let _ = write!(b, r#"<li><span class="t">{}</span> {}</li>"#, e.at, esc(&moment(e)));
        }
        if events.is_empty() {
            b.push_str(r#"<li class="muted">No event of this step among those shown.</li>"#);
        }
        b.push_str("</ol></details>");
    }
}

/// One step event in words.
fn moment(e: &shiftboss_core::model::EventRecord) -> String {
    let d = &e.detail;
    let field =
        |k: &str| d.get(k).filter(|v| !v.is_null()).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
    let mut words = match e.kind.as_str() {
        ev::STEP_SCHEDULED => "scheduled".to_owned(),
        ev::STEP_CLAIMED => format!("claimed by {}", e.actor),
        ev::STEP_PROCESSED => "processed".to_owned(),
        ev::STEP_EXPIRED => "its lease lapsed (no reply by complete-by)".to_owned(),
        ev::STEP_RELEASED => "released: its holder restarted".to_owned(),
        ev::STEP_UNCLAIMED => "not claimed within its claim timeout".to_owned(),
        ev::STEP_FAILED => "the attempt failed".to_owned(),
        ev::STEP_POSTPONED => format!("handed back by {} to run again later", e.actor),
        ev::STEP_ERROR => "went to Error".to_owned(),
        ev::STEP_OVERDUE => "overdue; its policy only alerts".to_owned(),
        ev::STEP_RESUBMITTED => format!("resubmitted by {}", e.actor),
        ev::STEP_SKIPPED => format!("skipped by {}", e.actor),
        ev::STEP_CANCELLED => "cancelled".to_owned(),
        ev::REPLY_REJECTED => "a late or stale reply was refused".to_owned(),
        // The line itself is the words; no other field follows it.
        ev::STEP_LOG => return format!("log from {}: {}", e.actor, field("log").unwrap_or_default()),
        other => other.to_owned(),
    };
    for (k, label) in [
        ("lease_token", "lease token"),
        ("failure_count", "failures"),
        ("retry_at", "next try at"),
        ("error", "error"),
        ("reason", "reason"),
    ] {
        if let Some(v) = field(k) {
            let v = match (k, v.parse::<i64>()) {
                ("retry_at", Ok(ms)) => shiftboss_core::Timestamp(ms).to_string(),
                _ => v,
            };
            let _ = write!(words, "; {label} {v}");
        }
    }
    words
}

pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

pub async fn task(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let Some(task_id) = crate::wire::task_id(&id) else {
        return Ok(Html(page("No such task", who, "<h1>No such task</h1>")));
    };
    let Some((d, archived)) = crate::routes::tasks::detail(&state, task_id).await? else {
        return Ok(Html(page("No such task", who, &format!("<h1>No task {}</h1>", esc(&id)))));
    };
    let store = state.store();
    let now = store.now().await?;
    let t = &d.task;
    let def = store.get_workflow(&t.workflow, Some(t.workflow_version)).await?;
    let paused = d.events.iter().rev().find(|e| e.kind == ev::TASK_PAUSED).map(|e| {
        let reason = e.detail.get("reason").and_then(|r| r.as_str()).unwrap_or("").to_owned();
        (e.actor.clone(), e.at, reason)
    });
    let workers = store.list_agent_workers().await?;
    let queues = store.queue_stats().await?;
    let local = state.engine.agent_names();
    let remote = state.engine.remote_agents();
    let mut b = String::new();
    let _ = write!(
        b,
        r#"<h1>Task {} <span class="muted">{}</span></h1><div data-live data-stream="/v1/tasks/{}/events/stream?since={}">"#,
        t.id,
        esc(&t.key),
        t.id,
        d.events.last().map_or(0, |e| e.id)
    );
    let _ = write!(
        b,
        "<p>{} · workflow {} v{} · submitted {} · last change {}{}</p>",
        state_badge(t.state.as_str()),
        esc(&t.workflow),
        t.workflow_version,
        t.created_at,
        t.updated_at,
        if archived { " · archived" } else { "" }
    );
    super::actions::buttons(&mut b, &d, &s.csrf, archived);
    b.push_str("<h2>Steps</h2><table><tr><th>Step</th><th>Agent</th><th>State</th><th>Attempts</th><th>Failures</th><th>Locked by</th><th>Complete by</th><th>Lease token</th><th>Last error</th></tr>");
    let mut whys = String::new();
    for st in &d.steps {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&st.name),
            esc(&st.agent),
            state_badge(st.state.as_str()),
            st.attempts,
            st.failure_count,
            esc(st.locked_by.as_deref().unwrap_or("–")),
            st.complete_by.map(countdown).unwrap_or_else(|| "–".into()),
            st.lease_token.0,
            esc(st.last_error.as_deref().unwrap_or(""))
        );
        let base = st.name.split('#').next().unwrap_or(&st.name);
        let signal = def
            .as_ref()
            .and_then(|d| d.all_steps().into_iter().find(|s| s.name == base))
            .and_then(|s| s.signal.as_deref());
        let served = local.contains(&st.agent) && state.engine.runs_scheduler()
            || (remote.contains(&st.agent)
                && workers.iter().any(|w| w.agent == st.agent && now.0 - w.last_seen_at.0 < LIVE_WORKER_MS));
        let limit =
            state.engine.agent_limits().iter().find(|l| l.agent == st.agent).map(|l| (l.max_concurrent, l.per_second));
        let running_of_type = queues.agents.iter().find(|q| q.agent == st.agent).map_or(0, |q| q.processing);
        // Circuits are this process's: they hold a step it runs, or one it would claim.
        let here = match st.state {
            StepState::Processing => st.locked_by.as_deref() == Some(state.engine.instance().as_str()),
            StepState::Pending => local.contains(&st.agent) && state.engine.runs_scheduler(),
            _ => false,
        };
        let circuit = if here { state.engine.circuit(&st.agent, &st.config) } else { None };
        let cx = Context {
            task: t,
            now,
            paused: paused.as_ref().map(|(a, at, r)| (a.as_str(), *at, r.as_str())),
            signal,
            served,
            limit,
            running_of_type,
            circuit,
        };
        if let Some(w) = why(st, &cx) {
            let _ = write!(whys, r#"<p class="why"><b>{}</b>: {}</p>"#, esc(&st.name), esc(&w));
        }
    }
    b.push_str("</table>");
    timelines(&mut b, &d);
    if t.state.is_active() || matches!(t.state, TaskState::Paused | TaskState::Failed) {
        b.push_str("<h2>Why is it not running?</h2>");
        if whys.is_empty() {
            b.push_str(r#"<p class="muted">Every step has ended.</p>"#);
        }
        b.push_str(&whys);
    }
    let errors: Vec<_> = d.steps.iter().filter(|s| s.state == StepState::Error).collect();
    if t.state == TaskState::Failed && !errors.is_empty() {
        let _ = write!(
            b,
            r#"<p class="error">It failed: {} in Error.</p>"#,
            esc(&errors.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "))
        );
    }
    if let Some(def) = &def {
        b.push_str("<h2>Where it stands</h2>");
        b.push_str(&super::workflows::drawn_for_task(def, &d.steps));
    }
    let pretty = |v: &serde_json::Value| esc(&serde_json::to_string_pretty(v).unwrap_or_default());
    let _ = write!(b, "<h2>Input</h2><pre>{}</pre>", pretty(&t.input));
    if let Some(o) = &t.output {
        let _ = write!(b, "<h2>Output</h2><pre>{}</pre>", pretty(o));
    }
    b.push_str("<h2>Event log</h2><table><tr><th>Id</th><th>At</th><th>Kind</th><th>Actor</th><th>Detail</th></tr>");
    for e in &d.events {
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td class="t">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>"#,
            e.id,
            e.at,
            esc(&e.kind),
            esc(&e.actor),
            esc(&e.detail.to_string())
        );
    }
    b.push_str("</table></div>");
    Ok(Html(page(&format!("Task {}", t.id), who, &b)))
}
