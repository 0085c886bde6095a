//! Bulk actions from the task list: the filter of the list, a dry run that counts the tasks it
//! would act on (and changes nothing), then the action itself from a form with the CSRF token.
//! Through the store's `bulk_operate`, as the API's bulk routes.

use super::html::{esc, page};
use super::pages::{ListParams, filter_of, hidden_of, query_of};
use super::{Refused, check_csrf, session};
use crate::state::AppState;
use axum::extract::{Form, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use serde::Deserialize;
use shiftboss_core::token::Scope;
use shiftboss_store::{BulkCommand, BulkOperate};
use std::fmt::Write;

/// The most tasks one bulk action from the console touches; run it again for more.
const LIMIT: u32 = 1000;

fn command(name: &str) -> Option<BulkCommand> {
    Some(match name {
        "retry" => BulkCommand::Retry,
        "resubmit" => BulkCommand::Resubmit,
        "cancel" => BulkCommand::Cancel,
        _ => return None,
    })
}

/// What the action does to each task, for its confirmation.
fn describe(cmd: &BulkCommand) -> &'static str {
    match cmd {
        BulkCommand::Retry => {
            "Each failed task runs its steps in Error again (a failed compensation goes on compensating)."
        }
        BulkCommand::Resubmit => "Each task's steps in Error go back to Pending with their failure counts reset.",
        BulkCommand::Cancel => {
            "Each task's live steps are cancelled, and its completed steps compensated if its workflow says so."
        }
    }
}

/// "Retry" for "retry".
fn title(a: &str) -> String {
    let mut c = a.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

#[derive(Deserialize)]
pub struct Which {
    #[serde(rename = "do")]
    action: String,
    #[serde(flatten)]
    list: ListParams,
}

/// The dry run: how many live tasks the action would touch, and the form that acts.
pub async fn dry_run(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(w): Query<Which>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let cmd = command(&w.action).ok_or_else(|| Refused::Forbidden(format!("no bulk action {:?}", w.action)))?;
    let p = BulkOperate {
        filter: filter_of(&w.list),
        command: cmd,
        actor: s.principal.name.clone(),
        reason: "dry run".into(),
        dry_run: true,
        limit: LIMIT,
    };
    let report = state.store().bulk_operate(p).await?;
    let more =
        if report.more { format!(" (at most {LIMIT} at a time; run it again for the rest)") } else { String::new() };
    let n = report.matched;
    let (tasks, matches) = if n == 1 { ("task", "matches") } else { ("tasks", "match") };
    let action = esc(&w.action);
    let csrf = esc(&s.csrf);
    let hidden = hidden_of(&w.list);
    let back = esc(&query_of(&w.list));
    let (heading, what) = (esc(&title(&w.action)), describe(&cmd));
    let body = format!(
        r#"<h1>{heading} every matching task?</h1><p>{what}</p><p>Dry run: <b data-count>{n}</b> live {tasks} {matches}{more}. Nothing has changed yet.</p>
<form method="post" action="/console/bulk" class="filters"><input type="hidden" name="csrf" value="{csrf}">
<input type="hidden" name="do" value="{action}">{hidden}
<label>Reason<input name="reason" required size="40"></label><button class="danger">{heading} {n} {tasks}</button>
<a href="/console/tasks?{back}">Back</a></form>"#
    );
    Ok(Html(page("Bulk action", who, &body)))
}

#[derive(Deserialize)]
pub struct Act {
    csrf: Option<String>,
    #[serde(rename = "do")]
    action: String,
    reason: Option<String>,
    /// The list's filter, as hidden fields.
    #[serde(flatten)]
    list: ListParams,
}

pub async fn act(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<Act>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    check_csrf(&s, f.csrf.as_deref())?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let cmd = command(&f.action).ok_or_else(|| Refused::Forbidden(format!("no bulk action {:?}", f.action)))?;
    let list = f.list;
    let query = query_of(&list);
    let p = BulkOperate {
        filter: filter_of(&list),
        command: cmd,
        actor: s.principal.name.clone(),
        reason: f.reason.unwrap_or_default(),
        dry_run: false,
        limit: LIMIT,
    };
    let r = state.store().bulk_operate(p).await?;
    state.engine.wake();
    state.engine.ring_events();
    let mut body = format!(
        r#"<h1>Done</h1><p><b data-acted>{}</b> task{} acted on, {} refused, of {} matched.</p>"#,
        r.acted,
        if r.acted == 1 { "" } else { "s" },
        r.failed,
        r.matched
    );
    for fail in &r.failures {
        let _ = write!(body, "<p class=\"error\">Task {}: {}</p>", fail.task_id, esc(&fail.error.to_string()));
    }
    let _ = write!(body, r#"<p><a href="/console/tasks?{}">Back to the list</a></p>"#, esc(&query));
    Ok(Html(page("Bulk action", who, &body)))
}
