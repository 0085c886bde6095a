//! Remote workers (issue 17) against a real `shiftboss serve` process over loopback, on SQLite and
//! on PostgreSQL: the worker protocol spoken by hand (long poll woken by a submission, capacity and
//! priority, heartbeats past the first complete-by, a late reply refused after the lease lapsed),
//! and the Python worker example (`examples/python_worker.py`) finishing tasks, including after a
//! worker holding steps is SIGKILLed and the supervisor takes its steps back, or the worker starts
//! again under its id and takes them back itself; a restarted worker's release by hand, and the
//! operator's `shiftboss workers list` and `release`, on the store and through the API.

#[macro_use]
mod common;

use common::api::{AGENT, Api};
use common::{Serve, ServeProc, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn serve(db: &str, logs: &Path) -> ServeProc {
    Serve::new(db, "remote-1").api().arg("--remote-agent").arg(AGENT).spawn(logs)
}

async fn started(db: &str, logs: &Path) -> (ServeProc, Api) {
    let mut p = serve(db, logs);
    p.wait_ready().await;
    let api = Api::of(&p);
    (p, api)
}

// ---------------------------------------------------------------------------------------------
// The protocol by hand

async fn metrics(api: &Api) -> String {
    let res = api.http.get(format!("{}/metrics", api.base)).bearer_auth(&api.token).send().await.unwrap();
    res.text().await.unwrap()
}

async fn long_poll_is_woken_by_a_submission(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    // An empty poll with no wait answers at once.
    assert!(api.poll("early", 1, 0).await.is_empty());

    let waiting = {
        let (base, token, http) = (api.base.clone(), api.token.clone(), api.http.clone());
        tokio::spawn(async move {
            let body = json!({"agents": [AGENT], "worker": "waiter", "capacity": 1, "wait_ms": 15_000});
            let res = http.post(format!("{base}/v1/agents/poll")).bearer_auth(token).json(&body).send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap(), Instant::now())
        })
    };
    // The poll records its worker before it claims and waits: once listed, the poll is under way;
    // once counted as waiting, its claim rides with the next submission (the handoff).
    wait_for("the waiting worker is listed", Duration::from_secs(10), || async {
        api.workers_of().await.contains(&"waiter".to_owned())
    })
    .await;
    // The handoff is SQLite's (`Store::hands_off_claims`): on PostgreSQL the poll claims itself.
    let hands_off = !db.starts_with("postgres");
    if hands_off {
        wait_for("the poll waits", Duration::from_secs(10), || async {
            metrics(&api).await.contains("shiftboss_remote_polls_waiting 1\n")
        })
        .await;
    }
    let submitted = Instant::now();
    let id = api.submit("p-1", json!({"n": 1}), 0).await;
    let (status, v, answered) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    let latency = answered.duration_since(submitted);
    assert!(latency < Duration::from_secs(2), "the poll answered {latency:?} after the submission (wait was 15 s)");
    let step = &v["steps"][0];
    assert_eq!((step["task_id"].as_str(), step["task_key"].as_str()), (Some(id.as_str()), Some("p-1")), "{v}");
    assert_eq!((step["agent"].as_str(), step["attempt"].as_u64()), (Some(AGENT), Some(1)), "{v}");
    assert_eq!((step["input"].clone(), step["config"].clone()), (json!({"n": 1}), json!({"carrier": "post"})));
    assert!(step["idempotency_key"].as_str().is_some_and(|k| !k.is_empty()), "{v}");
    let left = step["seconds_left"].as_f64().unwrap();
    assert!(left > 25.0 && left <= 30.0, "{v}");
    assert!(step["complete_by"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
    // On SQLite it was handed to the waiting poll by the submission's own transaction, not claimed
    // after it.
    let metrics = metrics(&api).await;
    assert!(metrics.contains("shiftboss_remote_polls_waiting 0\n"), "{metrics}");
    let handed = format!("shiftboss_submissions_total{{measure=\"handed_off\"}} {}\n", u8::from(hands_off));
    assert!(metrics.contains(&handed), "{metrics}");

    // Complete it; the same reply again is acknowledged and changes nothing.
    let path = format!("/v1/agents/steps/{}/complete", step["step_id"].as_str().unwrap());
    let reply = json!({"lease_token": step["lease_token"], "output": {"tracking": "T1"}, "worker": "waiter"});
    let (s, v) = api.post(&path, reply.clone()).await;
    assert_eq!(
        (s, v["repeated"].as_bool(), v["task_state"].as_str()),
        (StatusCode::OK, Some(false), Some("completed"))
    );
    let before = api.task(&id).await;
    let (s, v) = api.post(&path, reply).await;
    assert_eq!((s, v["repeated"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    let after = api.task(&id).await;
    assert_eq!(before["events"].as_array().unwrap().len(), after["events"].as_array().unwrap().len());
    assert_eq!(after["output"]["tracking"], "T1", "{after}");
    // Another output under the same token is not a repeat: refused.
    let (s, v) = api.post(&path, json!({"lease_token": step["lease_token"], "output": {"tracking": "T2"}})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "{v}");
}

async fn capacity_and_priority_are_respected(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    for i in 1..=5 {
        api.submit(&format!("c-{i}"), json!({"i": i}), i).await;
    }
    let first = api.poll("cap", 3, 0).await;
    let mut got: Vec<i64> = first.iter().map(|s| s["input"]["i"].as_i64().unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![3, 4, 5], "three steps, the highest priorities first");
    let rest = api.poll("cap", 3, 0).await;
    let mut got: Vec<i64> = rest.iter().map(|s| s["input"]["i"].as_i64().unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![1, 2]);
    assert!(api.poll("cap", 3, 0).await.is_empty());
    // A type the server does not declare remote is refused, so in-process types are never taken.
    let (s, v) = api.post("/v1/agents/poll", json!({"agents": ["http"], "worker": "w", "capacity": 1})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("agent_not_remote")), "{v}");
    let (s, _) = api.post("/v1/agents/poll", json!({"agents": [AGENT], "worker": "w", "capacity": 0})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
}

async fn heartbeats_keep_a_step_past_its_first_complete_by(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // A 1 s response window within a 60 s timeout: without heartbeats the lease lapses in 1 s.
    api.register("60s", Some("1s")).await;
    let id = api.submit("h-1", json!({}), 0).await;
    let steps = api.poll("beater", 1, 5_000).await;
    let step = &steps[0];
    assert!(step["seconds_left"].as_f64().unwrap() <= 1.0, "{step}");
    let step_id = step["step_id"].as_str().unwrap();
    let first_complete_by = Instant::now() + Duration::from_secs(1);
    let hb = format!("/v1/agents/steps/{step_id}/heartbeat");
    // Heartbeat every 300 ms until well past the first complete-by (and the supervisor's sweeps).
    while Instant::now() < first_complete_by + Duration::from_secs(2) {
        let (s, v) = api.post(&hb, json!({"lease_token": step["lease_token"]})).await;
        assert_eq!((s, v["held"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let path = format!("/v1/agents/steps/{step_id}/complete");
    let (s, v) = api.post(&path, json!({"lease_token": step["lease_token"], "output": {}})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = api.task(&id).await;
    assert_eq!(t["state"], "completed", "{t}");
    let lapses = t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "step.expired").count();
    assert_eq!(lapses, 0, "no lease lapsed: {t}");
    // A heartbeat for an ended step says the lease is not held.
    let (s, v) = api.post(&hb, json!({"lease_token": step["lease_token"]})).await;
    assert_eq!((s, v["held"].as_bool()), (StatusCode::OK, Some(false)), "{v}");
}

async fn a_batch_of_replies_answers_each_on_its_own(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    let (t1, t2) = (api.submit("b-1", json!({"n": 1}), 0).await, api.submit("b-2", json!({"n": 2}), 0).await);
    let steps = api.poll("batcher", 2, 0).await;
    assert_eq!(steps.len(), 2);
    let of = |task: &str| steps.iter().find(|s| s["task_id"] == task).unwrap().clone();
    let (s1, s2) = (of(&t1), of(&t2));
    let batch = json!({"worker": "batcher", "replies": [
        {"step_id": s1["step_id"], "lease_token": s1["lease_token"], "output": {"done": 1}},
        {"step_id": s2["step_id"], "lease_token": "987654", "output": {"done": 2}},
        {"step_id": s2["step_id"], "lease_token": s2["lease_token"], "failure": {"reason": " "}},
        {"step_id": "not-an-id", "lease_token": "1"},
    ]});
    let (s, v) = api.post("/v1/agents/replies", batch).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let outcomes: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["applied", "lease_lost", "invalid", "invalid"], "{v}");
    assert_eq!(v["results"][0]["task_state"], "completed");
    api.wait_state(&t1, "completed").await;
    assert_eq!(api.task(&t2).await["state"], "running", "the refused replies changed nothing");
    // Again: the applied one is a repeat, the other goes through now.
    let batch = json!({"replies": [
        {"step_id": s1["step_id"], "lease_token": s1["lease_token"], "output": {"done": 1}},
        {"step_id": s2["step_id"], "lease_token": s2["lease_token"], "failure": {"reason": "no", "permanent": true}},
    ]});
    let (s, v) = api.post("/v1/agents/replies", batch).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["results"][0]["outcome"].as_str(), v["results"][1]["outcome"].as_str()),
        (Some("repeated"), Some("applied")),
        "{v}"
    );
    api.wait_state(&t2, "failed").await;
    let (s, v) = api.post("/v1/agents/replies", json!({"replies": []})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
}

async fn a_late_reply_after_the_lease_lapsed_is_refused(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("1s", None).await;
    let id = api.submit("l-1", json!({}), 0).await;
    let first = api.poll("slow", 1, 5_000).await.remove(0);
    // The slow worker says nothing; the supervisor takes the step back once complete-by passes,
    // and the retry (100 ms later) goes to another worker.
    let mut second = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(20);
    while second.is_empty() {
        assert!(Instant::now() < give_up, "the step was never handed out again");
        second = api.poll("fast", 1, 5_000).await;
    }
    let second = second.remove(0);
    assert_eq!((second["step_id"].clone(), second["attempt"].as_u64()), (first["step_id"].clone(), Some(2)));
    assert_ne!(second["lease_token"], first["lease_token"]);
    let path = format!("/v1/agents/steps/{}/complete", first["step_id"].as_str().unwrap());
    let (s, v) = api.post(&path, json!({"lease_token": first["lease_token"], "output": {"by": "slow"}})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "{v}");
    let t = api.task(&id).await;
    assert_eq!((t["state"].as_str(), t["steps"][0]["state"].as_str()), (Some("running"), Some("processing")), "{t}");
    let (s, v) = api.post(&path, json!({"lease_token": second["lease_token"], "output": {"by": "fast"}})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = api.task(&id).await;
    assert_eq!((t["state"].as_str(), t["output"]["by"].as_str()), (Some("completed"), Some("fast")), "{t}");
    // A transient failure under a stale token is refused too, and changes nothing.
    let fail = format!("/v1/agents/steps/{}/fail", first["step_id"].as_str().unwrap());
    let (s, v) = api.post(&fail, json!({"lease_token": first["lease_token"], "reason": "late"})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "{v}");
    assert_eq!(api.task(&id).await["state"], "completed");
}

/// A worker hands a step back (not ready yet): it is not claimable until its delay has passed
/// (though the workflow's retry policy would wait 100 ms), comes back to a waiting long poll then
/// as a new attempt with no failure counted, its progress kept while it waited and handed to that
/// attempt; the old lease's
/// postponement is refused; a delay past the longest, or a batch reply with two answers, is 422.
async fn a_postponed_step_comes_back_after_its_delay(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    api.register("30s", None).await;
    let id = api.submit("later-1", json!({}), 0).await;
    let first = api.poll("w1", 1, 5_000).await.remove(0);
    assert!(first.get("progress").is_none(), "a first attempt has no progress to go on from: {first}");
    let step = first["step_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/agents/steps/{step}/postpone");
    let (s, v) =
        api.post(&path, json!({"lease_token": first["lease_token"], "after_ms": 365u64 * 24 * 3600 * 1000 + 1})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_input")), "{v}");
    let asked = Instant::now();
    let body =
        json!({"lease_token": first["lease_token"], "after_ms": 1500, "progress": {"job": "J-9"}, "worker": "w1"});
    let (s, v) = api.post(&path, body.clone()).await;
    assert_eq!(
        (s, v["repeated"].as_bool(), v["task_state"].as_str()),
        (StatusCode::OK, Some(false), Some("running")),
        "{v}"
    );
    let (s, v) = api.post(&path, body).await;
    assert_eq!((s, v["repeated"].as_bool()), (StatusCode::OK, Some(true)), "the identical repeat: {v}");
    let t = api.task(&id).await;
    let s0 = &t["steps"][0];
    assert_eq!((s0["state"].as_str(), s0["failure_count"].as_u64()), (Some("pending"), Some(0)), "{t}");
    assert_eq!(s0["progress"]["job"], "J-9", "its progress is kept while it waits: {t}");
    assert!(api.poll("w2", 1, 0).await.is_empty(), "claimable before its delay ended");
    let mut again = Vec::new();
    while again.is_empty() {
        assert!(asked.elapsed() < Duration::from_secs(20), "the step never came back");
        again = api.poll("w2", 1, 5_000).await;
    }
    assert!(asked.elapsed() >= Duration::from_millis(1500), "came back after {:?}", asked.elapsed());
    let again = again.remove(0);
    assert_eq!((again["step_id"].as_str(), again["attempt"].as_u64()), (Some(step.as_str()), Some(2)));
    assert_ne!(again["lease_token"], first["lease_token"]);
    assert_eq!(again["progress"], json!({"job": "J-9"}), "the next attempt gets the progress kept: {again}");
    let (s, v) = api.post(&path, json!({"lease_token": first["lease_token"], "after_ms": 0})).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "the old lease's: {v}");
    let twice =
        json!({"replies": [{"step_id": step, "lease_token": again["lease_token"], "output": {}, "postpone_ms": 5}]});
    let (s, v) = api.post("/v1/agents/replies", twice).await;
    assert_eq!((s, v["results"][0]["outcome"].as_str()), (StatusCode::OK, Some("invalid")), "{v}");
    let done = format!("/v1/agents/steps/{step}/complete");
    let (s, v) = api.post(&done, json!({"lease_token": again["lease_token"], "output": {"by": "w2"}})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = api.task(&id).await;
    assert_eq!((t["state"].as_str(), t["steps"][0]["failure_count"].as_u64()), (Some("completed"), Some(0)), "{t}");
    let (s, v) = api.get(&format!("/v1/tasks/{id}/events")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let postponed: Vec<&Value> =
        v["items"].as_array().unwrap().iter().filter(|e| e["kind"] == "step.postponed").collect();
    assert_eq!(postponed.len(), 1, "one step.postponed event: {v}");
    assert_eq!(
        (postponed[0]["actor"].as_str(), postponed[0]["detail"]["after_ms"].as_u64()),
        (Some("worker:w1"), Some(1500))
    );
}

/// `shiftboss workers list` and `release`, on the store (`--db`) and through the API (`--server`).
async fn workers_by_the_cli(db: String, logs: &Path) {
    let (p, api) = started(&db, logs).await;
    api.register("60s", None).await;
    for k in ["w-1", "w-2"] {
        api.submit(k, json!({}), 0).await;
    }
    assert_eq!(api.poll("pay/1", 2, 0).await.len(), 2);
    let cli = |args: &[&str], server: bool| {
        let mut c = common::bin();
        match server {
            true => c.args(["--server", &api.base]).env("SHIFTBOSS_TOKEN", &api.token),
            false => c.args(["--db", &db]),
        };
        let o = c.args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for server in [false, true] {
        let (code, out, err) = cli(&["workers", "list"], server);
        assert_eq!(code, Some(0), "{err}");
        let row = out.lines().find(|l| l.starts_with(AGENT)).unwrap_or_else(|| panic!("{out}"));
        assert_eq!(row.split_whitespace().nth(1), Some("pay/1"), "{out}");
        let (code, out, err) = cli(&["workers", "list", "--json"], server);
        assert_eq!(code, Some(0), "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["agents"][0]["workers"][0]["worker"], "pay/1", "{v}");
    }
    // Through the API: both steps back; then on the store, nothing is left to take.
    let (code, out, err) = cli(&["workers", "release", "pay/1"], true);
    assert_eq!((code, out.trim()), (Some(0), "worker pay/1: 2 steps pending again, 0 in error (no try left)"), "{err}");
    let again = api.poll("pay/2", 2, 0).await;
    assert_eq!(again.iter().map(|s| s["attempt"].as_u64()).collect::<Vec<_>>(), [Some(2), Some(2)]);
    let (code, out, err) = cli(&["workers", "release", "pay/2"], false);
    assert_eq!((code, out.trim()), (Some(0), "worker pay/2: 2 steps pending again, 0 in error (no try left)"), "{err}");
    let (code, out, err) = cli(&["workers", "release", "pay/1"], false);
    assert_eq!((code, out.trim()), (Some(0), "worker pay/1: 0 steps pending again, 0 in error (no try left)"), "{err}");
    // A bad id changes nothing, either way.
    for server in [false, true] {
        let (code, _, err) = cli(&["workers", "release", "a b"], server);
        assert_ne!(code, Some(0));
        assert!(err.contains("worker id"), "{err}");
    }
    assert_eq!(api.poll("pay/3", 2, 0).await.len(), 2, "the steps pay/2 held are due again");
    drop(p);
}

async fn a_restarted_worker_takes_back_what_it_held(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // A minute to complete-by: without the release the steps would wait that long.
    api.register("60s", None).await;
    let ids = [api.submit("r-1", json!({}), 0).await, api.submit("r-2", json!({}), 0).await];
    let held = api.poll("pay/1", 2, 0).await;
    assert_eq!(held.len(), 2);
    // Another worker's release takes nothing of them.
    let (s, v) = api.post("/v1/agents/workers/other/release", json!({})).await;
    assert_eq!((s, v["returned"].as_u64(), v["gave_up"].as_u64()), (StatusCode::OK, Some(0), Some(0)), "{v}");
    assert!(api.poll("other", 2, 0).await.is_empty(), "both steps are still held");
    // "pay/1" starts again and releases first (its id is one path segment, percent-encoded).
    let (s, v) = api.post("/v1/agents/workers/pay%2F1/release", json!({})).await;
    assert_eq!((s, v["returned"].as_u64(), v["gave_up"].as_u64()), (StatusCode::OK, Some(2), Some(0)), "{v}");
    let again = api.poll("pay/1", 2, 0).await;
    assert_eq!(again.len(), 2, "the released steps are due at once");
    for step in &again {
        let before = held.iter().find(|h| h["step_id"] == step["step_id"]).expect("the same steps");
        assert_eq!(step["attempt"].as_u64(), Some(2), "{step}");
        assert_ne!(step["lease_token"], before["lease_token"]);
        // The old lease is gone: its reply changes nothing.
        let path = format!("/v1/agents/steps/{}/complete", before["step_id"].as_str().unwrap());
        let (s, v) = api.post(&path, json!({"lease_token": before["lease_token"], "output": {}})).await;
        assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "{v}");
        let (s, v) = api.post(&path, json!({"lease_token": step["lease_token"], "output": {"n": 2}})).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    for id in &ids {
        let t = api.task(id).await;
        assert_eq!(t["state"], "completed", "{t}");
        let released: Vec<&Value> =
            t["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "step.released").collect();
        assert_eq!(released.len(), 1, "{t}");
    }
    // A bad id is refused, and so is a caller without a token.
    let (s, v) = api.post("/v1/agents/workers/bad%20id/release", json!({})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let res = api.http.post(format!("{}/v1/agents/workers/x/release", api.base)).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

// ---------------------------------------------------------------------------------------------
// The Python worker example

struct PyWorker(Child);

impl PyWorker {
    fn start(api: &Api, worker: &str, capacity: u32, logs: &Path) -> PyWorker {
        PyWorker::start_with(api, worker, capacity, logs, &[])
    }

    fn start_with(api: &Api, worker: &str, capacity: u32, logs: &Path, extra: &[&str]) -> PyWorker {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/python_worker.py");
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(logs.join(format!("{worker}.log"))).unwrap();
        let child = Command::new("python3")
            .arg(script)
            .args(["--server", &api.base, "--agent", AGENT, "--worker", worker])
            .args(["--capacity", &capacity.to_string(), "--wait-ms", "2000"])
            .args(extra)
            .env("SHIFTBOSS_TOKEN", &api.token)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("python3 runs");
        PyWorker(child)
    }

    fn kill9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status().unwrap();
        self.0.wait().unwrap()
    }
}

impl Drop for PyWorker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn the_python_worker_finishes_tasks_and_survives_a_kill(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // Heartbeats keep a long step (a 2 s response window within 60 s); a killed worker's steps
    // lapse 2 s after its last heartbeat.
    api.register("60s", Some("2s")).await;

    // Quick steps, and one failing once for a passing reason: all completed.
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(api.submit(&format!("py-{i}"), json!({"i": i}), 0).await);
    }
    let mut py = PyWorker::start(&api, "py-a", 4, logs);
    for id in &ids {
        api.wait_state(id, "completed").await;
    }
    let t = api.task(&ids[0]).await;
    assert_eq!((t["output"]["shipped"].as_str(), t["output"]["worker"].as_str()), (Some("py-0"), Some("py-a")));
    assert!(api.workers_of().await.contains(&"py-a".to_owned()));
    // A permanent failure puts the step in Error and fails the task.
    let failing = api.submit("py-fail", json!({"fail": "permanent"}), 0).await;
    api.wait_state(&failing, "failed").await;
    // A step not ready yet is handed back and done on its second attempt, no failure counted.
    let later = api.submit("py-later", json!({"later_s": 0.3}), 0).await;
    api.wait_state(&later, "completed").await;
    let t = api.task(&later).await;
    assert_eq!((t["output"]["attempt"].as_u64(), t["steps"][0]["failure_count"].as_u64()), (Some(2), Some(0)), "{t}");
    assert_eq!(py.terminate().code(), Some(0), "SIGTERM: the worker finishes and exits 0");

    // Long steps (work for 60 s on the first attempt): the worker takes two and heartbeats.
    let long: Vec<String> = {
        let mut v = Vec::new();
        for i in 0..2 {
            v.push(api.submit(&format!("long-{i}"), json!({"sleep_s": 60, "only_first_attempt": true}), 0).await);
        }
        v
    };
    let mut doomed = PyWorker::start(&api, "py-doomed", 2, logs);
    for id in &long {
        wait_for("the long step is held", Duration::from_secs(20), || async {
            api.task(id).await["steps"][0]["state"] == "processing"
        })
        .await;
    }
    // Held past its first response window: the heartbeats work.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for id in &long {
        assert_eq!(api.task(id).await["steps"][0]["state"], "processing", "still held after 3 s");
    }
    doomed.kill9();
    // The supervisor takes the steps back at their complete-by; another worker does them.
    let _rescuer = PyWorker::start(&api, "py-rescuer", 2, logs);
    for id in &long {
        api.wait_state(id, "completed").await;
        let t = api.task(id).await;
        assert_eq!(
            (t["output"]["worker"].as_str(), t["output"]["attempt"].as_u64()),
            (Some("py-rescuer"), Some(2)),
            "{t}"
        );
    }
}

async fn the_python_worker_takes_back_its_steps_when_it_restarts(db: String, logs: &Path) {
    let (_p, api) = started(&db, logs).await;
    // No response window: a held step's complete-by is a minute away, longer than the wait below.
    api.register("60s", None).await;
    let id = api.submit("py-again", json!({"sleep_s": 60, "only_first_attempt": true}), 0).await;
    let mut first = PyWorker::start(&api, "py-again", 1, logs);
    wait_for("the step is held", Duration::from_secs(20), || async {
        api.task(&id).await["steps"][0]["state"] == "processing"
    })
    .await;
    first.kill9();
    let _again = PyWorker::start_with(&api, "py-again", 1, logs, &["--release-on-start"]);
    api.wait_state(&id, "completed").await;
    let t = api.task(&id).await;
    assert_eq!((t["output"]["worker"].as_str(), t["output"]["attempt"].as_u64()), (Some("py-again"), Some(2)), "{t}");
    let kinds: Vec<&str> = t["events"].as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"step.released") && !kinds.contains(&"step.expired"), "{kinds:?}");
}

// ---------------------------------------------------------------------------------------------
// Each on SQLite and on PostgreSQL

on_both_stores!(long_poll_is_woken_by_a_submission, long_poll_woken_on_sqlite, long_poll_woken_on_postgres);
on_both_stores!(
    capacity_and_priority_are_respected,
    capacity_and_priority_on_sqlite,
    capacity_and_priority_on_postgres
);
on_both_stores!(heartbeats_keep_a_step_past_its_first_complete_by, heartbeats_on_sqlite, heartbeats_on_postgres);
on_both_stores!(a_late_reply_after_the_lease_lapsed_is_refused, late_reply_on_sqlite, late_reply_on_postgres);
on_both_stores!(a_restarted_worker_takes_back_what_it_held, restarted_worker_on_sqlite, restarted_worker_on_postgres);
on_both_stores!(workers_by_the_cli, workers_cli_on_sqlite, workers_cli_on_postgres);
on_both_stores!(a_batch_of_replies_answers_each_on_its_own, batch_replies_on_sqlite, batch_replies_on_postgres);
on_both_stores!(a_postponed_step_comes_back_after_its_delay, postponed_on_sqlite, postponed_on_postgres);
on_both_stores!(
    the_python_worker_finishes_tasks_and_survives_a_kill,
    python_worker_on_sqlite,
    python_worker_on_postgres
);
on_both_stores!(
    the_python_worker_takes_back_its_steps_when_it_restarts,
    python_worker_restart_on_sqlite,
    python_worker_restart_on_postgres
);
