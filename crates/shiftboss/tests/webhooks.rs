//! Status channels (issue 18) end to end, on SQLite and PostgreSQL: `serve`'s dispatcher sends the
//! outbox's messages to a real receiver on loopback (`examples/webhook_receiver.py`, which checks
//! every signature with the Standard Webhooks reference library from PyPI) while the receiver
//! answers 500 to a third of requests, holds some past the dispatcher's timeout, and is killed and
//! started again, and while `serve` itself is SIGKILLed and started again. Every message of every
//! task arrives at least once, signed; sorted by `seq`, each task's messages are 1..n, in the kinds
//! the store wrote. Then: dead-lettering at the retry limit with an alert, redelivery over the API,
//! and a receiver's 410 disabling its subscription.

#[macro_use]
mod common;

use common::api::Api;
use common::{Serve, ServeProc, Service, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Python 3 with `standardwebhooks`; without it the test skips loudly, or fails under CI.
fn have_receiver() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import standardwebhooks"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(!common::under_ci(), "python3 with standardwebhooks (pip install standardwebhooks) is needed under CI");
        eprintln!("SKIPPED: python3 with the standardwebhooks package is not installed");
    }
    ok
}

/// The receiver process; killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
}

impl Receiver {
    fn start(port: u16, log: &Path, extra: &[&str]) -> Receiver {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/webhook_receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", &port.to_string(), "--secret", SECRET, "--log"])
            .arg(log)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening on ").and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Receiver { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Every line it logged, kept across its restarts (the file is appended to).
    fn lines(log: &Path) -> Vec<Value> {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A config file that makes the dispatcher quick: a short call timeout and lease, retries every
/// 200 ms for a long while.
fn config(dir: &Path, retry: &str) -> PathBuf {
    let path = dir.join(format!("hooks-{}.toml", fastrand::u32(..)));
    let text = format!("[webhooks]\ncall_timeout = \"1s\"\nlease = \"2s\"\nidle_poll = \"200ms\"\nretry = {retry}\n");
    std::fs::write(&path, text).unwrap();
    path
}

fn serve(db: &str, logs: &Path, service: &Service, config: &Path) -> ServeProc {
    Serve::new(db, "hooks-1").api().service(&service.url).arg("--config").arg(config.display().to_string()).spawn(logs)
}

async fn register(api: &Api) {
    let flow = json!({"name": "order", "steps": [
        {"name": "a", "agent": "svc", "config": {"url": "/a"}, "timeout": "5s"},
        {"name": "b", "agent": "svc", "config": {"url": "/b"}, "timeout": "5s"},
        {"name": "c", "agent": "svc", "config": {"url": "/c"}, "timeout": "5s"}]});
    let (s, v) = api.post("/v1/workflows", flow).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

async fn deliveries(api: &Api, query: &str) -> Vec<Value> {
    let (s, v) = api.get(&format!("/v1/deliveries?limit=1000{query}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["items"].as_array().unwrap().clone()
}

async fn every_message_arrives_through_faults(db: String, logs: &Path) {
    if !have_receiver() {
        return;
    }
    let service = Service::start(Duration::ZERO).await;
    let log = logs.join("received.jsonl");
    let mut rx = Receiver::start(0, &log, &["--fail-every", "3", "--hang-every", "7", "--hang-for", "2"]);
    let port = rx.port;
    let cfg = config(logs, r#"{ kind = "fixed", delay = "200ms", max_failures = 1000 }"#);
    let mut p = serve(&db, logs, &service, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    register(&api).await;
    let body = json!({"url": rx.url("/all"), "secret": SECRET, "workflow": "order"});
    let (s, sub) = api.post("/v1/subscriptions", body).await;
    assert_eq!(s, StatusCode::CREATED, "{sub}");
    assert_eq!(sub["secret"], SECRET);
    let standing = sub["subscription"]["id"].as_str().unwrap().to_owned();

    // Twenty orders; every other one also has its own channel for its end.
    let submit = |i: usize| {
        let mut t = json!({"key": format!("o-{i}"), "workflow": "order", "input": {"n": i}});
        if i.is_multiple_of(2) {
            t["notify"] =
                json!({"url": rx.url("/own"), "secret": SECRET, "messages": ["task.completed", "task.failed"]});
        }
        t
    };
    let mut ids = Vec::new();
    for i in 0..10 {
        let (s, v) = api.post("/v1/tasks", submit(i)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    // serve dies with messages written and not all sent, and comes back.
    wait_for("some messages arrived", Duration::from_secs(30), || async { Receiver::lines(&log).len() >= 5 }).await;
    p.kill9();
    let mut p = serve(&db, logs, &service, &cfg);
    p.wait_ready().await;
    // The first process made the admin token; the second finds it in the store.
    let token = api.token.clone();
    let api = loop {
        if let Some(base) = p.api_url() {
            break Api { base, token, http: api.http.clone() };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for i in 10..20 {
        let (s, v) = api.post("/v1/tasks", submit(i)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    // The receiver dies and comes back on its port, after the dispatcher has failed to reach it.
    rx.kill();
    wait_for("a delivery failed to connect", Duration::from_secs(30), || async {
        deliveries(&api, "&state=pending")
            .await
            .iter()
            .any(|d| d["last_error"].as_str().is_some_and(|e| e.contains("connect")))
    })
    .await;
    let _rx = Receiver::start(port, &log, &["--fail-every", "3"]);

    for id in &ids {
        api.wait_state(id, "completed").await;
    }
    wait_for("every delivery delivered", Duration::from_secs(60), || async {
        deliveries(&api, "&state=pending").await.is_empty()
    })
    .await;
    assert!(deliveries(&api, "&state=dead").await.is_empty(), "nothing given up");

    // What the store wrote, against what the receiver verified and logged.
    let all = deliveries(&api, "").await;
    let got = Receiver::lines(&log);
    assert!(got.iter().all(|l| l.get("bad").is_none()), "a signature did not verify: {got:?}");
    let received: HashSet<&str> = got.iter().map(|l| l["id"].as_str().unwrap()).collect();
    for d in &all {
        let id = format!("msg_{}", d["id"].as_str().unwrap());
        assert!(received.contains(id.as_str()), "{id} never arrived: {d}");
    }
    assert!(all.iter().any(|d| d["attempts"].as_u64() > Some(1)), "the receiver's faults cost retries");
    // Each task's messages on the standing subscription: seq 1..5, in the order of its life.
    let mut by_task: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for l in &got {
        let d = all.iter().find(|d| format!("msg_{}", d["id"].as_str().unwrap()) == l["id"].as_str().unwrap()).unwrap();
        if d["subscription_id"] == standing.as_str() {
            by_task
                .entry(l["task_id"].as_str().unwrap().to_owned())
                .or_default()
                .push((l["seq"].as_i64().unwrap(), l["type"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(by_task.len(), 20, "every task's messages arrived");
    for (task, mut msgs) in by_task {
        msgs.sort();
        msgs.dedup();
        let kinds: Vec<&str> = msgs.iter().map(|(_, k)| k.as_str()).collect();
        let seqs: Vec<i64> = msgs.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5], "task {task}");
        assert_eq!(kinds, ["task.received", "step.completed", "step.completed", "step.completed", "task.completed"]);
    }
    let own: Vec<&Value> = all.iter().filter(|d| d["subscription_id"] != standing.as_str()).collect();
    assert_eq!(own.len(), 10, "each task with its own channel got its end there");
    assert!(own.iter().all(|d| d["message"] == "task.completed" && d["seq"] == 5), "{own:?}");
}

async fn dead_messages_alert_and_are_redelivered_and_410_disables(db: String, logs: &Path) {
    if !have_receiver() {
        return;
    }
    let service = Service::start(Duration::ZERO).await;
    // A port nothing listens on (yet).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = config(logs, r#"{ kind = "fixed", delay = "100ms", max_failures = 3 }"#);
    let mut p = serve(&db, logs, &service, &cfg);
    p.wait_ready().await;
    let api = Api::of(&p);
    register(&api).await;
    let gone_log = logs.join("gone.jsonl");
    let gone = Receiver::start(0, &gone_log, &["--gone"]);
    // A secret is made when none is given; a subscription is deleted.
    let (s, made) = api.post("/v1/subscriptions", json!({"url": "https://hooks.example.com/"})).await;
    assert_eq!(s, StatusCode::CREATED, "{made}");
    assert!(made["secret"].as_str().unwrap().starts_with("whsec_"), "{made}");
    let made = made["subscription"]["id"].as_str().unwrap().to_owned();
    let deleted =
        api.http.delete(format!("{}/v1/subscriptions/{made}", api.base)).bearer_auth(&api.token).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let (s, _) = api.get(&format!("/v1/subscriptions/{made}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let body = json!({"url": format!("http://127.0.0.1:{closed}/x"), "secret": SECRET, "messages": ["task.received"]});
    let (s, a) = api.post("/v1/subscriptions", body).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let closed_sub = a["subscription"]["id"].as_str().unwrap().to_owned();
    let (s, b) = api
        .post("/v1/subscriptions", json!({"url": gone.url("/x"), "secret": SECRET, "messages": ["task.received"]}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let gone_sub = b["subscription"]["id"].as_str().unwrap().to_owned();
    let (s, v) = api.post("/v1/tasks", json!({"key": "d-1", "workflow": "order"})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let task = v["id"].as_str().unwrap().to_owned();

    // Nobody answers: dead after three attempts, with an alert on the task.
    wait_for("the delivery is dead", Duration::from_secs(30), || async {
        !deliveries(&api, &format!("&state=dead&subscription={closed_sub}")).await.is_empty()
    })
    .await;
    let dead = deliveries(&api, &format!("&state=dead&subscription={closed_sub}")).await;
    assert_eq!(dead[0]["attempts"], 3, "{dead:?}");
    let t = api.task(&task).await;
    let events = t["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["kind"] == "delivery.dead" && e["level"] == "alert"), "{t}");

    // /metrics counts it in the backlog.
    let res = api.http.get(format!("{}/metrics", api.base)).bearer_auth(&api.token).send().await.unwrap();
    let text = res.text().await.unwrap();
    assert!(text.contains("shiftboss_webhook_backlog{state=\"dead\"} 1\n"), "{text}");
    assert!(text.contains("shiftboss_webhook_oldest_due_age_seconds "), "{text}");

    // The CLI reads the same, through the server and on the store.
    let dead_id = dead[0]["id"].as_str().unwrap();
    let cli = |args: &[&str]| {
        let out = common::bin().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listed = cli(&["--server", &api.base, "--token", &api.token, "deliveries", "list", "--state", "dead"]);
    assert!(
        listed.lines().any(|l| l.starts_with(dead_id) && l.contains("task.received") && l.contains("dead")),
        "{listed}"
    );
    let dry = cli(&["--db", &db, "deliveries", "redeliver", "--subscription", &closed_sub, "--dry-run"]);
    assert_eq!(dry.trim(), format!("1 deliveries would be sent again: {dead_id}"));
    let subs = cli(&["--db", &db, "subscriptions", "list"]);
    assert!(subs.contains(&format!("127.0.0.1:{closed}/x")) && !subs.contains("whsec_"), "{subs}");

    // The receiver comes up; a dry run says what would go, then it goes.
    let _rx = Receiver::start(closed, &logs.join("late.jsonl"), &[]);
    let (s, dry) = api.post("/v1/deliveries/redeliver", json!({"subscription": closed_sub, "dry_run": true})).await;
    assert_eq!((s, dry["ids"].as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "{dry}");
    let (s, _) = api.post("/v1/deliveries/redeliver", json!({"subscription": closed_sub})).await;
    assert_eq!(s, StatusCode::OK);
    wait_for("redelivered", Duration::from_secs(30), || async {
        deliveries(&api, &format!("&state=delivered&subscription={closed_sub}")).await.len() == 1
    })
    .await;

    // 410: the subscription is disabled, its message kept for when it comes back.
    wait_for("410 disables", Duration::from_secs(30), || async {
        api.get(&format!("/v1/subscriptions/{gone_sub}")).await.1["state"] == "disabled"
    })
    .await;
    let (_, s) = api.get(&format!("/v1/subscriptions/{gone_sub}")).await;
    assert!(s["disabled_reason"].as_str().unwrap().contains("410"), "{s}");
    let kept = deliveries(&api, &format!("&subscription={gone_sub}")).await;
    assert_eq!((kept.len(), kept[0]["state"].as_str()), (1, Some("pending")), "{kept:?}");

    // The secret is never shown again, and bad input changes nothing.
    let (_, listed) = api.get("/v1/subscriptions").await;
    assert!(!listed.to_string().contains("whsec_"), "{listed}");
    let (s, _) = api.post("/v1/subscriptions", json!({"url": "file:///etc/passwd"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = api
        .post(
            "/v1/tasks",
            json!({"key": "d-2", "workflow": "order", "notify": {"url": "http://x/", "secret": "short"}}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = api.get("/v1/tasks/by-key/d-2").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a refused submission wrote nothing");
}

on_both_stores!(every_message_arrives_through_faults, arrives_on_sqlite, arrives_on_postgres);
on_both_stores!(
    dead_messages_alert_and_are_redelivered_and_410_disables,
    dead_and_gone_on_sqlite,
    dead_and_gone_on_postgres
);
