//! The status channels in the console (issue 18's outbox, issue 20's page): the deliveries by
//! state, newest first and paged, with why each is waiting or dead; dead ones sent again after a
//! confirmation, one or every dead one of a subscription; and the standing subscriptions. The
//! overview's webhook backlog and recent alerts are made here too.

use super::html::{esc, page};
use super::{Refused, check_csrf, session};
use crate::state::AppState;
use axum::extract::{Form, Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use shiftboss_core::Timestamp;
use shiftboss_core::token::Scope;
use shiftboss_store::event_kind::ALERT_KINDS;
use shiftboss_store::{
    DeliveryQuery, DeliveryRecord, DeliveryState, EventCursor, EventFilter, MessageKind, ReadEvents, Redeliver, Store,
    StoreError, StreamEvent,
};
use std::fmt::Write;

/// Rows per page; also the most a backlog count reads before it says "at least".
const PAGE: u32 = 100;
const COUNT_CAP: u32 = 1000;

#[derive(Deserialize, Default)]
pub struct ListParams {
    state: Option<String>,
    subscription: Option<String>,
    before: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<ListParams>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Read).await?;
    let store = state.store();
    let st = match q.state.as_deref().filter(|v| !v.is_empty()) {
        None => DeliveryState::Dead,
        Some(v) => DeliveryState::parse(v).ok_or_else(|| Refused::Forbidden(format!("no delivery state {v:?}")))?,
    };
    let subscription = q.subscription.as_deref().filter(|v| !v.is_empty()).and_then(|v| v.parse::<i64>().ok());
    let before = q.before.as_deref().and_then(|v| v.parse::<i64>().ok());
    let rows =
        store.list_deliveries(DeliveryQuery { state: Some(st), subscription, task: None, before, limit: PAGE }).await?;
    let now = store.now().await?;
    let mut b = String::from("<h1>Deliveries</h1><p class=\"muted\">The status channels' webhooks, newest first.</p>");
    b.push_str(r#"<nav class="tabs">"#);
    for (name, label) in [("dead", "Dead"), ("pending", "Pending"), ("delivered", "Delivered")] {
        let current = if name == st.as_str() { r#" aria-current="page""# } else { "" };
        let _ = write!(b, r#"<a href="/console/deliveries?state={name}"{current}>{label}</a>"#);
    }
    b.push_str("</nav>");
    if st == DeliveryState::Dead && !rows.is_empty() && s.principal.scopes.allows(Scope::Operate) {
        let subs: std::collections::BTreeSet<i64> = rows.iter().map(|d| d.subscription_id).collect();
        b.push_str(r#"<div class="actions">"#);
        for sub in subs {
            let _ = write!(
                b,
                r#"<a href="/console/deliveries/redeliver?subscription={sub}"><button type="button">Redeliver every dead one of subscription {sub}</button></a>"#
            );
        }
        b.push_str("</div>");
    }
    b.push_str(
        "<table><tr><th>Delivery</th><th>Subscription</th><th>Task</th><th>Message</th><th>Attempts</th><th>Why</th><th></th></tr>",
    );
    for d in &rows {
        let act = if st == DeliveryState::Dead && s.principal.scopes.allows(Scope::Operate) {
            format!(r#"<a href="/console/deliveries/redeliver?id={}">Redeliver</a>"#, d.id)
        } else {
            String::new()
        };
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td><a href="/console/tasks/{}">{} ({})</a></td><td>{} #{}</td><td>{}</td><td>{}</td><td>{act}</td></tr>"#,
            d.id,
            d.subscription_id,
            d.task_id,
            d.task_id,
            esc(&d.task_key),
            esc(d.kind.as_str()),
            d.seq,
            d.attempts,
            esc(&why(d, now)),
        );
    }
    if rows.is_empty() {
        let _ = write!(b, r#"<tr><td colspan="7" class="muted">No {} deliveries.</td></tr>"#, st.as_str());
    }
    b.push_str("</table>");
    if rows.len() == PAGE as usize
        && let Some(last) = rows.last()
    {
        let _ = write!(b, r#"<p><a href="/console/deliveries?state={}&before={}">Older</a></p>"#, st.as_str(), last.id);
    }
    subscriptions(&mut b, store.as_ref()).await?;
    Ok(Html(page("Deliveries", Some((&s.principal.name, &s.csrf)), &b)))
}

/// A delivery's state in words.
fn why(d: &DeliveryRecord, now: Timestamp) -> String {
    let status = d.last_status.map(|s| format!("HTTP {s}")).or_else(|| d.last_error.clone());
    match d.state {
        DeliveryState::Delivered => {
            format!("delivered at {}", d.delivered_at.map(|t| t.to_string()).unwrap_or_else(|| "?".into()))
        }
        DeliveryState::Dead => format!("gave up: {}", status.unwrap_or_else(|| "no answer".into())),
        DeliveryState::Pending if d.due_at <= now => match status {
            Some(s) => format!("due now, after {s}"),
            None => "due now".into(),
        },
        DeliveryState::Pending => {
            let wait = (d.due_at.0 - now.0) / 1000;
            match status {
                Some(s) => format!("next try in {wait} s, after {s}"),
                None => format!("next try in {wait} s"),
            }
        }
    }
}

async fn subscriptions(b: &mut String, store: &dyn Store) -> Result<(), StoreError> {
    let subs = store.list_subscriptions().await?;
    b.push_str("<h2>Standing subscriptions</h2><table><tr><th>Id</th><th>URL</th><th>Workflow</th><th>Messages</th><th>State</th></tr>");
    let mut any = false;
    for sub in subs.iter().filter(|s| s.task_id.is_none()) {
        any = true;
        let kinds: Vec<&str> = sub.kinds.iter().map(|k| k.as_str()).collect();
        let state = match &sub.disabled_reason {
            Some(r) => format!("{} ({})", sub.state.as_str(), r),
            None => sub.state.as_str().to_owned(),
        };
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            sub.id,
            esc(&sub.url),
            esc(sub.workflow.as_deref().unwrap_or("every workflow")),
            esc(&if kinds.is_empty() || kinds.len() == MessageKind::ALL.len() {
                "every message".to_owned()
            } else {
                kinds.join(", ")
            }),
            esc(&state)
        );
    }
    if !any {
        b.push_str(r#"<tr><td colspan="5" class="muted">None (tasks may still have channels of their own).</td></tr>"#);
    }
    b.push_str("</table>");
    Ok(())
}

#[derive(Deserialize, Default)]
pub struct Target {
    id: Option<String>,
    subscription: Option<String>,
}

impl Target {
    fn redeliver(&self, dry_run: bool) -> Result<Redeliver, Refused> {
        let n = |v: &str| v.parse::<i64>().map_err(|_| Refused::Forbidden(format!("{v:?} is not an id")));
        match (self.id.as_deref().filter(|v| !v.is_empty()), self.subscription.as_deref().filter(|v| !v.is_empty())) {
            (Some(id), None) => Ok(Redeliver { ids: vec![n(id)?], subscription: None, dry_run }),
            (None, Some(sub)) => Ok(Redeliver { ids: Vec::new(), subscription: Some(n(sub)?), dry_run }),
            _ => Err(Refused::Forbidden("name one delivery or one subscription".into())),
        }
    }
}

/// The confirmation: how many deliveries would be sent again (a dry run), and the form.
pub async fn confirm(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(t): Query<Target>,
) -> Result<Html<String>, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    let would = state.store().redeliver(t.redeliver(true)?).await?;
    let what = match (&t.id, &t.subscription) {
        (Some(id), _) if !id.is_empty() => format!("delivery {}", esc(id)),
        (_, Some(sub)) => format!("every dead delivery of subscription {}", esc(sub)),
        _ => String::new(),
    };
    let body = format!(
        r#"<h1>Redeliver {what}?</h1><p>{} deliver{} will be sent again, attempts counted from zero, on the subscription's retry schedule.</p>
<form method="post" action="/console/deliveries/redeliver" class="filters">
<input type="hidden" name="csrf" value="{}"><input type="hidden" name="id" value="{}"><input type="hidden" name="subscription" value="{}">
<button class="danger">Redeliver</button> <a href="/console/deliveries?state=dead">Back</a></form>"#,
        would.ids.len(),
        if would.ids.len() == 1 { "y" } else { "ies" },
        esc(&s.csrf),
        esc(t.id.as_deref().unwrap_or("")),
        esc(t.subscription.as_deref().unwrap_or("")),
    );
    Ok(Html(page("Confirm", Some((&s.principal.name, &s.csrf)), &body)))
}

#[derive(Deserialize)]
pub struct RedeliverForm {
    csrf: Option<String>,
    #[serde(flatten)]
    target: Target,
}

pub async fn redeliver(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<RedeliverForm>,
) -> Result<Response, Refused> {
    let s = session(&state, &headers, Scope::Operate).await?;
    check_csrf(&s, f.csrf.as_deref())?;
    state.store().redeliver(f.target.redeliver(false)?).await?;
    Ok(Redirect::to("/console/deliveries?state=pending").into_response())
}

/// The overview's webhook backlog: pending and dead deliveries (counted up to a cap, by the store),
/// and how long the earliest due pending one has been due.
pub async fn backlog(b: &mut String, store: &dyn Store) -> Result<(), StoreError> {
    let backlog = store.delivery_backlog(COUNT_CAP).await?;
    let count = |n: u64| if n >= u64::from(COUNT_CAP) { format!("{COUNT_CAP}+") } else { n.to_string() };
    let due = match backlog.oldest_due {
        None => "Nothing is waiting to be sent.".to_owned(),
        Some(t) if t.0 <= backlog.now.0 => {
            format!("The earliest due delivery has been due for {} s.", (backlog.now.0 - t.0) / 1000)
        }
        Some(t) => format!(
            "Every pending delivery waits for a retry; the next is due in {} s.",
            (t.0 - backlog.now.0 + 999) / 1000
        ),
    };
    let _ = write!(
        b,
        r#"<h2>Webhook backlog</h2><div class="cards"><a class="card" href="/console/deliveries?state=pending">pending<b>{}</b></a><a class="card" href="/console/deliveries?state=dead">dead<b>{}</b></a></div><p class="muted">{due}</p>"#,
        count(backlog.pending),
        count(backlog.dead),
    );
    Ok(())
}

/// The most alerts the overview shows, and how far back in the log it looks for them.
const RECENT_ALERTS: usize = 10;
const LOOK_BACK: i64 = 10_000;

/// The overview's recent alerts: the newest alert events among the log's last events.
pub async fn recent_alerts(b: &mut String, store: &dyn Store) -> Result<(), StoreError> {
    let filter = EventFilter { kinds: ALERT_KINDS.iter().map(|k| k.to_string()).collect(), ..EventFilter::default() };
    // A first read from the end only finds where the end is.
    let end = store.read_events(ReadEvents { cursor: EventCursor::latest(), filter: filter.clone(), limit: 1 }).await?;
    let mut cursor = EventCursor::after(end.cursor.after.saturating_sub(LOOK_BACK));
    let mut found: Vec<StreamEvent> = Vec::new();
    // The scan is bounded per read; a few reads cover the look back.
    for _ in 0..4 {
        let read = store.read_events(ReadEvents { cursor, filter: filter.clone(), limit: 500 }).await?;
        found.extend(read.events);
        cursor = read.cursor;
        if !read.again || cursor.after >= end.cursor.after {
            break;
        }
    }
    b.push_str(
        "<h2>Recent alerts</h2><table><tr><th>When</th><th>What</th><th>Task</th><th>Step</th><th>Why</th></tr>",
    );
    for e in found.iter().rev().take(RECENT_ALERTS) {
        let ev = &e.event;
        let reason = ["error", "reason"].iter().find_map(|k| ev.detail.get(*k).and_then(|v| v.as_str())).unwrap_or("");
        let reason: String = reason.chars().take(200).collect();
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td><a href="/console/tasks/{}">{} ({})</a></td><td>{}</td><td>{}</td></tr>"#,
            ev.at,
            esc(&ev.kind),
            ev.task_id,
            ev.task_id,
            esc(&e.task_key),
            esc(e.step.as_deref().unwrap_or("")),
            esc(&reason)
        );
    }
    if found.is_empty() {
        b.push_str(r#"<tr><td colspan="5" class="muted">None among the log's last 10,000 events.</td></tr>"#);
    }
    b.push_str("</table>");
    Ok(())
}
