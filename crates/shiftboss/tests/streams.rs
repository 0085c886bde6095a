//! Live event streams (issue 18) from a real `shiftboss serve` over loopback, on SQLite and on
//! PostgreSQL: a task's stream sees every event of the running task once, in id order, and ends
//! after its last; a client that disconnects mid-task and reconnects with `Last-Event-ID` gets
//! the rest, so the union is the whole log exactly once; the all-tasks stream's filters; no token,
//! no stream.

mod common;

use common::api::Api;
use common::{PgSchema, Serve, Service, test_db, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// One Server-Sent Events message.
#[derive(Debug, Clone)]
struct Message {
    id: i64,
    event: String,
    data: Value,
}

/// Reads SSE messages off a response, a chunk at a time.
struct Reader {
    res: reqwest::Response,
    buf: String,
}

impl Reader {
    async fn open(api: &Api, path: &str, last_id: Option<i64>) -> Result<Reader, (StatusCode, String)> {
        let mut r = api.http.get(format!("{}{path}", api.base)).bearer_auth(&api.token);
        if let Some(id) = last_id {
            r = r.header("Last-Event-ID", id.to_string());
        }
        let res = r.send().await.unwrap();
        if res.status() != StatusCode::OK {
            let s = res.status();
            return Err((s, res.text().await.unwrap_or_default()));
        }
        let ct = res.headers().get("content-type").unwrap().to_str().unwrap().to_owned();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        Ok(Reader { res, buf: String::new() })
    }

    /// The next message; None when the server ended the stream. Keep-alive comments are skipped.
    async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse::<i64>().unwrap());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                match (id, event) {
                    (Some(id), Some(event)) => {
                        return Some(Message { id, event, data: serde_json::from_str(&data).unwrap() });
                    }
                    _ => continue, // a comment
                }
            }
            match self.res.chunk().await.expect("stream read") {
                Some(bytes) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                None => return None,
            }
        }
    }

    /// Every message until the server ends the stream.
    async fn until_end(mut self) -> Vec<Message> {
        let mut got = Vec::new();
        while let Some(m) = self.next().await {
            got.push(m);
        }
        got
    }
}

/// Three steps of 150 ms each: the task runs while the test reads its stream.
fn flow(name: &str) -> Value {
    json!({"name": name, "steps": [
        {"name": "a", "agent": "svc", "config": {"url": "/a"}, "timeout": "5s"},
        {"name": "b", "agent": "svc", "config": {"url": "/b"}, "timeout": "5s"},
        {"name": "c", "agent": "svc", "config": {"url": "/c"}, "timeout": "5s"}]})
}

async fn submit(api: &Api, key: &str, workflow: &str) -> String {
    let (s, v) = api.post("/v1/tasks", json!({"key": key, "workflow": workflow, "input": {}})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// The task's whole event log, by the paged read.
async fn log_ids(api: &Api, id: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => format!("/v1/tasks/{id}/events?limit=1000&after={a}"),
            None => format!("/v1/tasks/{id}/events?limit=1000"),
        };
        let (s, v) = api.get(&path).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        out.extend(v["items"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().parse::<i64>().unwrap()));
        match v["next"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => return out,
        }
    }
}

