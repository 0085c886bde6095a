//! The workflows: every definition and its versions, and one definition drawn, step by step, with
//! its branches side by side, so that an operator can see what a task of it runs (and what a
//! Conductor import became) without reading JSON.

use super::html::{esc, page};
use super::pages::urlencode;
use super::{Refused, session};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use serde::Deserialize;
use shiftboss_core::StepState;
use shiftboss_core::model::StepRecord;
use shiftboss_core::token::Scope;
use shiftboss_core::workflow::{StepDef, StepKind, WorkflowDef, step::is_dynamic};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

/// What a task's rows say of each step of its definition: the latest instance's state, and how
/// many instances there are (a loop's passes, a fork_each's items).
type Reached = HashMap<String, (StepState, usize)>;

pub async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let mut all = state.store().list_workflows().await?;
    all.sort_by(|a, b| a.name.cmp(&b.name).then(b.version.cmp(&a.version)));
    let mut b = String::from(
        "<h1>Workflows</h1><table><tr><th>Workflow</th><th>Newest version</th><th>Registered</th><th>Older versions</th><th>Description</th></tr>",
    );
    let mut i = 0;
    while i < all.len() {
        let newest = &all[i];
        let same = all[i..].iter().take_while(|w| w.name == newest.name).count();
        let older: Vec<String> = all[i + 1..i + same]
            .iter()
            .map(|w| format!(r#"<a href="/console/workflows/{}?version={1}">v{1}</a>"#, urlencode(&w.name), w.version))
            .collect();
        let _ = write!(
            b,
            r#"<tr><td><a href="/console/workflows/{}">{}</a></td><td>v{}</td><td class="t">{}</td><td>{}</td><td>{}</td></tr>"#,
            urlencode(&newest.name),
            esc(&newest.name),
            newest.version,
            newest.created_at,
            older.join(" "),
            esc(newest.description.as_deref().unwrap_or(""))
        );
        i += same;
    }
    if all.is_empty() {
        b.push_str(r#"<tr><td colspan="5" class="muted">No workflow is registered yet.</td></tr>"#);
    }
    b.push_str("</table>");
    Ok(Html(page("Workflows", Some((&s.principal.name, &s.csrf)), &b)))
}

#[derive(Deserialize, Default)]
pub struct ShowParams {
    version: Option<u32>,
}

pub async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<ShowParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let who = Some((s.principal.name.as_str(), s.csrf.as_str()));
    let Some(def) = state.store().get_workflow(&name, q.version).await? else {
        let what = q.version.map(|v| format!(" version {v}")).unwrap_or_default();
        let body = format!(r#"<h1>Workflows</h1><p class="error">No workflow {}{what}.</p>"#, esc(&name));
        return Ok(Html(page("Workflows", who, &body)));
    };
    let versions: Vec<u32> = {
        let mut v: Vec<u32> =
            state.store().list_workflows().await?.into_iter().filter(|w| w.name == name).map(|w| w.version).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    };
    let mut b = format!("<h1>{} <span class=\"muted\">v{}</span></h1>", esc(&def.name), def.version);
    if let Some(d) = &def.description {
        let _ = write!(b, "<p>{}</p>", esc(d));
    }
    b.push_str(r#"<nav class="tabs">"#);
    for v in &versions {
        let current = if *v == def.version { r#" aria-current="page""# } else { "" };
        let _ = write!(b, r#"<a href="/console/workflows/{}?version={v}"{current}>v{v}</a> "#, urlencode(&def.name));
    }
    let _ = write!(b, r#"<a href="/console/tasks?workflow={}">Its tasks</a></nav>"#, urlencode(&def.name));
    b.push_str(&policies(&def));
    b.push_str(r#"<h2>Steps</h2><div class="flow">"#);
    draw_list(&mut b, &def.steps, None);
    b.push_str("</div>");
    let json = serde_json::to_string_pretty(&def).unwrap_or_default();
    let _ = write!(b, "<details><summary>The definition as JSON</summary><pre>{}</pre></details>", esc(&json));
    Ok(Html(page(&def.name, who, &b)))
}

/// The workflow's own settings, in words.
fn policies(def: &WorkflowDef) -> String {
    let mut items = Vec::new();
    if let Some(t) = def.timeout {
        items.push(format!("a task fails after {}", secs(t)));
    }
    items.push(
        if def.compensate_on_failure { "a failed task is compensated" } else { "a failed task is not compensated" }
            .into(),
    );
    if def.compensate_on_cancel {
        items.push("a cancelled task is compensated".into());
    }
    if let Some(w) = &def.on_failure {
        items.push(format!(r#"a failed task starts <a href="/console/workflows/{}">{}</a>"#, urlencode(w), esc(w)));
    }
    if let Some(serde_json::Value::Object(v)) = &def.variables {
        let names: Vec<String> = v.keys().map(|k| esc(k)).collect();
        items.push(format!("variables: {}", names.join(", ")));
    }
    format!(r#"<p class="muted">{}</p>"#, items.join(" · "))
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A task's workflow drawn with each step coloured by where its rows stand (not reached yet:
/// dimmed), for the task's page.
pub fn drawn_for_task(def: &WorkflowDef, rows: &[StepRecord]) -> String {
    let mut reached: Reached = HashMap::new();
    for r in rows.iter().filter(|r| r.compensates.is_none()) {
        let e = reached.entry(shiftboss_core::decider::base_name(&r.name).to_owned()).or_insert((r.state, 0));
        // Rows come in creation order: the last one is the latest instance.
        *e = (r.state, e.1 + 1);
    }
    let mut b = String::from(r#"<div class="flow">"#);
    draw_list(&mut b, &def.steps, Some(&reached));
    b.push_str("</div>");
    b
}

fn draw_list(b: &mut String, steps: &[StepDef], reached: Option<&Reached>) {
    b.push_str(r#"<ol class="steps">"#);
    for s in steps {
        b.push_str("<li>");
        draw(b, s, reached);
        b.push_str("</li>");
    }
    b.push_str("</ol>");
}

/// One step as a box: its name and kind, what it does in words, and the steps nested in it; on a
/// task's page, where its rows stand.
fn draw(b: &mut String, s: &StepDef, reached: Option<&Reached>) {
    let (class, badge) = match reached.map(|r| r.get(&s.name)) {
        None => (String::new(), String::new()),
        Some(None) => (" st-none".to_owned(), r#" <span class="muted">not reached</span>"#.to_owned()),
        Some(Some((state, n))) => {
            let times = if *n > 1 { format!(" ×{n}") } else { String::new() };
            (
                format!(" st-{}", state.as_str()),
                format!(r#" <span class="state s-{0}">{0}{times}</span>"#, state.as_str()),
            )
        }
    };
    let _ = write!(
        b,
        r#"<div class="node k-{}{class}"><div><b>{}</b> <span class="kind">{}</span>{badge}</div>"#,
        s.kind.as_str(),
        esc(&s.name),
        s.kind.as_str().replace('_', " ")
    );
    let mut lines: Vec<String> = Vec::new();
    let code = |t: &str| format!("<code>{}</code>", esc(t));
    let workflow_link = |w: &str| {
        if is_dynamic(w) {
            format!("the workflow {} names", code(w))
        } else {
            format!(r#"<a href="/console/workflows/{}">{}</a>"#, urlencode(w), esc(w))
        }
    };
    match s.kind {
        StepKind::Agent => {
            let agent = s.agent_name();
            lines.push(if is_dynamic(agent) {
                format!("calls the agent {} chooses", code(agent))
            } else {
                format!("calls <b>{}</b>, {} an attempt", esc(agent), secs(s.timeout()))
            });
            if let Some(d) = s.delay {
                lines.push(format!("its first attempt is due {} after it is reached", secs(d)));
            }
            if let Some(d) = &s.domain {
                lines.push(format!("domain {}", esc(d)));
            }
        }
        StepKind::Switch => lines.push(format!("picks a case by {}", code(s.expression.as_deref().unwrap_or("")))),
        StepKind::Fork if s.join_on.is_empty() => {
            lines.push("runs its branches side by side and joins them all".into())
        }
        StepKind::Fork => {
            lines.push(format!("joins the branches ending in {}; the others run on", esc(&s.join_on.join(", "))))
        }
        StepKind::ForkEach => {
            let items = match &s.items {
                Some(serde_json::Value::String(t)) => t.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            lines.push(format!("runs its body for each item of {}, side by side", code(&items)));
        }
        StepKind::DoWhile => lines.push(format!(
            "runs its body, then again while {} (at most {} passes)",
            code(s.condition.as_deref().unwrap_or("")),
            s.max_iterations.unwrap_or(shiftboss_core::workflow::DEFAULT_MAX_ITERATIONS)
        )),
        StepKind::SubWorkflow => {
            lines.push(format!("runs {} and waits for it", workflow_link(s.workflow.as_deref().unwrap_or(""))))
        }
        StepKind::StartWorkflow => {
            lines.push(format!("starts {} and goes on", workflow_link(s.workflow.as_deref().unwrap_or(""))))
        }
        StepKind::Wait => lines.push(match (&s.duration, &s.duration_from, &s.until, &s.signal) {
            (Some(d), ..) => format!("waits {}", secs(*d)),
            (_, Some(d), ..) => format!("waits as long as {} says", code(d)),
            (_, _, Some(u), _) => format!("waits until {}", code(u)),
            (_, _, _, Some(sig)) => format!("waits for the signal <b>{}</b>", esc(sig)),
            _ => "waits".into(),
        }),
        StepKind::Terminate => {
            let status = s.status.map(|st| format!("{st:?}").to_lowercase()).unwrap_or_else(|| "completed".into());
            let why = s.reason.as_deref().map(|r| format!(": {}", code(r))).unwrap_or_default();
            lines.push(format!("ends the task as {status}{why}"));
        }
        StepKind::Set => match &s.variables {
            Some(serde_json::Value::Object(v)) if !v.is_empty() => {
                let names: Vec<String> = v.keys().map(|k| esc(k)).collect();
                lines.push(format!("sets {}", names.join(", ")));
            }
            _ => lines.push("does nothing but record its output".into()),
        },
    }
    if s.optional {
        lines.push("optional: its failure fails nothing".into());
    }
    if s.permissive {
        lines.push("permissive: the task goes on, and fails at the end".into());
    }
    if let Some(c) = &s.compensate {
        lines.push(format!("undone by <b>{}</b> ({})", esc(&c.name), esc(c.agent_name())));
    }
    for l in lines {
        let _ = write!(b, r#"<div class="what">{l}</div>"#);
    }
    let branches: Vec<(String, &[StepDef])> = match s.kind {
        StepKind::Switch => s
            .cases
            .iter()
            .map(|(k, v)| (format!("case {}", esc(k)), v.as_slice()))
            .chain((!s.default.is_empty()).then(|| ("otherwise".to_owned(), s.default.as_slice())))
            .collect(),
        StepKind::Fork => s
            .branches
            .iter()
            .enumerate()
            .map(|(i, br)| {
                let runs_on = !s.join_on.is_empty() && !br.last().is_some_and(|l| s.join_on.contains(&l.name));
                (format!("branch {}{}", i + 1, if runs_on { " (runs on)" } else { "" }), br.as_slice())
            })
            .collect(),
        StepKind::DoWhile => vec![("each pass".to_owned(), s.body.as_slice())],
        StepKind::ForkEach => vec![("for each item".to_owned(), s.body.as_slice())],
        _ => Vec::new(),
    };
    if !branches.is_empty() {
        b.push_str(r#"<div class="branches">"#);
        for (label, steps) in branches {
            let _ = write!(b, r#"<div class="branch"><div class="label">{label}</div>"#);
            draw_list(b, steps, reached);
            b.push_str("</div>");
        }
        b.push_str("</div>");
    }
    b.push_str("</div>");
}
