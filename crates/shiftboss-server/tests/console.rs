//! The console over HTTP, in process, on a SQLite store: pages refuse a request without a session
//! (to the login page), the login sets an HttpOnly, SameSite=Strict cookie, an action without the
//! session's CSRF token is refused and changes nothing, a failed task's page says why, and its
//! resubmission through the confirmation's form runs it again.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::json;
use shiftboss_core::token::{Scope, Scopes, hash_secret, mint_secret};
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{InstanceId, TaskState};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig};
use shiftboss_server::{ApiConfig, app};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{NewApiToken, Store, SubmitTask};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tower::ServiceExt;

/// Refuses for good until told to accept.
struct Gate(Arc<AtomicBool>);

#[async_trait::async_trait]
impl Agent for Gate {
    async fn call(&self, _call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        if self.0.load(Ordering::SeqCst) {
            Ok(json!({"paid": true}))
        } else {
            Err(AgentError::Permanent("card declined".into()))
        }
    }
}

/// Always answers at once.
struct Stock;

#[async_trait::async_trait]
impl Agent for Stock {
    async fn call(&self, _call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        Ok(json!({"held": true}))
    }
}

/// Answers only after a minute: its step stays running.
struct Hang;

#[async_trait::async_trait]
impl Agent for Hang {
    async fn call(&self, _call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!({}))
    }
}

async fn send(
    router: &Router,
    method: Method,
    uri: &str,
    cookie: Option<&str>,
    form: Option<String>,
) -> (StatusCode, String, axum::http::HeaderMap) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    if form.is_some() {
        b = b.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let req = b.body(form.map(Body::from).unwrap_or_else(Body::empty)).unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned(), headers)
}

/// A new API token of this name with the read and operate scopes; its secret.
async fn operator_token(store: &dyn Store, name: &str) -> String {
    let secret = mint_secret();
    let t = NewApiToken {
        name: name.into(),
        scopes: Scopes::of([Scope::Read, Scope::Operate]),
        secret_hash: hash_secret(&secret),
    };
    store.create_api_token(t).await.unwrap();
    secret
}

