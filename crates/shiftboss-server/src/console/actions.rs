//! Operator actions from the console: each button leads to a page that says what will happen, and
//! only its form (a POST with the session's CSRF token and a reason) acts, through the same store
//! verbs as the API's actions, with the token's name as the actor.

use super::html::{esc, page};
use super::{Refused, check_csrf, session};
use crate::state::AppState;
use axum::extract::{Form, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use shiftboss_core::token::Scope;
use shiftboss_core::{StepState, TaskState};
use shiftboss_store::{OperateTask, ResubmitStep, StoreError, TaskCommand, TaskDetail};
use std::fmt::Write;

/// What each action does, in the words its confirmation shows.
fn describe(action: &str) -> Option<&'static str> {
    Some(match action {
        "resubmit" => "Sends every step in Error back to Pending with its failure count reset; the task runs again.",
        "retry" => "Runs the steps in Error again (in a failed compensation: goes on compensating).",
        "cancel" => {
            "Cancels the task: its live steps are cancelled, and its completed steps compensated if the workflow says so."
        }
        "pause" => "Holds the task: no new step is claimed until it is resumed; running steps finish.",
        "resume" => "Lets a paused task run again.",
        "terminate" => "Ends the task at once, undoing nothing.",
        "signal" => "Ends the wait for this signal; the task goes on.",
        "skip" => "Records the step as processed with an empty output, without running it.",
        "rerun" => {
            "Runs the task again from this step: it and every step started after it run anew (with new idempotency keys), and the task is running again."
        }
        "compensate" => {
            "Undoes what the task did: the compensation of each completed step that has one runs, newest first; the task ends compensated (or failed, if a compensation fails for good)."
        }
        _ => return None,
    })
}

/// The actions a task in this state may take.
fn offered(d: &TaskDetail) -> Vec<&'static str> {
    let errors = d.steps.iter().any(|s| s.state == StepState::Error);
    let mut out = Vec::new();
    if errors {
        out.push("resubmit");
    }
    // A signal ends a wait: offered while a wait step is live.
    let waits = d.steps.iter().any(|s| {
        s.kind == shiftboss_core::workflow::StepKind::Wait
            && matches!(s.state, StepState::Pending | StepState::Processing)
    });
    match d.task.state {
        TaskState::Running | TaskState::Compensating => {
            out.extend(["pause", "cancel", "terminate"]);
            if waits {
                out.push("signal");
            }
            out.push("skip");
        }
        TaskState::Paused => out.extend(["resume", "cancel", "terminate", "rerun"]),
        TaskState::Failed => out.extend(["retry", "cancel", "terminate", "rerun"]),
        TaskState::Completed | TaskState::Cancelled | TaskState::Compensated => out.push("rerun"),
        _ => {}
    }
    // Ended without undoing what it did: something done, and no compensation ran yet.
    let undoable = matches!(d.task.state, TaskState::Failed | TaskState::Cancelled | TaskState::Terminated)
        && d.task.parent_task_id.is_none()
        && d.steps.iter().any(|s| s.state == StepState::Processed && s.compensates.is_none())
        && d.steps.iter().all(|s| s.compensates.is_none());
    if undoable {
        out.push("compensate");
    }
    out
}

