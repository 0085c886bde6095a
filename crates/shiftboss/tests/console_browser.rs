//! The operator's console in a real browser (issue 20): headless Chromium (Debian's `chromium`
//! and `chromium-driver`) driven over W3C WebDriver, against a real `shiftboss serve` on SQLite.
//! Pages refuse a visitor without a session; sign in; see a failed task and why it failed;
//! resubmit it through the confirmation; see it complete without reloading; an action without
//! the CSRF token is refused; "why" in words for six reasons across eight live pages in a row;
//! a bulk retry after its dry run; the overview with a million finished tasks. Screenshots of the
//! pages, light and dark, go to
//! `target/console-screenshots/` (CI keeps that directory).
//!
//! The WebDriver calls are plain JSON over HTTP (reqwest, already here): the handful this test
//! needs do not warrant a client crate and its dependency tree.

mod common;

use axum::Router;
use axum::http::StatusCode as AxStatus;
use axum::routing::post;
use base64::Engine as _;
use common::{Serve, test_db, under_ci, wait_for};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session, ended on drop.
struct Browser {
    http: Client,
    base: String,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends the session first: chromedriver then closes the browser. Killing chromedriver
        // alone left every test's Chromium running, orphaned, after the suite had ended.
        self.end_session();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    /// `DELETE /session/{id}`, written by hand: a drop cannot await the async client. Bounded, and
    /// best effort (the driver is killed after it either way).
    fn end_session(&self) {
        use std::io::{Read, Write};
        let Some(addr) = self.base.strip_prefix("http://") else { return };
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else { return };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(10)));
        let request = format!(
            "DELETE /session/{} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.session
        );
        if conn.write_all(request.as_bytes()).is_ok() {
            // The answer comes once the browser has quit; the connection closes after it.
            let _ = conn.read_to_end(&mut Vec::new());
        }
    }

    async fn start() -> Option<Browser> {
        if !std::path::Path::new(DRIVER).exists() {
            assert!(!under_ci(), "{DRIVER} is missing under CI: .ci/run installs chromium-driver");
            eprintln!("SKIPPED: {DRIVER} is not installed (apt-get install chromium chromium-driver)");
            return None;
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = Command::new(DRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let give_up = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < give_up, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,900",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}});
        let v: Value = http.post(format!("{base}/session")).json(&caps).send().await.unwrap().json().await.unwrap();
        let session = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_owned();
        Some(Browser { http, base, session, driver, _profile: profile })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut r = self.http.request(method, url);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let v: Value = r.send().await.unwrap().json().await.unwrap();
        assert!(v["value"].get("error").is_none(), "{path}: {v}");
        v["value"].clone()
    }

    async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    async fn url(&self) -> String {
        let v = self.call(reqwest::Method::GET, "/url", None).await;
        v.as_str().unwrap_or_else(|| panic!("url: {v}")).to_owned()
    }

    async fn find(&self, css: &str) -> String {
        let v =
            self.call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css}))).await;
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("find {css}: {v}")).to_owned()
    }

    async fn type_in(&self, css: &str, text: &str) {
        let el = self.find(css).await;
        self.call(reqwest::Method::POST, &format!("/element/{el}/value"), Some(json!({"text": text}))).await;
    }

    async fn click(&self, css: &str) {
        let el = self.find(css).await;
        self.call(reqwest::Method::POST, &format!("/element/{el}/click"), Some(json!({}))).await;
    }

    async fn run(&self, script: &str) -> Value {
        self.call(reqwest::Method::POST, "/execute/sync", Some(json!({"script": script, "args": []}))).await
    }

    async fn run_async(&self, script: &str) -> Value {
        self.call(reqwest::Method::POST, "/execute/async", Some(json!({"script": script, "args": []}))).await
    }

    async fn text(&self) -> String {
        self.run("return document.body.innerText").await.as_str().unwrap_or("").to_owned()
    }

    /// Waits until the page's text holds `what` (the page changes by itself).
    async fn wait_text(&self, what: &str, within: Duration) -> String {
        let give_up = Instant::now() + within;
        loop {
            let t = self.text().await;
            if t.contains(what) {
                return t;
            }
            assert!(Instant::now() < give_up, "the page never said {what:?}; it says:\n{t}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn dark(&self, on: bool) {
        let scheme = if on { "dark" } else { "light" };
        let url = format!("{}/session/{}/goog/cdp/execute", self.base, self.session);
        let body = json!({"cmd": "Emulation.setEmulatedMedia",
            "params": {"features": [{"name": "prefers-color-scheme", "value": scheme}]}});
        let v: Value = self.http.post(url).json(&body).send().await.unwrap().json().await.unwrap();
        assert!(v["value"].get("error").is_none(), "{v}");
    }

    async fn screenshot(&self, name: &str) {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = shots();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// target/console-screenshots, next to the build.
fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots")
}

/// A payment service that refuses for good (422) until it is opened.
async fn payments(open: Arc<AtomicBool>) -> String {
    let app = Router::new().route(
        "/{action}",
        post(move || {
            let open = open.clone();
            async move {
                if open.load(Ordering::SeqCst) {
                    (AxStatus::OK, "{\"paid\":true}")
                } else {
                    (AxStatus::UNPROCESSABLE_ENTITY, "{\"error\":\"card declined\"}")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_chromium() {
    let _ = test_db; // SQLite only: the console reads through the store contract either way.
    let Some(browser) = Browser::start().await else { return };
    let open = Arc::new(AtomicBool::new(false));
    let service = payments(open.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    // Webhooks that die at their first failure, for the deliveries page.
    let config = dir.path().join("hooks.toml");
    let retry = r#"{ kind = "fixed", delay = "100ms", max_failures = 1 }"#;
    std::fs::write(&config, format!("[webhooks]\ncall_timeout = \"1s\"\nlease = \"2s\"\nretry = {retry}\n")).unwrap();
    let mut p = Serve::new(db, "console-1")
        .service(&service)
        .api()
        .arg("--config")
        .arg(config.display().to_string())
        .spawn(dir.path());
    p.wait_ready().await;
    let api = common::api::Api::of(&p);
    let hooks_up = Arc::new(AtomicBool::new(false));
    let hooks = receiver(hooks_up.clone()).await;
    let (s, v) = api.post("/v1/subscriptions", json!({"url": hooks, "workflow": "order"})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let flow = json!({"name": "order", "description": "charge, then wait for approval", "steps": [
        {"name": "charge", "agent": "svc", "config": {"url": "/charge"}, "timeout": "5s"},
        {"name": "approval", "kind": "wait", "signal": "approve"}]});
    assert_eq!(api.post("/v1/workflows", flow).await.0, StatusCode::CREATED);
    let (_, v) = api.post("/v1/tasks", json!({"key": "order-7", "workflow": "order", "input": {"amount": 1999}})).await;
    let id = v["id"].as_str().unwrap().to_owned();
    let give_up = Instant::now() + Duration::from_secs(20);
    while api.get(&format!("/v1/tasks/{id}")).await.1["state"] != "failed" {
        assert!(Instant::now() < give_up, "the task did not fail");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let base = &api.base;

    // Without a session: to the login page.
    browser.go(&format!("{base}/console/tasks/{id}")).await;
    assert!(browser.url().await.ends_with("/console/login"), "{}", browser.url().await);
    browser.dark(false).await;
    browser.screenshot("login-light").await;
    browser.type_in("input[name=token]", "not-a-token").await;
    browser.click("form button").await;
    browser.wait_text("Unknown or revoked token", Duration::from_secs(5)).await;
    browser.type_in("input[name=token]", &api.token).await;
    browser.click("form button").await;
    browser.wait_text("Tasks by state", Duration::from_secs(5)).await;
    // The alerts of the log, newest first: the step in Error and the failed task.
    let t = browser.wait_text("Recent alerts", Duration::from_secs(5)).await;
    assert!(t.contains("step.error") && t.contains("task.failed") && t.contains("order-7"), "{t}");
    assert!(t.contains("Webhook backlog"), "{t}");
    assert!(
        ["Nothing is waiting to be sent.", "has been due for", "waits for a retry"].iter().any(|w| t.contains(w)),
        "the backlog says how overdue it is: {t}"
    );
    browser.screenshot("overview-light").await;

    // The failed task, in the list and on its page, with why.
    browser.go(&format!("{base}/console/tasks?state=failed")).await;
    browser.wait_text("order-7", Duration::from_secs(5)).await;
    browser.screenshot("tasks-light").await;
    // The header's find box, from the keyboard: the start of a key, then Enter.
    browser.type_in("form.find input[name=q]", "order-\u{E007}").await;
    let t = browser.wait_text("Find a task", Duration::from_secs(5)).await;
    assert!(t.contains("order-7") && t.contains("failed"), "{t}");
    browser.screenshot("find-light").await;
    browser.go(&format!("{base}/console/tasks/{id}")).await;
    let t = browser.wait_text("Why is it not running?", Duration::from_secs(5)).await;
    assert!(t.contains("in Error after 1 attempt") && t.contains("422"), "{t}");
    browser.screenshot("task-failed-light").await;
    browser.dark(true).await;
    browser.screenshot("task-failed-dark").await;

    // An action without the CSRF token: refused, and nothing changes.
    let status = browser
        .run_async(&format!(
            "const done = arguments[arguments.length - 1];
             fetch('/console/tasks/{id}/act', {{method: 'POST', body: new URLSearchParams({{do: 'cancel', reason: 'x'}})}})
               .then(r => done(r.status));"
        ))
        .await;
    assert_eq!(status, json!(403));
    assert_eq!(api.get(&format!("/v1/tasks/{id}")).await.1["state"], "failed");

    // Resubmit through the confirmation; the charge goes through and the task waits for approval.
    open.store(true, Ordering::SeqCst);
    browser.go(&format!("{base}/console/tasks/{id}/act?do=resubmit")).await;
    browser.wait_text("Steps in Error: charge", Duration::from_secs(5)).await;
    browser.screenshot("confirm-dark").await;
    browser.type_in("input[name=reason]", "card fixed").await;
    browser.click("button.danger").await;
    let t = browser.wait_text("waiting for signal \"approve\"", Duration::from_secs(10)).await;
    // Its workflow drawn with where each step stands.
    assert!(t.contains("Where it stands") && t.contains("waits for the signal approve"), "{t}");
    let waiting = browser.run("return document.querySelectorAll('.node.st-processing').length").await;
    assert_eq!(waiting, json!(1), "the wait is the one step in progress");
    browser.dark(false).await;
    browser.screenshot("task-waiting-light").await;

    // Approved elsewhere (the API): the page shows it completed without being reloaded.
    browser.run("window.notReloaded = true").await;
    let (s, v) = api.post(&format!("/v1/tasks/{id}/signal"), json!({"name": "approve", "reason": "ok"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = browser.wait_text("Output", Duration::from_secs(10)).await;
    assert!(t.contains("completed"), "{t}");
    assert_eq!(browser.run("return window.notReloaded === true").await, json!(true), "the page was not reloaded");
    browser.screenshot("task-completed-light").await;
    // Each step's timeline, opened: its claims and its Error in words.
    browser.run("document.querySelectorAll('details.timeline').forEach(d => d.open = true)").await;
    let t = browser.text().await;
    assert!(t.contains("Step timelines") && t.contains("claimed by console-1; lease token"), "{t}");
    assert!(t.contains("went to Error") && t.contains("resubmitted by"), "{t}");
    browser.screenshot("task-timeline-light").await;
    browser.go(&format!("{base}/")).await;
    browser.dark(true).await;
    browser.wait_text("Tasks by state", Duration::from_secs(5)).await;
    browser.screenshot("overview-dark").await;
    // The charts draw once the sampler (started by the first overview) has two points, 10 s apart.
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        browser.go(&format!("{base}/")).await;
        if browser.text().await.contains("peak") {
            break;
        }
        assert!(Instant::now() < give_up, "no chart within 30 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(browser.run("return document.querySelectorAll('.chart svg polyline').length").await, json!(2));
    browser.screenshot("overview-charts-dark").await;

    // The workflows, and one drawn: a switch's cases and a fork's branches side by side, a
    // fork_each's body, a wait, an optional step.
    let shipping = json!({"name": "shipping", "description": "routes a parcel", "variables": {"tries": 0}, "steps": [
        {"name": "route", "kind": "switch", "expression": "${task.input.zone}",
         "cases": {"eu": [{"name": "eu_post", "agent": "svc", "config": {"url": "/eu"}, "optional": true}]},
         "default": [{"name": "courier", "agent": "svc", "config": {"url": "/courier"}}]},
        {"name": "both", "kind": "fork", "join_on": ["label"], "branches": [
            [{"name": "label", "agent": "svc", "config": {"url": "/label"}}],
            [{"name": "audit", "agent": "svc", "config": {"url": "/audit"}}]]},
        {"name": "parts", "kind": "fork_each", "items": "${task.input.parts}",
         "body": [{"name": "pack", "agent": "svc", "config": {"url": "/pack"}}]},
        {"name": "cool", "kind": "wait", "duration": "2m"}]});
    assert_eq!(api.post("/v1/workflows", shipping).await.0, StatusCode::CREATED);
    browser.dark(false).await;
    browser.go(&format!("{base}/console/workflows")).await;
    let t = browser.wait_text("routes a parcel", Duration::from_secs(5)).await;
    assert!(t.contains("charge, then wait for approval"), "{t}");
    browser.click("a[href='/console/workflows/shipping']").await;
    let t = browser.wait_text("case eu", Duration::from_secs(5)).await;
    for words in [
        "otherwise",
        "optional: its failure fails nothing",
        "branch 2 (runs on)",
        "joins the branches ending in label",
        "for each item",
        "waits 2m",
        "variables: tries",
    ] {
        assert!(t.contains(words), "{words:?} in {t}");
    }
    browser.screenshot("workflow-light").await;
    browser.dark(true).await;
    browser.screenshot("workflow-dark").await;

    // The deliveries page: the messages the receiver refused died at their first failure; one is
    // sent again through the confirmation, now that the receiver takes them.
    let give_up = Instant::now() + Duration::from_secs(20);
    while api.get("/v1/deliveries?state=dead").await.1["items"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < give_up, "no delivery died");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    browser.dark(false).await;
    browser.go(&format!("{base}/console/deliveries")).await;
    let t = browser.wait_text("gave up: HTTP 500", Duration::from_secs(5)).await;
    assert!(t.contains("task.received") && t.contains("order-7"), "{t}");
    assert!(t.contains("Standing subscriptions") && t.contains(&hooks), "{t}");
    browser.screenshot("deliveries-light").await;
    hooks_up.store(true, Ordering::SeqCst);
    browser.click("td a[href^='/console/deliveries/redeliver?id=']").await;
    browser.wait_text("1 delivery will be sent again", Duration::from_secs(5)).await;
    browser.click("button.danger").await;
    // Back on the list of pending deliveries (every page names "Deliveries" in its navigation, so
    // wait for the address, not for the word).
    let give_up = Instant::now() + Duration::from_secs(5);
    while !browser.url().await.ends_with("state=pending") {
        assert!(Instant::now() < give_up, "not sent back to the pending list: {}", browser.url().await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let give_up = Instant::now() + Duration::from_secs(20);
    while api.get("/v1/deliveries?state=delivered").await.1["items"].as_array().unwrap().is_empty() {
        assert!(Instant::now() < give_up, "the redelivered message was not delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A retry job of the service's agent, which fails (the service has no route at its base), on
    // its handler's jobs page with the bulk resubmit of the failed ones.
    let (s, v) = api.post("/v1/jobs", json!({"handler": "svc", "params": {"n": 1}, "key": "job-1"})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let job = v["id"].as_str().unwrap().to_owned();
    let give_up = Instant::now() + Duration::from_secs(20);
    while api.get(&format!("/v1/jobs/{job}")).await.1["state"] != "given_up" {
        assert!(Instant::now() < give_up, "the job did not fail");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    browser.go(&format!("{base}/console/jobs?handler=svc")).await;
    let t = browser.wait_text("job-1", Duration::from_secs(5)).await;
    assert!(t.contains("given_up") && t.contains("HTTP 404"), "{t}");
    browser.screenshot("jobs-light").await;
    browser.click("a[href^='/console/jobs/resubmit?']").await;
    browser.wait_text("1 given-up job(s) of this search will run again", Duration::from_secs(5)).await;
    p.terminate();
}

/// A webhook receiver that answers 500 until it is opened.
async fn receiver(up: Arc<AtomicBool>) -> String {
    let app = Router::new().route(
        "/hook",
        post(move || {
            let up = up.clone();
            async move { if up.load(Ordering::SeqCst) { AxStatus::NO_CONTENT } else { AxStatus::INTERNAL_SERVER_ERROR } }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The overview and the task list with 1,000,000 finished tasks in the hot tables (the archiver
/// has not moved them yet): each page's answer, as the browser's Navigation Timing measures it
/// (request start to response end), comes in under a second, and the counts are the exact ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_with_a_million_finished_tasks() {
    let Some(browser) = Browser::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    let mut p = Serve::new(db.clone(), "console-big").api().spawn(dir.path());
    p.wait_ready().await;
    let api = common::api::Api::of(&p);
    let flow = json!({"name": "ledger", "steps": [{"name": "post", "agent": "http", "config": {"url": "http://ledger.example/post"}}]});
    assert_eq!(api.post("/v1/workflows", flow).await.0, StatusCode::CREATED);
    p.terminate();
    {
        // One statement, in SQLite itself: a million submissions would take minutes.
        let c = rusqlite::Connection::open(&db).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let n = c
            .execute(
                "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1000000)
                 INSERT INTO tasks (task_key, workflow, workflow_version, state, priority, input, output,
                                    created_at, updated_at)
                 SELECT 'entry-' || n, 'ledger', 1, CASE WHEN n % 100 = 0 THEN 'failed' ELSE 'completed' END,
                        0, '{}', '{}', ?1 - 1000000 + n, ?1 - 1000000 + n FROM c",
                [now],
            )
            .unwrap();
        assert_eq!(n, 1_000_000);
    }
    let mut p = Serve::new(db, "console-big").api().spawn(dir.path());
    p.wait_ready().await;
    let base = p.api_url().expect("the API");

    browser.go(&format!("{base}/console/login")).await;
    browser.type_in("input[name=token]", &api.token).await;
    browser.click("form button").await;
    let t = browser.wait_text("Tasks by state", Duration::from_secs(10)).await;
    assert!(t.contains("completed\n990,000\n") && t.contains("failed\n10,000\n"), "the exact counts: {t}");
    let answered = "const n = performance.getEntriesByType('navigation')[0]; return n.responseEnd - n.requestStart";
    for page in ["/", "/console/tasks", "/console/tasks?state=failed", "/console/tasks?key=entry-99999"] {
        browser.go(&format!("{base}{page}")).await;
        let ms = browser.run(answered).await.as_f64().expect("a navigation entry");
        eprintln!("{page}: answered in {ms:.1} ms with 1,000,000 finished tasks");
        assert!(ms < 1000.0, "{page} took {ms} ms");
    }
    assert!(browser.text().await.contains("entry-99999"), "the key search found it");
    browser.go(&format!("{base}/")).await;
    browser.screenshot("overview-million-light").await;
    drop(p);
}

/// A service for the "why" test: `/flaky` answers 503 (a transient fault), `/decline` 422 until
/// it is opened, anything else 200.
async fn moody(open: Arc<AtomicBool>) -> String {
    let app = Router::new().route(
        "/{what}",
        post(move |axum::extract::Path(what): axum::extract::Path<String>| {
            let open = open.clone();
            async move {
                match what.as_str() {
                    "flaky" => (AxStatus::SERVICE_UNAVAILABLE, "{}"),
                    "decline" if !open.load(Ordering::SeqCst) => (AxStatus::UNPROCESSABLE_ENTITY, "{}"),
                    _ => (AxStatus::OK, "{}"),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// "Why is this step not running?" in the browser for six different reasons (a signal awaited, a
/// retry due later after a failure, no live worker for a remote agent type, a paused task, a step
/// in Error, a step routed to a domain), then a bulk retry of a filtered list after its dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_in_words_and_a_bulk_retry_in_chromium() {
    let Some(browser) = Browser::start().await else { return };
    let open = Arc::new(AtomicBool::new(false));
    let service = moody(open.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    let mut p =
        Serve::new(db, "console-why").service(&service).api().arg("--remote-agent").arg("ship").spawn(dir.path());
    p.wait_ready().await;
    let api = common::api::Api::of(&p);
    let base = api.base.clone();
    for flow in [
        json!({"name": "hold", "steps": [{"name": "approval", "kind": "wait", "signal": "approve"}]}),
        json!({"name": "retrying", "steps": [{"name": "charge", "agent": "svc", "config": {"url": "/flaky"},
               "timeout": "1s", "retry": {"kind": "fixed", "delay": "1h", "max_failures": 5}}]}),
        json!({"name": "ship", "steps": [{"name": "send", "agent": "ship"}]}),
        json!({"name": "decline", "steps": [{"name": "charge", "agent": "svc", "config": {"url": "/decline"}}]}),
    ] {
        let (s, v) = api.post("/v1/workflows", flow).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let submit = |key: &str, workflow: &str, extra: Value| {
        let mut body = json!({"key": key, "workflow": workflow, "input": {}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let api = &api;
        async move {
            let (s, v) = api.post("/v1/tasks", body).await;
            assert_eq!(s, StatusCode::CREATED, "{v}");
            v["id"].as_str().unwrap().to_owned()
        }
    };
    let hold = submit("hold-1", "hold", json!({})).await;
    let retrying = submit("retry-1", "retrying", json!({})).await;
    let unserved = submit("ship-1", "ship", json!({})).await;
    let paused = submit("ship-2", "ship", json!({})).await;
    let (s, v) = api.post(&format!("/v1/tasks/{paused}/pause"), json!({"reason": "fraud check"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let declined = [submit("decline-1", "decline", json!({})).await, submit("decline-2", "decline", json!({})).await];
    for id in &declined {
        api.wait_state(id, "failed").await;
    }
    wait_for("the flaky charge failed once", Duration::from_secs(20), || async {
        api.get(&format!("/v1/tasks/{retrying}")).await.1["steps"][0]["failure_count"] == 1
    })
    .await;

    browser.go(&format!("{base}/console/login")).await;
    browser.type_in("input[name=token]", &api.token).await;
    browser.click("form button").await;
    browser.wait_text("Tasks by state", Duration::from_secs(10)).await;
    // Eight live pages in a row (each follows an event stream): a page left behind must give its
    // stream back, or the browser's six connections to the server run out and the next page
    // waits about a minute for one.
    let pages = Instant::now();
    let reasons = [
        (&hold, "waiting for signal \"approve\""),
        (&retrying, "after its 1st failure"),
        (&unserved, "no live worker or scheduler serves agent type \"ship\""),
        (&paused, "its task is paused by admin"),
        (&declined[0], "it is in Error after 1 attempt"),
    ];
    for (id, words) in reasons {
        browser.go(&format!("{base}/console/tasks/{id}")).await;
        let t = browser.wait_text("Why is it not running?", Duration::from_secs(5)).await;
        assert!(t.contains(words), "task {id}: {words:?} in\n{t}");
    }
    browser.screenshot("why-paused-light").await;
    // A sixth: routed to a domain no worker serves (a worker polled without it, so the type is served).
    let routed = submit("ship-3", "ship", json!({"domains": {"ship": "eu"}})).await;
    let (s, v) =
        api.post("/v1/agents/poll", json!({"agents": ["ship"], "worker": "w1", "capacity": 1, "wait_ms": 0})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    browser.go(&format!("{base}/console/tasks/{routed}")).await;
    let t = browser.wait_text("Why is it not running?", Duration::from_secs(5)).await;
    assert!(t.contains("routed to domain \"eu\""), "{t}");
    browser.screenshot("why-domain-light").await;
    browser.go(&format!("{base}/console/tasks/{hold}")).await;
    browser.wait_text("waiting for signal", Duration::from_secs(5)).await;
    assert!(pages.elapsed() < Duration::from_secs(20), "eight pages took {:?}", pages.elapsed());
    browser.go(&format!("{base}/console/tasks/{paused}")).await;

    // Bulk: the failed tasks of one workflow, counted first, then retried.
    browser.go(&format!("{base}/console/workflows")).await;
    browser.go(&format!("{base}/console/workflows")).await;
    browser.go(&format!("{base}/console/tasks?state=failed&workflow=decline")).await;
    browser.wait_text("decline-2", Duration::from_secs(5)).await;
    browser.click("a[href^='/console/bulk?do=retry']").await;
    let t = browser.wait_text("Nothing has changed yet", Duration::from_secs(5)).await;
    assert!(t.contains("Dry run: 2 live tasks match"), "{t}");
    browser.screenshot("bulk-dry-run-light").await;
    for id in &declined {
        assert_eq!(api.get(&format!("/v1/tasks/{id}")).await.1["state"], "failed", "a dry run changes nothing");
    }
    open.store(true, Ordering::SeqCst);
    browser.type_in("input[name=reason]", "the gateway is back").await;
    browser.click("button.danger").await;
    let t = browser.wait_text("acted on", Duration::from_secs(5)).await;
    assert!(t.contains("2 tasks acted on, 0 refused"), "{t}");
    for id in &declined {
        api.wait_state(id, "completed").await;
    }
    p.terminate();
}