fn csrf_in(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a CSRF field") + r#"name="csrf" value=""#.len();
    html[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_see_why_a_task_failed_and_resubmit_it() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let open = Arc::new(AtomicBool::new(false));
    let mut config = EngineConfig::default();
    config.scheduler.poll_interval = Duration::from_millis(20);
    let engine = Engine::builder(store.clone(), InstanceId::new("console-1").unwrap())
        .agent("pay", Gate(open.clone()))
        .config(config)
        .build()
        .unwrap();
    let running = engine.start();
    let def = json!({"name": "order", "steps": [{"name": "charge", "agent": "pay", "timeout": "5s"},
        {"name": "hold", "kind": "wait", "signal": "approve"}]});
    engine.register_workflow(&WorkflowDef::from_json(&def.to_string()).unwrap()).await.unwrap();
    let (router, _) = app(engine.clone(), ApiConfig::default()).unwrap();
    let secret = operator_token(store.as_ref(), "ann").await;

    // No session: every page sends to the login page; a wrong token does not sign in.
    for page in ["/", "/console/tasks", "/console/tasks/1"] {
        let (s, _, h) = send(&router, Method::GET, page, None, None).await;
        assert_eq!(s, StatusCode::SEE_OTHER, "{page}");
        assert_eq!(h[header::LOCATION], "/console/login");
    }
    let (s, body, _) = send(&router, Method::POST, "/console/login", None, Some("token=nope".into())).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(body.contains("Unknown or revoked token"));
    let (s, _, h) = send(&router, Method::POST, "/console/login", None, Some(format!("token={secret}"))).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let set = h[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"), "{set}");
    let cookie = set.split(';').next().unwrap().to_owned();

    // A task whose charge is declined: it fails, and its page says why.
    let task = engine
        .submit(SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: "o-1".into(),
            workflow: "order".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "shop".into(),
        })
        .await
        .unwrap()
        .task_id;
    assert_eq!(engine.wait_for(task, Duration::from_secs(20)).await.unwrap().state, TaskState::Failed);
    let (s, body, _) = send(&router, Method::GET, "/", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("Tasks by state") && body.contains("ann"));
    let (s, body, _) = send(&router, Method::GET, "/console/tasks?state=failed", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("o-1"), "the failed task is listed");
    let (_, body, _) = send(&router, Method::GET, "/console/tasks?state=completed", Some(&cookie), None).await;
    assert!(!body.contains("o-1"), "not among the completed ones");
    let page = format!("/console/tasks/{task}");
    let (s, body, _) = send(&router, Method::GET, &page, Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("in Error after 1 attempt") && body.contains("last error: card declined"), "{body}");

    // The confirmation says what will happen; without its CSRF token the action is refused.
    let (s, body, _) = send(&router, Method::GET, &format!("{page}/act?do=resubmit"), Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("Steps in Error: charge"));
    let csrf = csrf_in(&body);
    let act = format!("{page}/act");
    let (s, _, _) = send(&router, Method::POST, &act, Some(&cookie), Some("do=resubmit&reason=fixed".into())).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no CSRF token");
    let (s, _, _) = send(
        &router,
        Method::POST,
        &act,
        Some(&cookie),
        Some(format!("do=resubmit&reason=fixed&csrf={}", "0".repeat(csrf.len()))),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "a wrong CSRF token");
    assert_eq!(store.get_task(task).await.unwrap().unwrap().task.state, TaskState::Failed, "nothing changed");

    // With it: the charge goes through, and the task waits for its signal, which the page names.
    open.store(true, Ordering::SeqCst);
    let (s, _, h) =
        send(&router, Method::POST, &act, Some(&cookie), Some(format!("do=resubmit&reason=fixed&csrf={csrf}"))).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert_eq!(h[header::LOCATION], page.as_str());
    let mut said = String::new();
    for _ in 0..500 {
        let (_, body, _) = send(&router, Method::GET, &page, Some(&cookie), None).await;
        if body.contains("waiting for signal") {
            said = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(said.contains("waiting for signal &quot;approve&quot;"), "the page names the signal it waits for");
    assert!(said.contains("act?do=signal"), "a live wait: the signal is offered");
    let (s, _, _) =
        send(&router, Method::POST, &act, Some(&cookie), Some(format!("do=signal&name=approve&reason=ok&csrf={csrf}")))
            .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert_eq!(engine.wait_for(task, Duration::from_secs(20)).await.unwrap().state, TaskState::Completed);

    // Bulk: two more tasks fail; the dry run counts them and changes nothing; then both run again.
    open.store(false, Ordering::SeqCst);
    let mut failed = Vec::new();
    for key in ["o-2", "o-3"] {
        let s = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: key.into(),
            workflow: "order".into(),
            version: None,
            input: json!({}),
            priority: 0,
            actor: "shop".into(),
        };
        let id = engine.submit(s).await.unwrap().task_id;
        assert_eq!(engine.wait_for(id, Duration::from_secs(20)).await.unwrap().state, TaskState::Failed);
        failed.push(id);
    }
    let (s, body, _) = send(&router, Method::GET, "/console/bulk?do=resubmit&state=failed", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("<b data-count>2</b>"), "{body}");
    for id in &failed {
        assert_eq!(
            store.get_task(*id).await.unwrap().unwrap().task.state,
            TaskState::Failed,
            "a dry run changes nothing"
        );
    }
    let (s, _, _) =
        send(&router, Method::POST, "/console/bulk", Some(&cookie), Some("do=resubmit&state=failed&reason=x".into()))
            .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "a bulk action without the CSRF token");
    open.store(true, Ordering::SeqCst);
    let form = format!("do=resubmit&state=failed&reason=gateway+back&csrf={csrf}");
    let (s, body, _) = send(&router, Method::POST, "/console/bulk", Some(&cookie), Some(form)).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("<b data-acted>2</b>"), "{body}");
    for id in &failed {
        assert_ne!(store.get_task(*id).await.unwrap().unwrap().task.state, TaskState::Failed, "resubmitted");
    }

    // Sign out: the cookie is cleared (and the logout itself needs the CSRF token).
    let (s, _, _) = send(&router, Method::POST, "/console/logout", Some(&cookie), Some(String::new())).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _, h) = send(&router, Method::POST, "/console/logout", Some(&cookie), Some(format!("csrf={csrf}"))).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert!(h[header::SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    running.shutdown().await;
}

/// The console's other views: a step's timeline and its complete-by counting down, the overview's
/// charts, a handler's retry jobs, and a rerun from a step through its confirmation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timelines_charts_jobs_and_a_rerun_from_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
    let open = Arc::new(AtomicBool::new(true));
    let mut config = EngineConfig::default();
    config.scheduler.poll_interval = Duration::from_millis(20);
    let engine = Engine::builder(store.clone(), InstanceId::new("console-2").unwrap())
        .agent("pay", Gate(open.clone()))
        .agent("hang", Hang)
        .agent("stock", Stock)
        .config(config)
        .build()
        .unwrap();
    let running = engine.start();
    let def = json!({"name": "two", "steps": [{"name": "charge", "agent": "pay"}, {"name": "refund", "agent": "pay"}]});
    engine.register_workflow(&WorkflowDef::from_json(&def.to_string()).unwrap()).await.unwrap();
    let (router, _) = app(engine.clone(), ApiConfig::default()).unwrap();
    let secret = operator_token(store.as_ref(), "bo").await;
    let (_, _, h) = send(&router, Method::POST, "/console/login", None, Some(format!("token={secret}"))).await;
    let cookie = h[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_owned();

    let submit = SubmitTask { key: "t-1".into(), workflow: "two".into(), input: json!({}), ..SubmitTask::default() };
    let task = engine.submit(submit).await.unwrap().task_id;
    assert_eq!(engine.wait_for(task, Duration::from_secs(20)).await.unwrap().state, TaskState::Completed);
    let page = format!("/console/tasks/{task}");
    let (_, body, _) = send(&router, Method::GET, &page, Some(&cookie), None).await;
    assert!(body.contains("Step timelines") && body.contains("charge · 1 attempt · 0 failures"), "{body}");
    assert!(body.contains("claimed by console-2; lease token"), "a claim in words: {body}");

    // A rerun from the second step: the confirmation offers the steps, and only that one runs again.
    let (s, body, _) = send(&router, Method::GET, &format!("{page}/act?do=rerun"), Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains(r#"<option value="refund">refund (processed)</option>"#), "{body}");
    let csrf = csrf_in(&body);
    let form = format!("do=rerun&name=refund&reason=again&csrf={csrf}");
    let (s, _, _) = send(&router, Method::POST, &format!("{page}/act"), Some(&cookie), Some(form)).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert_eq!(engine.wait_for(task, Duration::from_secs(20)).await.unwrap().state, TaskState::Completed);
    let d = store.get_task(task).await.unwrap().unwrap();
    let claims = |name: &str| {
        let id = d.steps.iter().find(|s| s.name == name).unwrap().id;
        d.events.iter().filter(|e| e.step_id == Some(id) && e.kind == "step.claimed").count()
    };
    assert_eq!((claims("charge"), claims("refund")), (1, 1), "refund's row is new, charge's untouched");
    assert!(d.events.iter().any(|e| e.kind == "task.operated" && e.detail["from"] == "refund"));

    // A step that runs: its complete-by is a time the page counts down to.
    let slow = json!({"name": "slow", "steps": [{"name": "stall", "agent": "hang", "timeout": "60s"}]});
    engine.register_workflow(&WorkflowDef::from_json(&slow.to_string()).unwrap()).await.unwrap();
    let submit = SubmitTask { key: "s-1".into(), workflow: "slow".into(), input: json!({}), ..SubmitTask::default() };
    let stalled = engine.submit(submit).await.unwrap().task_id;
    let mut body = String::new();
    for _ in 0..500 {
        body = send(&router, Method::GET, &format!("/console/tasks/{stalled}"), Some(&cookie), None).await.1;
        if body.contains("<time data-at=") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let d = store.get_task(stalled).await.unwrap().unwrap();
    let by = d.steps[0].complete_by.expect("it runs");
    assert!(body.contains(&format!(r#"<time data-at="{}">"#, by.0)), "{body}");
    assert!(body.contains("act?do=pause") && !body.contains("act?do=signal"), "no wait: no signal to send: {body}");
    // Its worker's progress report and a log line, on its timeline.
    let (step, lease_token) = (d.steps[0].id, d.steps[0].lease_token);
    let beat = shiftboss_store::ExtendLease { step_id: step, lease_token, progress: Some(json!({"copied": 3})) };
    store.extend_lease(beat).await.unwrap();
    let lines = vec!["copying <3 of 10>".to_owned()];
    store
        .append_step_logs(shiftboss_store::StepLogs { step_id: step, actor: "worker:w9".into(), lines })
        .await
        .unwrap();
    let body = send(&router, Method::GET, &format!("/console/tasks/{stalled}"), Some(&cookie), None).await.1;
    assert!(body.contains(r#"last progress report: <code>{&quot;copied&quot;:3}</code>"#), "{body}");
    assert!(body.contains("log from worker:w9: copying &lt;3 of 10&gt;"), "escaped, in words: {body}");
    let (_, body, _) = send(&router, Method::GET, "/", Some(&cookie), None).await;
    assert!(body.contains("Steps and errors per second (the whole deployment)"), "{body}");
    open.store(false, Ordering::SeqCst);

    // Jobs: searched by handler, state and error text; the given-up ones resubmitted after a dry run.
    let job = engine.jobs().enqueue("pay", json!({"amount": 3}), Default::default()).await.unwrap().task_id;
    assert_eq!(engine.wait_for(job, Duration::from_secs(20)).await.unwrap().state, TaskState::Failed);
    let link = format!(r#"<a href="/console/tasks/{job}">{job}</a>"#);
    let (s, body, _) =
        send(&router, Method::GET, "/console/jobs?handler=pay&state=given_up&error=declined", Some(&cookie), None)
            .await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains(&link) && body.contains("card declined"), "{body}");
    for other in ["/console/jobs?state=succeeded", "/console/jobs?error=timeout", "/console/jobs?history=on"] {
        let (_, body, _) = send(&router, Method::GET, other, Some(&cookie), None).await;
        assert!(!body.contains(&link), "{other}: {body}");
    }
    let (_, body, _) = send(&router, Method::GET, "/console/jobs?state=nope", Some(&cookie), None).await;
    assert!(body.contains("state: "), "a bad state is said: {body}");
    let (s, body, _) = send(&router, Method::GET, "/console/jobs/resubmit?handler=pay", Some(&cookie), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("<b data-count>1</b>"), "{body}");
    assert_eq!(store.get_task(job).await.unwrap().unwrap().task.state, TaskState::Failed, "a dry run changes nothing");
    let (s, _, _) =
        send(&router, Method::POST, "/console/jobs/resubmit", Some(&cookie), Some("handler=pay&reason=x".into())).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no CSRF token");
    open.store(true, Ordering::SeqCst);
    let form = format!("handler=pay&reason=card+fixed&csrf={csrf}");
    let (s, body, _) = send(&router, Method::POST, "/console/jobs/resubmit", Some(&cookie), Some(form)).await;
    assert_eq!(s, StatusCode::OK);
    assert!(body.contains("<b data-acted>1</b>"), "{body}");
    assert_eq!(engine.wait_for(job, Duration::from_secs(20)).await.unwrap().state, TaskState::Completed);

    // A failed task its workflow does not undo, compensated from its page after a confirmation.
    open.store(false, Ordering::SeqCst);
    let undo = json!({"name": "undo", "compensate_on_failure": false, "steps": [
        {"name": "reserve", "agent": "stock", "compensate": {"name": "release", "agent": "stock"}},
        {"name": "charge", "agent": "pay"}]});
    let undo = WorkflowDef::from_json(&undo.to_string()).unwrap();
    engine.register_workflow(&undo).await.unwrap();
    let submit = SubmitTask { key: "u-1".into(), workflow: "undo".into(), input: json!({}), ..SubmitTask::default() };
    let failed = engine.submit(submit).await.unwrap().task_id;
    assert_eq!(engine.wait_for(failed, Duration::from_secs(20)).await.unwrap().state, TaskState::Failed);
    let page = format!("/console/tasks/{failed}");
    let (_, body, _) = send(&router, Method::GET, &page, Some(&cookie), None).await;
    assert!(body.contains(&format!(r#"href="{page}/act?do=compensate""#)), "offered: {body}");
    let (_, body, _) = send(&router, Method::GET, &format!("{page}/act?do=compensate"), Some(&cookie), None).await;
    assert!(body.contains("Completed steps, newest first: reserve."), "{body}");
    assert_eq!(store.get_task(failed).await.unwrap().unwrap().task.state, TaskState::Failed, "asking changes nothing");
    let form = format!("do=compensate&reason=refund+it&csrf={}", csrf_in(&body));
    let (s, _, _) = send(&router, Method::POST, &format!("{page}/act"), Some(&cookie), Some(form)).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert_eq!(engine.wait_for(failed, Duration::from_secs(20)).await.unwrap().state, TaskState::Compensated);
    let d = store.get_task(failed).await.unwrap().unwrap();
    assert!(d.steps.iter().any(|s| s.name == "release" && s.compensates.as_deref() == Some("reserve")));
    let (_, body, _) = send(&router, Method::GET, &page, Some(&cookie), None).await;
    assert!(!body.contains("act?do=compensate"), "not offered twice: {body}");

    // Find: by an exact id (straight to the task), by the start of a key, by a correlation id.
    let submit = SubmitTask {
        key: "invoice-77".into(),
        workflow: "undo".into(),
        correlation_id: Some("batch-2026-11".into()),
        input: json!({}),
        ..SubmitTask::default()
    };
    let invoice = engine.submit(submit).await.unwrap().task_id;
    let (s, _, h) = send(&router, Method::GET, &format!("/console/find?q={failed}"), Some(&cookie), None).await;
    assert_eq!((s, h[header::LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, page.as_str()));
    let link = |id| format!(r#"<a href="/console/tasks/{id}">{id}</a>"#);
    for q in ["invoice-", "batch-2026-11", "u-"] {
        let (s, body, _) = send(&router, Method::GET, &format!("/console/find?q={q}"), Some(&cookie), None).await;
        assert_eq!(s, StatusCode::OK);
        let want = if q == "u-" { failed } else { invoice };
        assert!(body.contains(&link(want)), "{q}: {body}");
    }
    let (_, body, _) = send(&router, Method::GET, "/console/find?q=nothing-like-it", Some(&cookie), None).await;
    assert!(body.contains("No task has this id"), "{body}");
    running.shutdown().await;
}
