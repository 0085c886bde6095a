//! Finding a task from anything an operator may hold: its id (from an alert), its key (the
//! application's order id, or the start of it), or its correlation id (Conductor's). Live tasks
//! and archived ones, newest first; one exact id goes straight to its page.

use super::html::{esc, page};
use super::pages::row;
use super::{Refused, session};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use shiftboss_core::model::TaskRecord;
use shiftboss_core::token::Scope;
use shiftboss_store::{ListTasks, TaskFilter};

/// The most tasks one search lists.
const FOUND: u32 = 50;

#[derive(Deserialize, Default)]
pub struct FindParams {
    q: Option<String>,
}

pub async fn find(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(p): Query<FindParams>,
) -> Result<Response, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let q = p.q.unwrap_or_default().trim().to_owned();
    let mut b = format!(
        r#"<h1>Find a task</h1><form class="filters" method="get" action="/console/find"><label>Id, key (or its start) or correlation id<input name="q" value="{}" size="40" autofocus></label><button>Find</button></form>"#,
        esc(&q)
    );
    if q.is_empty() {
        return Ok(Html(page("Find", who, &b)).into_response());
    }
    let store = state.store();
    let by_id = match crate::wire::task_id(&q) {
        Some(id) => match store.get_task_head(id, false, 1).await? {
            Some(d) => Some(d),
            None => store.get_task_head(id, true, 1).await?,
        },
        None => None,
    };
    let list = |filter: TaskFilter| ListTasks { filter, include_archived: true, before: None, limit: FOUND };
    let mut found: Vec<TaskRecord> = Vec::new();
    // A bad key or correlation id (too long, say) matches nothing: the other lookups still answer.
    if let Ok(rows) = store.list_tasks(list(TaskFilter { key_prefix: Some(q.clone()), ..TaskFilter::default() })).await
    {
        found.extend(rows);
    }
    let by_correlation = TaskFilter { correlation_id: Some(q.clone()), ..TaskFilter::default() };
    if let Ok(rows) = store.list_tasks(list(by_correlation)).await {
        found.extend(rows);
    }
    if let Some(d) = by_id {
        if found.is_empty() {
            return Ok(Redirect::to(&format!("/console/tasks/{}", d.task.id)).into_response());
        }
        found.push(d.task);
    }
    found.sort_by_key(|t| std::cmp::Reverse(t.id));
    found.dedup_by_key(|t| t.id);
    found.truncate(FOUND as usize);
    b.push_str("<table><tr><th>Task</th><th>Key</th><th>Workflow</th><th>State</th><th>Submitted</th><th>Last change</th></tr>");
    for t in &found {
        row(&mut b, t);
    }
    if found.is_empty() {
        b.push_str(r#"<tr><td colspan="6" class="muted">No task has this id, a key starting so, or this correlation id.</td></tr>"#);
    }
    b.push_str("</table>");
    if found.len() == FOUND as usize {
        b.push_str(r#"<p class="muted">The newest 50 shown: narrow the search.</p>"#);
    }
    Ok(Html(page("Find", who, &b)).into_response())
}
