//! Operator alerts (issue 18) end to end, on SQLite and PostgreSQL: `serve`'s alerter reads the
//! alert events of the log and tells the sinks of `[alerts]`, here real HTTP receivers on loopback
//! of which some misbehave on purpose (one answers 500 to everything, one never answers).
//!
//! - Repeats on one subject are folded: ten tasks failing at one step make one alert per kind
//!   and, at the end of the window (here: at shutdown), one summary counting the nine others;
//!   the sinks that fail hold nothing up, and a chat sink's URL never reaches the log.
//! - A crash sends an alert again rather than never: `serve` SIGKILLed while its only sink hangs
//!   on an alert sends it after the restart, from the cursor it keeps in the store.
//! - A running task without progress for `stuck_after` is reported.

#[macro_use]
mod common;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode as AxStatus};
use axum::routing::post;
use common::api::Api;
use common::{Serve, ServeProc, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The service the steps call, and the alert receivers, on one loopback server.
#[derive(Default)]
struct Hub {
    /// Alerts received whole, by sink path, with their headers.
    alerts: Mutex<Vec<(String, Value, HeaderMap)>>,
    /// Requests that arrived at each misbehaving sink.
    broken_hits: AtomicU32,
    hang_hits: AtomicU32,
    flaky_hits: AtomicU32,
    /// While set, the flaky sink hangs instead of answering.
    flaky_hangs: AtomicBool,
}

impl Hub {
    async fn start() -> (Arc<Hub>, String) {
        let hub = Arc::new(Hub::default());
        let app = Router::new()
            .route(
                "/svc/{what}",
                post(|UrlPath(what): UrlPath<String>| async move {
                    match what.as_str() {
                        "fail" => (AxStatus::UNPROCESSABLE_ENTITY, "card declined".to_owned()),
                        "slow" => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            (AxStatus::OK, "{}".into())
                        }
                        _ => (AxStatus::OK, "{}".into()),
                    }
                }),
            )
            .route(
                "/sink/{name}",
                post(|State(hub): State<Arc<Hub>>, UrlPath(name): UrlPath<String>, h: HeaderMap, body: String| async move {
                    match name.as_str() {
                        "broken" => {
                            hub.broken_hits.fetch_add(1, Ordering::SeqCst);
                            return AxStatus::INTERNAL_SERVER_ERROR;
                        }
                        "hang" => {
                            hub.hang_hits.fetch_add(1, Ordering::SeqCst);
                            std::future::pending::<()>().await;
                        }
                        "flaky" => {
                            hub.flaky_hits.fetch_add(1, Ordering::SeqCst);
                            if hub.flaky_hangs.load(Ordering::SeqCst) {
                                std::future::pending::<()>().await;
                            }
                        }
                        _ => {}
                    }
                    let body: Value = serde_json::from_str(&body).expect("an alert is JSON");
                    hub.alerts.lock().unwrap().push((name, body, h));
                    AxStatus::OK
                }),
            )
            .with_state(hub.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (hub, url)
    }

    /// The alerts a sink received (the webhook sinks' `alert` objects; a chat sink's text).
    fn received(&self, sink: &str) -> Vec<Value> {
        let all = self.alerts.lock().unwrap();
        all.iter().filter(|(s, _, _)| s == sink).map(|(_, b, _)| b.get("alert").cloned().unwrap_or(b.clone())).collect()
    }
}

fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join(format!("alerts-{}.toml", fastrand::u32(..)));
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(db: &str, logs: &Path, svc: &str, config: &Path) -> ServeProc {
    Serve::new(db, "alerts-1").api().service(svc).arg("--config").arg(config.display().to_string()).spawn(logs)
}

async fn register(api: &Api, name: &str, url: &str) {
    let flow = json!({"name": name, "steps": [
        {"name": "pay", "agent": "svc", "config": {"url": url}, "timeout": "1h"}]});
    let (s, v) = api.post("/v1/workflows", flow).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

async fn submit(api: &Api, workflow: &str, key: &str) -> String {
    let (s, v) = api.post("/v1/tasks", json!({"key": key, "workflow": workflow, "input": {}})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// One counter of `/metrics`'s `shiftboss_alerts_total`.
async fn alerts_metric(api: &Api, outcome: &str) -> u64 {
    let res = api.http.get(format!("{}/metrics", api.base)).bearer_auth(&api.token).send().await.unwrap();
    let text = res.text().await.unwrap();
    let line = format!("shiftboss_alerts_total{{outcome=\"{outcome}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(line.as_str())).map_or(0, |v| v.trim().parse().unwrap())
}

async fn repeats_fold_and_failing_sinks_hold_nothing_up(db: String, logs: &Path) {
    let (hub, url) = Hub::start().await;
    let cfg = config(
        logs,
        &format!(
            r#"[alerts]
fold = "1h"
stuck_after = "0s"
call_timeout = "1s"
[[alerts.sinks]]
kind = "log"
[[alerts.sinks]]
kind = "slack"
name = "chat"
url = "{url}/sink/broken"
[[alerts.sinks]]
kind = "webhook"
name = "silent"
url = "{url}/sink/hang"
[[alerts.sinks]]
kind = "webhook"
name = "pager"
url = "{url}/sink/good"
secret = "{SECRET}"
"#
        ),
    );
    let mut p = serve(&db, logs, &url, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    register(&api, "order", "/svc/fail").await;
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(submit(&api, "order", &format!("order-{i}")).await);
    }
    for id in &ids {
        api.wait_state(id, "failed").await;
    }

    // The first of each kind went out at once, past the sink that hangs and the one that fails;
    // the nine repeats of each are held, not sent.
    wait_for("the first alerts, and the repeats held", Duration::from_secs(30), || async {
        hub.received("good").len() >= 2 && alerts_metric(&api, "folded").await >= 18
    })
    .await;
    let first = hub.received("good");
    assert_eq!(first.len(), 2, "one alert per kind, the repeats folded: {first:#?}");
    let step = first.iter().find(|a| a["kind"] == "step.error").expect("a step.error alert");
    assert_eq!(step["subject"], "order/pay");
    assert_eq!(step["count"], 1);
    assert_eq!(step["folded"], false);
    assert_eq!(step["step"], "pay");
    assert!(step["detail"]["error"].as_str().unwrap().contains("card declined"), "{step}");
    assert!(first.iter().any(|a| a["kind"] == "task.failed" && a["subject"] == "order/pay"), "{first:#?}");
    assert_eq!(alerts_metric(&api, "folded").await, 18, "nine repeats of each kind held");
    {
        let all = hub.alerts.lock().unwrap();
        let (_, _, h) = all.iter().find(|(s, _, _)| s == "good").unwrap();
        let sig = h.get("webhook-signature").expect("a signed sink's alert is signed").to_str().unwrap();
        assert!(sig.starts_with("v1,"), "{sig}");
        assert!(h.get("webhook-id").is_some() && h.get("webhook-timestamp").is_some());
    }
    wait_for("the failing sinks were tried", Duration::from_secs(30), || async {
        hub.broken_hits.load(Ordering::SeqCst) >= 1 && hub.hang_hits.load(Ordering::SeqCst) >= 1
    })
    .await;
    assert!(p.log().contains("shiftboss: step in error on order/pay: task "), "the log sink wrote the alert");

    // At shutdown the held repeats go out as one summary per kind: 1 + 9 = the ten tasks.
    p.signal("TERM");
    p.wait_exit(Duration::from_secs(30)).await.expect("serve stops");
    let all = hub.received("good");
    for kind in ["step.error", "task.failed"] {
        let of: Vec<&Value> = all.iter().filter(|a| a["kind"] == kind).collect();
        assert_eq!(of.len(), 2, "{kind}: the first and one summary: {of:#?}");
        let summary = of.iter().find(|a| a["folded"] == true).expect("a folded summary");
        assert_eq!(summary["count"], 9, "{summary}");
        let total: u64 = of.iter().map(|a| a["count"].as_u64().unwrap()).sum();
        assert_eq!(total, 10, "every failure counted once");
        let named: Vec<&str> =
            summary["tasks"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(named.len(), 9, "{named:?}");
    }
    let log = p.log();
    assert!(!log.contains("sink/broken") && !log.contains("sink/hang"), "a sink's URL is never logged");
    assert!(
        log.lines().any(|l| l.contains("alert sink: sending failed") && l.contains("chat")),
        "failures name the sink"
    );
}
on_both_stores!(
    repeats_fold_and_failing_sinks_hold_nothing_up,
    repeats_fold_and_failing_sinks_hold_nothing_up_sqlite,
    repeats_fold_and_failing_sinks_hold_nothing_up_postgres
);

async fn a_crash_sends_an_alert_again_rather_than_never(db: String, logs: &Path) {
    let (hub, url) = Hub::start().await;
    hub.flaky_hangs.store(true, Ordering::SeqCst);
    let cfg = config(
        logs,
        &format!(
            r#"[alerts]
fold = "0s"
stuck_after = "0s"
call_timeout = "30s"
[[alerts.sinks]]
kind = "webhook"
name = "pager"
url = "{url}/sink/flaky"
"#
        ),
    );
    let mut p = serve(&db, logs, &url, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    // The alerter keeps its place in the log from its first read on.
    wait_for("the alerter leads", Duration::from_secs(30), || async { p.log().contains("alerter: leading") }).await;
    register(&api, "order", "/svc/fail").await;
    let id = submit(&api, "order", "order-crash").await;
    api.wait_state(&id, "failed").await;
    wait_for("the sink holds the alert", Duration::from_secs(30), || async {
        hub.flaky_hits.load(Ordering::SeqCst) >= 1
    })
    .await;
    // Killed while the only sink still holds the alert: nothing was sent.
    p.kill9();
    assert!(hub.received("flaky").is_empty());

    hub.flaky_hangs.store(false, Ordering::SeqCst);
    let mut p = serve(&db, logs, &url, &cfg);
    p.wait_ready().await;
    wait_for("the alerts, after the restart", Duration::from_secs(60), || async {
        let got = hub.received("flaky");
        got.iter().any(|a| a["kind"] == "step.error") && got.iter().any(|a| a["kind"] == "task.failed")
    })
    .await;
    let got = hub.received("flaky");
    assert!(p.log().contains("alerter: leading; reading the log after the saved cursor"), "{}", p.log());
    let step = got.iter().find(|a| a["kind"] == "step.error").unwrap();
    assert_eq!(step["tasks"][0]["key"], "order-crash");
    assert_eq!(step["subject"], "order/pay");
}
on_both_stores!(
    a_crash_sends_an_alert_again_rather_than_never,
    a_crash_sends_an_alert_again_rather_than_never_sqlite,
    a_crash_sends_an_alert_again_rather_than_never_postgres
);

async fn a_task_without_progress_is_reported(db: String, logs: &Path) {
    let (hub, url) = Hub::start().await;
    let cfg = config(
        logs,
        &format!(
            r#"[alerts]
fold = "0s"
stuck_after = "1s"
stuck_scan = "100ms"
[[alerts.sinks]]
kind = "webhook"
name = "pager"
url = "{url}/sink/good"
"#
        ),
    );
    let mut p = serve(&db, logs, &url, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    register(&api, "slow", "/svc/slow").await;
    register(&api, "quick", "/svc/ok").await;
    // Waits for a signal on purpose, submitted first (oldest): never reported.
    let waits = json!({"name": "waits", "steps": [{"name": "hold", "kind": "wait", "signal": "go"}]});
    let (st, v) = api.post("/v1/workflows", waits).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    submit(&api, "waits", "waits-1").await;
    let quick = submit(&api, "quick", "quick-1").await;
    submit(&api, "slow", "slow-1").await;
    api.wait_state(&quick, "completed").await;
    wait_for("the stuck task's alert", Duration::from_secs(30), || async {
        hub.received("good").iter().any(|a| a["kind"] == "task.stuck")
    })
    .await;
    let got = hub.received("good");
    let stuck: Vec<&Value> = got.iter().filter(|a| a["kind"] == "task.stuck").collect();
    assert_eq!(stuck[0]["subject"], "slow");
    assert_eq!(stuck[0]["tasks"][0]["key"], "slow-1");
    assert!(stuck[0]["detail"]["quiet_seconds"].as_u64().is_some(), "{}", stuck[0]);
    assert!(
        stuck.iter().all(|a| a["tasks"][0]["key"] == "slow-1"),
        "a finished task, or one that waits on purpose, is never stuck: {stuck:#?}"
    );
}
on_both_stores!(
    a_task_without_progress_is_reported,
    a_task_without_progress_is_reported_sqlite,
    a_task_without_progress_is_reported_postgres
);

/// After a quiet spell the alerter reads the log at its poll (here 30 s), but a step that goes to
/// Error in this process wakes it: the alert is out within seconds, not at the next poll.
async fn a_quiet_alerter_is_woken_by_a_failure(db: String, logs: &Path) {
    let (hub, url) = Hub::start().await;
    let cfg = config(
        logs,
        &format!(
            r#"[alerts]
stuck_after = "0s"
poll = "30s"
idle_poll = "30s"
[[alerts.sinks]]
kind = "webhook"
name = "pager"
url = "{url}/sink/good"
"#
        ),
    );
    let mut p = serve(&db, logs, &url, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    register(&api, "order", "/svc/fail").await;
    // The alerter leads and reads the log (that line, then its first read at once); from here
    // it sleeps its poll.
    wait_for("the alerter leads", Duration::from_secs(20), || async { p.log().contains("alerter: leading") }).await;
    let id = submit(&api, "order", "order-quiet").await;
    api.wait_state(&id, "failed").await;
    let failed_at = std::time::Instant::now();
    wait_for("the alert, well before the 30 s poll", Duration::from_secs(10), || async {
        hub.received("good").iter().any(|a| a["kind"] == "step.error")
    })
    .await;
    eprintln!("alert out {:?} after the task was seen failed", failed_at.elapsed());
    drop(p);
}
on_both_stores!(
    a_quiet_alerter_is_woken_by_a_failure,
    a_quiet_alerter_is_woken_sqlite,
    a_quiet_alerter_is_woken_postgres
);
