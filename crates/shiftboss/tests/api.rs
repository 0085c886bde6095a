//! The HTTP API of a real `shiftboss serve` process, over loopback, on SQLite and on PostgreSQL:
//! the first admin token, workflows, submissions by key, reads, paging, every operator action,
//! metrics checked by promtool, and SIGTERM with requests and steps in flight.

mod common;

use common::{PgSchema, Serve, ServeProc, Service, bin, test_db, under_ci, wait_for};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// A client of one serve process's API, with a token.
struct Api {
    base: String,
    token: String,
    http: Client,
}

/// reqwest's rustls has no provider of its own in this build (the engine hands it ring's).
fn http_client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder().timeout(Duration::from_secs(20)).build().unwrap()
}

impl Api {
    fn of(p: &ServeProc) -> Api {
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while p.api_url().is_none() && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        let base = p.api_url().unwrap_or_else(|| panic!("serve announced no API:\n{}", p.log()));
        let token = p.admin_token().expect("serve wrote the first admin token");
        Api { base, token, http: http_client() }
    }

    async fn send(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let res = r.send().await.unwrap();
        let status = res.status();
        let text = res.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, Some(&self.token), None).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::POST, path, Some(&self.token), Some(body)).await
    }

    async fn state(&self, id: &str) -> String {
        let (s, v) = self.get(&format!("/v1/tasks/{id}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["state"].as_str().unwrap().to_owned()
    }

    async fn wait_state(&self, id: &str, want: &str) {
        wait_for(&format!("task {id} {want}"), Duration::from_secs(20), || async { self.state(id).await == want })
            .await;
    }
}

fn order(service: &str) -> Value {
    json!({"name": "order", "steps": [
        {"name": "reserve", "agent": "svc", "config": {"url": "/reserve"}, "timeout": "5s"},
        {"name": "approval", "kind": "wait", "signal": "approve"},
        {"name": "ship", "agent": "svc", "config": {"url": "/ship"}, "timeout": "5s"}],
        "description": format!("calls {service}")})
}

async fn round_trip(db: String, logs: &Path) {
    let service = Service::start(Duration::ZERO).await;
    let mut p = Serve::new(db.clone(), "api-1").service(&service.url).api().spawn(logs);
    p.wait_ready().await;
    let api = Api::of(&p);

    // The first admin token's file is the owner's alone.
    let log = p.log();
    let file = log.split("its secret is in ").nth(1).unwrap().split(" (").next().unwrap().to_owned();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "{file}");

    // Open probes; everything else needs a token.
    assert_eq!(api.send(Method::GET, "/healthz", None, None).await.0, StatusCode::OK);
    assert_eq!(api.send(Method::GET, "/readyz", None, None).await.0, StatusCode::OK);
    let (s, v) = api.send(Method::GET, "/v1/tasks", None, None).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")), "{v}");

    let (s, v) = api.post("/v1/workflows", order(&service.url)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = api.get("/v1/workflows").await;
    assert_eq!((s, v[0]["name"].as_str()), (StatusCode::OK, Some("order")), "{v}");

    // Submit by key; the same key again gives back the task.
    let mut ids = Vec::new();
    for i in 0..5 {
        let (s, v) =
            api.post("/v1/tasks", json!({"key": format!("o-{i}"), "workflow": "order", "input": {"n": i}})).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        ids.push(v["id"].as_str().unwrap().to_owned());
    }
    let (s, v) = api.post("/v1/tasks", json!({"key": "o-0", "workflow": "order", "input": {"n": 0}})).await;
    assert_eq!((s, v["id"].as_str(), v["created"].as_bool()), (StatusCode::OK, Some(ids[0].as_str()), Some(false)));
    let (s, _) = api.post("/v1/tasks", json!({"key": "o-0", "workflow": "order", "input": {"n": 99}})).await;
    assert_eq!(s, StatusCode::CONFLICT);

    // Paging: 2 at a time, newest first, every task once.
    let mut seen = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let path = match &next {
            Some(c) => format!("/v1/tasks?limit=2&before={c}"),
            None => "/v1/tasks?limit=2".to_owned(),
        };
        let (s, v) = api.get(&path).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let items = v["items"].as_array().unwrap();
        assert!(items.len() <= 2);
        seen.extend(items.iter().map(|t| t["id"].as_str().unwrap().to_owned()));
        match v["next"].as_str() {
            Some(c) => next = Some(c.to_owned()),
            None => break,
        }
    }
    let mut want = ids.clone();
    want.reverse();
    assert_eq!(seen, want);

    // Every task waits for its approval once its stock is reserved.
    for id in &ids {
        wait_for("reserve processed", Duration::from_secs(20), || async {
            let (_, v) = api.get(&format!("/v1/tasks/{id}")).await;
            v["steps"].as_array().unwrap().iter().any(|s| s["name"] == "reserve" && s["state"] == "processed")
        })
        .await;
    }
    // pause, then resume and signal: it completes.
    let api = &api;
    let act = |id: &str, action: &str, extra: Value| {
        let mut body = json!({"reason": format!("test {action}")});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let path = format!("/v1/tasks/{id}/{action}");
        async move { api.post(&path, body).await }
    };
    let (s, v) = act(&ids[0], "pause", json!({})).await;
    assert_eq!((s, v["state"].as_str()), (StatusCode::OK, Some("paused")), "{v}");
    let (s, v) = act(&ids[0], "pause", json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "pausing twice: {v}");
    let (s, v) = act(&ids[0], "resume", json!({})).await;
    assert_eq!((s, v["state"].as_str()), (StatusCode::OK, Some("running")), "{v}");
    let (s, v) = act(&ids[0], "signal", json!({"name": "approve", "payload": {"by": "ann"}})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    api.wait_state(&ids[0], "completed").await;
    // Only agent steps can be skipped: the store's refusal reaches the client as a conflict.
    let (s, v) = act(&ids[1], "skip", json!({"step": "approval", "output": {"by": "op"}})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("only agent steps"), "{v}");
    // A wait ends by its step's name too.
    let (s, v) = act(&ids[1], "signal", json!({"name": "approval"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    api.wait_state(&ids[1], "completed").await;
    // cancel, and cancel again: a conflict.
    let (s, v) = act(&ids[2], "cancel", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(["cancelled", "compensating", "compensated"].contains(&api.state(&ids[2]).await.as_str()));
    // terminate.
    let (s, v) = act(&ids[3], "terminate", json!({})).await;
    assert_eq!((s, v["state"].as_str()), (StatusCode::OK, Some("terminated")), "{v}");
    // retry and rerun of a running task that has nothing to retry: conflicts, named as such.
    let (s, v) = act(&ids[4], "retry", json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    // rerun a completed task from its first step: it runs again and waits for approval again.
    let (s, v) = act(&ids[0], "rerun", json!({"from": "reserve"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    api.wait_state(&ids[0], "running").await;
    // A step resubmitted that is not in error: a conflict; an unknown one: 404.
    let (_, v) = api.get(&format!("/v1/tasks/{}", ids[4])).await;
    let step = v["steps"][0]["id"].as_str().unwrap().to_owned();
    let (s, _) = api.post(&format!("/v1/steps/{step}/resubmit"), json!({"reason": "r"})).await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = api.post("/v1/steps/99999999/resubmit", json!({"reason": "r"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The event log shows who acted: the token's name.
    let (_, v) = api.get(&format!("/v1/tasks/{}/events?limit=1000", ids[3])).await;
    let terminated =
        v["items"].as_array().unwrap().iter().find(|e| e["kind"].as_str().unwrap().contains("terminat")).cloned();
    assert_eq!(terminated.map(|e| e["actor"].clone()), Some(json!("admin")), "{v}");

    // Bulk: a dry run counts the tasks a filter matches and changes nothing; then the action.
    for i in 0..3 {
        let (s, v) = api.post("/v1/tasks", json!({"key": format!("bulk-{i}"), "workflow": "order"})).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let (s, v) = api.get("/v1/tasks?key_prefix=bulk-").await;
    assert_eq!((s, v["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(3)), "{v}");
    let bulk = json!({"filter": {"key_prefix": "bulk-", "state": "running"}, "reason": "clear out", "dry_run": true});
    let (s, v) = api.post("/v1/tasks/bulk/cancel", bulk.clone()).await;
    assert_eq!((s, v["matched"].as_u64(), v["acted"].as_u64()), (StatusCode::OK, Some(3), Some(0)), "{v}");
    let (_, v) = api.get("/v1/tasks?key_prefix=bulk-&state=running").await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(3), "the dry run changed nothing: {v}");
    let mut real = bulk;
    real["dry_run"] = json!(false);
    let (s, v) = api.post("/v1/tasks/bulk/cancel", real).await;
    assert_eq!((s, v["matched"].as_u64(), v["acted"].as_u64()), (StatusCode::OK, Some(3), Some(3)), "{v}");
    let (_, v) = api.get("/v1/tasks?key_prefix=bulk-&state=running").await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(0), "{v}");

    // Scopes: a read token reads and cannot submit.
    let out =
        bin().arg("--db").arg(&db).args(["tokens", "create", "--name", "dash", "--scopes", "read"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let secret =
        String::from_utf8_lossy(&out.stdout).split_whitespace().find(|w| w.starts_with("sbt_")).unwrap().to_owned();
    assert_eq!(api.send(Method::GET, "/v1/tasks", Some(&secret), None).await.0, StatusCode::OK);
    let (s, v) =
        api.send(Method::POST, "/v1/tasks", Some(&secret), Some(json!({"key": "x", "workflow": "order"}))).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{v}");

    // Metrics, in a form promtool accepts.
    let res = api.http.get(format!("{}/metrics", api.base)).bearer_auth(&api.token).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    assert!(text.contains("shiftboss_tasks{state=\"completed\"}"), "{text}");
    assert!(text.contains("shiftboss_api_requests_total{"), "{text}");
    assert!(text.contains("shiftboss_engine_steps_total{event=\"completed\"}"), "{text}");
    // The scheduler's slot limit: at its floor (64) when idle, never 0 with a scheduler running.
    let limit = text.lines().find_map(|l| l.strip_prefix("shiftboss_scheduler_slot_limit ")).map(str::to_owned);
    assert!(limit.as_deref().and_then(|v| v.parse::<u64>().ok()).is_some_and(|v| v >= 1), "{text}");
    promtool(&text);

    assert!(p.terminate().success(), "serve exits 0 on SIGTERM:\n{}", p.log());
}

/// `promtool check metrics` on the text; under CI promtool must be there.
fn promtool(text: &str) {
    use std::io::Write;
    let spawned = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if !under_ci() => {
            eprintln!("SKIPPED promtool check: promtool cannot run ({e}); install Debian's prometheus");
            return;
        }
        Err(e) => panic!("promtool cannot run under CI: {e}"),
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    round_trip(db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    round_trip(schema.db_url(), dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_no_auth_is_refused_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let out =
        bin().arg("--db").arg(&db).args(["serve", "--listen", "0.0.0.0:0", "--insecure-no-auth"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_requests_and_steps_in_flight_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    // Each call takes 300 ms: steps are in flight when the signal comes.
    let service = Service::start(Duration::from_millis(300)).await;
    let mut p = Serve::new(db.clone(), "api-term").service(&service.url).api().spawn(dir.path());
    p.wait_ready().await;
    let api = Api::of(&p);
    let flow =
        json!({"name": "slow", "steps": [{"name": "a", "agent": "svc", "config": {"url": "/a"}, "timeout": "5s"}]});
    assert_eq!(api.post("/v1/workflows", flow).await.0, StatusCode::CREATED);
    // Submitters keep going while the process is told to stop.
    let submitter = {
        let (base, token) = (api.base.clone(), api.token.clone());
        tokio::spawn(async move {
            let http = http_client();
            let mut acknowledged = Vec::new();
            for i in 0..400 {
                let r = http
                    .post(format!("{base}/v1/tasks"))
                    .bearer_auth(&token)
                    .json(&json!({"key": format!("t-{i}"), "workflow": "slow"}))
                    .send()
                    .await;
                match r {
                    Ok(res) if res.status() == StatusCode::CREATED => acknowledged.push(format!("t-{i}")),
                    // Refused or cut off once the server stops: not acknowledged, so not owed.
                    _ => break,
                }
            }
            acknowledged
        })
    };
    wait_for("steps in flight", Duration::from_secs(20), || async { service.total_requests() >= 3 }).await;
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(30)).await.expect("serve stops within its grace period");
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}");
    let acknowledged = submitter.await.unwrap();
    assert!(!acknowledged.is_empty());
    // Every acknowledged submission is in the store, and a new process finishes them all.
    let mut q = Serve::new(db, "api-term-2").service(&service.url).spawn(dir.path());
    q.wait_ready().await;
    let store = shiftboss_sqlite::SqliteStore::open(dir.path().join("state.db"), &Default::default()).unwrap();
    use shiftboss_store::Store;
    for key in &acknowledged {
        let t = store.find_task_by_key(key).await.unwrap();
        assert!(t.is_some(), "acknowledged task {key} is missing");
    }
    let n = acknowledged.len() as u64;
    wait_for("every acknowledged task completed", Duration::from_secs(60), || async {
        common::tasks_in(&store, shiftboss_core::TaskState::Completed).await >= n
    })
    .await;
    assert!(service.overlapping_keys().is_empty(), "no step ran twice at once");
}

/// With its database cut off, the API answers 503 `store_unavailable` with Retry-After (and
/// /readyz says not ready, /healthz alive) within a bound, and serves again once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_503_while_its_database_is_away() {
    use common::proxy::{Mode, Proxy, upstream_of};
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let upstream = upstream_of(&url);
    let proxy = Proxy::start(upstream.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = Serve::new(proxy.url(&schema.db_url(), &upstream), "api-cut").api().spawn(dir.path());
    p.wait_ready().await;
    let api = Api::of(&p);
    assert_eq!(api.get("/v1/tasks").await.0, StatusCode::OK);

    proxy.set(Mode::Cut);
    // A token seen before is trusted for a few seconds from memory; the store is asked all the same.
    let started = std::time::Instant::now();
    let res = api.http.get(format!("{}/v1/tasks", api.base)).bearer_auth(&api.token).send().await.unwrap();
    let (status, retry_after) = (res.status(), res.headers().get("retry-after").cloned());
    let v: Value = res.json().await.unwrap();
    assert_eq!((status, v["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("store_unavailable")), "{v}");
    assert!(retry_after.is_some(), "503 says when to try again");
    assert!(started.elapsed() < Duration::from_secs(15), "answered within a bound: {:?}", started.elapsed());
    assert_eq!(api.send(Method::GET, "/readyz", None, None).await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(api.send(Method::GET, "/healthz", None, None).await.0, StatusCode::OK);

    proxy.set(Mode::Open);
    wait_for("the API to serve again", Duration::from_secs(30), || async {
        api.get("/v1/tasks").await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(api.send(Method::GET, "/readyz", None, None).await.0, StatusCode::OK);
}

/// Conductor's HUMAN and optional tasks over Conductor's own routes: an optional worker task that
/// fails for good shows as COMPLETED_WITH_ERRORS and the workflow goes on; a HUMAN task ends by an
/// update by reference name, another by an update of the taskId the workflow lists; the
/// variables a SET_VARIABLE set read back in the workflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_human_and_optional_tasks_end_over_conductor_s_routes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    let mut p = Serve::new(db, "api-human").api().arg("--remote-agent").arg("poke").spawn(dir.path());
    p.wait_ready().await;
    let api = Api::of(&p);
    let def = json!({
        "name": "sign_off", "version": 1,
        "tasks": [
            {"name": "poke", "taskReferenceName": "poke", "type": "SIMPLE", "optional": true},
            {"name": "first", "taskReferenceName": "first_approval", "type": "HUMAN"},
            {"name": "remember", "taskReferenceName": "remember", "type": "SET_VARIABLE",
             "inputParameters": {"first": "${first_approval.output.by}"}},
            {"name": "second", "taskReferenceName": "second_approval", "type": "HUMAN"}
        ],
        "outputParameters": {"first": "${workflow.variables.first}", "second": "${second_approval.output.by}"}
    });
    let (s, v) = api.post("/api/metadata/workflow", def).await;
    assert!(s.is_success(), "{s}: {v}");
    let (s, v) = api.post("/api/workflow/sign_off", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The id comes as text, which reads as a JSON number.
    let id = v.as_str().map_or_else(|| v.to_string(), str::to_owned);

    // The worker fails the optional task for good; the workflow goes on.
    let (s, task) = api.get("/api/tasks/poll/poke?workerid=w1").await;
    assert_eq!(s, StatusCode::OK, "{task}");
    let update = json!({"taskId": task["taskId"], "workflowInstanceId": id, "status": "FAILED_WITH_TERMINAL_ERROR",
                        "reasonForIncompletion": "poked too hard"});
    let (s, v) = api.post("/api/tasks", update).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let waiting = |v: &Value, reference: &str| {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["referenceTaskName"] == reference && t["status"] == "IN_PROGRESS")
    };
    let mut wf = Value::Null;
    for _ in 0..200 {
        wf = api.get(&format!("/api/workflow/{id}")).await.1;
        if waiting(&wf, "first_approval") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let poke = wf["tasks"].as_array().unwrap().iter().find(|t| t["referenceTaskName"] == "poke").unwrap();
    assert_eq!(poke["status"], "COMPLETED_WITH_ERRORS", "{wf}");
    assert_eq!(wf["status"], "RUNNING");
    assert!(wf["failedReferenceTaskNames"].as_array().unwrap().is_empty(), "an optional task's failure fails nothing");

    // A HUMAN task by reference name; a FAILED update of a wait is refused and changes nothing.
    let (s, _) = api.post(&format!("/api/tasks/{id}/first_approval/FAILED"), json!({})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, v) = api.post(&format!("/api/tasks/{id}/first_approval/COMPLETED"), json!({"by": "ann"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    for _ in 0..200 {
        wf = api.get(&format!("/api/workflow/{id}")).await.1;
        if waiting(&wf, "second_approval") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(wf["variables"], json!({"first": "ann"}), "{wf}");
    // The other by the taskId the workflow lists, as an SDK's update_task does.
    let second = wf["tasks"].as_array().unwrap().iter().find(|t| t["referenceTaskName"] == "second_approval").unwrap();
    let update = json!({"taskId": second["taskId"], "workflowInstanceId": id, "status": "COMPLETED",
                        "outputData": {"by": "bo"}, "logs": [{"log": "signed by bo", "createdTime": 1}]});
    let (s, v) = api.post("/api/tasks", update.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, _) = api.post("/api/tasks", update).await;
    assert_eq!(s, StatusCode::CONFLICT, "the wait has ended: a second update changes nothing");
    // The update's log lines are kept, once: the refused repeat's are not.
    let task_id = second["taskId"].as_str().unwrap();
    let (s, lines) = api.get(&format!("/api/tasks/{task_id}/log")).await;
    assert_eq!(s, StatusCode::OK, "{lines}");
    let text: Vec<&str> = lines.as_array().unwrap().iter().map(|l| l["log"].as_str().unwrap()).collect();
    assert_eq!(text, ["signed by bo"], "{lines}");
    for _ in 0..200 {
        wf = api.get(&format!("/api/workflow/{id}")).await.1;
        if wf["status"] == "COMPLETED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        (wf["status"].clone(), wf["output"].clone()),
        (json!("COMPLETED"), json!({"first": "ann", "second": "bo"})),
        "{wf}"
    );
    drop(p);
}

/// A start request's taskToDomain over Conductor's routes: the workflow's task goes only to a
/// worker polling with its domain; a task type set to NO_DOMAIN goes to any; a list of domains is
/// refused and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_task_to_domain_routes_a_workflow_s_tasks_to_its_domain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    let mut p = Serve::new(db, "api-domains")
        .api()
        .arg("--remote-agent")
        .arg("pack")
        .arg("--remote-agent")
        .arg("label")
        .spawn(dir.path());
    p.wait_ready().await;
    let api = Api::of(&p);
    let def = json!({
        "name": "packing", "version": 1,
        "tasks": [
            {"name": "pack", "taskReferenceName": "pack", "type": "SIMPLE"},
            {"name": "label", "taskReferenceName": "label", "type": "SIMPLE"}
        ]
    });
    let (s, v) = api.post("/api/metadata/workflow", def).await;
    assert!(s.is_success(), "{s}: {v}");
    let refused = json!({"name": "packing", "taskToDomain": {"pack": "eu,us"}});
    let (s, v) = api.post("/api/workflow", refused).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(v.to_string().contains("one domain per task type"), "{v}");
    let (s, v) = api.get("/api/workflow/search?query=workflowType%3Dpacking").await;
    assert!(s.is_success() && v["totalHits"] == json!(0), "nothing started: {v}");

    let start = json!({"name": "packing", "input": {"order": 7},
                       "taskToDomain": {"*": "eu-west", "label": "NO_DOMAIN"}});
    let (s, v) = api.post("/api/workflow", start).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let id = v.as_str().map_or_else(|| v.to_string(), str::to_owned);

    // `pack` is in eu-west: a poll without the domain, or with another, gets nothing.
    let (s, _) = api.get("/api/tasks/poll/pack?workerid=w1").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = api.get("/api/tasks/poll/pack?workerid=w1&domain=us-east").await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, task) = api.get("/api/tasks/poll/pack?workerid=w1&domain=eu-west").await;
    assert_eq!(s, StatusCode::OK, "{task}");
    assert_eq!(task["workflowInstanceId"], json!(id));
    let done = json!({"taskId": task["taskId"], "workflowInstanceId": id, "status": "COMPLETED", "outputData": {}});
    let (s, v) = api.post("/api/tasks", done).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // `label` is NO_DOMAIN: any worker polling without a domain takes it.
    let mut label = Value::Null;
    for _ in 0..200 {
        let (s, t) = api.get("/api/tasks/poll/label?workerid=w2").await;
        if s == StatusCode::OK {
            label = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(label["referenceTaskName"], json!("label"), "{label}");
}