/// The task page's buttons: links to each confirmation.
pub fn buttons(b: &mut String, d: &TaskDetail, _csrf: &str, archived: bool) {
    if archived {
        return;
    }
    let acts = offered(d);
    if acts.is_empty() {
        return;
    }
    b.push_str(r#"<div class="actions">"#);
    for a in acts {
        let _ = write!(
            b,
            r#"<a href="/console/tasks/{}/act?do={a}"><button type="button">{}</button></a>"#,
            d.task.id,
            title(a)
        );
    }
    b.push_str("</div>");
}

fn title(a: &str) -> String {
    let mut c = a.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

#[derive(Deserialize)]
pub struct Which {
    #[serde(rename = "do")]
    action: String,
}

pub async fn confirm(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(w): Query<Which>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let what = describe(&w.action).ok_or_else(|| Refused::Forbidden(format!("no action {:?}", w.action)))?;
    let task_id = crate::wire::task_id(&id).ok_or_else(|| Refused::Forbidden("no such task".into()))?;
    let d = state.store().get_task(task_id).await?.ok_or_else(|| Refused::Forbidden("no such live task".into()))?;
    let mut extra = String::new();
    let mut note = String::new();
    if w.action == "signal" {
        extra.push_str(r#"<label>Signal<input name="name" required></label>"#);
    }
    if w.action == "skip" {
        extra.push_str(r#"<label>Step<input name="name" required></label>"#);
    }
    if w.action == "rerun" {
        // A compensation is rerun from the step it undoes.
        extra.push_str(r#"<label>From step<select name="name" required>"#);
        for st in d.steps.iter().filter(|s| s.compensates.is_none()) {
            let _ = write!(extra, r#"<option value="{0}">{0} ({1})</option>"#, esc(&st.name), st.state.as_str());
        }
        extra.push_str("</select></label>");
    }
    if w.action == "compensate" {
        let mut done: Vec<_> =
            d.steps.iter().filter(|s| s.state == StepState::Processed && s.compensates.is_none()).collect();
        done.sort_by_key(|s| std::cmp::Reverse((s.updated_at, s.id)));
        let names: Vec<&str> = done.iter().map(|s| s.name.as_str()).collect();
        let _ = write!(
            note,
            "<p>Completed steps, newest first: {}. Those whose definition names a compensation are undone.</p>",
            esc(&names.join(", "))
        );
    }
    if w.action == "resubmit" {
        let names: Vec<&str> =
            d.steps.iter().filter(|s| s.state == StepState::Error).map(|s| s.name.as_str()).collect();
        let _ = write!(note, "<p>Steps in Error: {}</p>", esc(&names.join(", ")));
    }
    let body = format!(
        r#"<h1>{} task {} ({})?</h1><p>{what}</p>{note}<form method="post" action="/console/tasks/{}/act" class="filters">
<input type="hidden" name="csrf" value="{}"><input type="hidden" name="do" value="{}">{extra}
<label>Reason<input name="reason" required size="40"></label><button class="danger">{}</button>
<a href="/console/tasks/{}">Back</a></form>"#,
        title(&w.action),
        d.task.id,
        esc(&d.task.key),
        d.task.id,
        esc(&s.csrf),
        esc(&w.action),
        title(&w.action),
        d.task.id
    );
    Ok(Html(page("Confirm", who, &body)))
}

#[derive(Deserialize)]
pub struct Act {
    csrf: Option<String>,
    #[serde(rename = "do")]
    action: String,
    reason: Option<String>,
    name: Option<String>,
}

pub async fn act(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<Act>,
) -> Result<Response, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    check_csrf(&s, f.csrf.as_deref())?;
    let task_id = crate::wire::task_id(&id).ok_or_else(|| Refused::Forbidden("no such task".into()))?;
    let actor = s.principal.name.clone();
    let reason = f.reason.unwrap_or_default();
    let name = f.name.unwrap_or_default();
    let command = match f.action.as_str() {
        "resubmit" => None,
        "retry" => Some(TaskCommand::Retry),
        "cancel" => Some(TaskCommand::Cancel),
        "pause" => Some(TaskCommand::Pause),
        "resume" => Some(TaskCommand::Resume),
        "terminate" => Some(TaskCommand::Terminate),
        "signal" => Some(TaskCommand::Signal { name, payload: serde_json::json!({}) }),
        "skip" => Some(TaskCommand::Skip { step: name, output: serde_json::json!({}) }),
        "rerun" => Some(TaskCommand::Rerun { from: name }),
        "compensate" => Some(TaskCommand::Compensate),
        other => return Err(Refused::Forbidden(format!("no action {other:?}"))),
    };
    let store = state.store();
    let done = match command {
        Some(command) => store.operate_task(OperateTask { task_id, actor, reason, command }).await,
        None => {
            let d = store.get_task(task_id).await?.ok_or_else(|| Refused::Forbidden("no such live task".into()))?;
            let mut r = Ok(());
            for st in d.steps.iter().filter(|s| s.state == StepState::Error) {
                let p = ResubmitStep { step_id: st.id, actor: actor.clone(), reason: reason.clone() };
                r = store.resubmit_step(p).await;
                if r.is_err() {
                    break;
                }
            }
            r
        }
    };
    match done {
        Ok(()) => {
            state.engine.wake();
            state.engine.ring_events();
            Ok(Redirect::to(&format!("/console/tasks/{}", task_id)).into_response())
        }
        Err(StoreError::Conflict(e) | StoreError::InvalidInput(e)) => {
            let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
            let body = format!(
                r#"<h1>Not done</h1><p class="error">{}</p><p><a href="/console/tasks/{}">Back to the task</a></p>"#,
                esc(&e),
                task_id
            );
            Ok((axum::http::StatusCode::CONFLICT, Html(page("Not done", who, &body))).into_response())
        }
        Err(e) => Err(e.into()),
    }
}