async fn streams(db: String, logs: &Path) {
    let service = Service::start(Duration::from_millis(150)).await;
    let mut p = Serve::new(db, "streams-1").service(&service.url).api().spawn(logs);
    p.wait_ready().await;
    let api = Api::of(&p);
    for name in ["fa", "fb"] {
        let (s, v) = api.post("/v1/workflows", flow(name)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }

    // No token: 401, for both streams.
    for path in ["/v1/events/stream", "/v1/tasks/1/events/stream"] {
        let res = api.http.get(format!("{}{path}", api.base)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let unknown = Reader::open(&api, "/v1/tasks/999999/events/stream", None).await.err().unwrap();
    assert_eq!(unknown.0, StatusCode::NOT_FOUND);
    let bad = Reader::open(&api, "/v1/tasks/1/events/stream?since=nope", None).await.err().unwrap();
    assert_eq!(bad.0, StatusCode::BAD_REQUEST);

    // A client reads part of a running task's stream, drops the connection, and reconnects.
    let id = submit(&api, "a-1", "fa").await;
    let path = format!("/v1/tasks/{id}/events/stream");
    let mut first = Reader::open(&api, &path, None).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(first.next().await.expect("the task's first events"));
    }
    drop(first);
    let rest = Reader::open(&api, &path, Some(got.last().unwrap().id)).await.unwrap().until_end().await;
    let processed_after = rest.iter().filter(|m| m.event == "step.processed").count();
    got.extend(rest);
    let ids: Vec<i64> = got.iter().map(|m| m.id).collect();
    assert_eq!(ids, log_ids(&api, &id).await, "the union is the task's whole log, once each, in id order");
    assert_eq!(got.last().unwrap().event, "task.completed", "the stream ends after the task's last event");
    assert_eq!(processed_after, 3, "the first connection was dropped before any step was done");
    let m = &got[0];
    assert_eq!(
        (m.event.as_str(), &m.data["kind"], &m.data["task_id"]),
        ("task.received", &json!("task.received"), &json!(id))
    );
    assert_eq!((&m.data["task_key"], &m.data["workflow"]), (&json!("a-1"), &json!("fa")));
    assert_eq!(m.data["id"], json!(m.id.to_string()));

    // Again from the start: the same, and it ends by itself; after the last id: 204.
    let again = Reader::open(&api, &path, None).await.unwrap().until_end().await;
    assert_eq!(again.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
    let over = Reader::open(&api, &path, Some(*ids.last().unwrap())).await.err().unwrap();
    assert_eq!(over.0, StatusCode::NO_CONTENT, "an ended task with nothing after the id");
    let since = Reader::open(&api, &format!("{path}?since={}", ids[2]), None).await.unwrap().until_end().await;
    assert_eq!(since.iter().map(|m| m.id).collect::<Vec<_>>(), ids[3..].to_vec(), "since= as Last-Event-ID");

    // The all-tasks stream with every filter, opened before the tasks run.
    let filtered = "/v1/events/stream?workflow=fa&kinds=task.received,task.completed&key_prefix=f-";
    let mut all = Reader::open(&api, filtered, None).await.unwrap();
    let mut unfiltered = Reader::open(&api, "/v1/events/stream", None).await.unwrap();
    let mut want = Vec::new();
    for (key, wf) in [("f-1", "fa"), ("f-2", "fb"), ("g-1", "fa"), ("f-3", "fa")] {
        let t = submit(&api, key, wf).await;
        want.push((t, key, wf));
    }
    for (t, ..) in &want {
        wait_for("completed", Duration::from_secs(20), || async {
            api.get(&format!("/v1/tasks/{t}")).await.1["state"] == "completed"
        })
        .await;
    }
    // The sentinel: once its completion arrives, every earlier event has (ids only grow).
    let last = submit(&api, "f-last", "fa").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "the sentinel's completion never came: {seen:?}");
        let m = all.next().await.expect("the all-tasks stream does not end");
        let done = m.event == "task.completed" && m.data["task_id"] == json!(last);
        seen.push(m);
        if done {
            break;
        }
    }
    let mut expected = Vec::new();
    for (t, key, wf) in want.iter().map(|(t, k, w)| (t.clone(), *k, *w)).chain([(last.clone(), "f-last", "fa")]) {
        if wf == "fa" && key.starts_with("f-") {
            expected.push((t.clone(), "task.received".to_owned()));
            expected.push((t, "task.completed".to_owned()));
        }
    }
    let mut got: Vec<(String, String)> =
        seen.iter().map(|m| (m.data["task_id"].as_str().unwrap().to_owned(), m.event.clone())).collect();
    let ordered: Vec<i64> = seen.iter().map(|m| m.id).collect();
    assert!(ordered.windows(2).all(|w| w[0] < w[1]), "in id order: {ordered:?}");
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "exactly the events the filters name");
    // Unfiltered, from when it opened: every event of the tasks that ran since, f-2's too.
    let f2 = &want[1].0;
    let f2_log = log_ids(&api, f2).await;
    let mut f2_seen = Vec::new();
    while f2_seen.len() < f2_log.len() {
        assert!(Instant::now() < deadline, "f-2's events did not all come: {f2_seen:?}");
        let m = unfiltered.next().await.expect("the unfiltered stream does not end");
        if m.data["task_id"] == json!(f2) {
            f2_seen.push(m.id);
        }
    }
    assert_eq!(f2_seen, f2_log);
    p.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    streams(db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    streams(schema.db_url(), dir.path()).await;
}
