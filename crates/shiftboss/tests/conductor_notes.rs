//! What Conductor's workers and clients leave beside a workflow's state, over a real `serve` on
//! both stores: task definitions and the workflow document as registered, kept by the store (a
//! second serve process on the same database answers them); a worker's IN_PROGRESS update carries
//! progress (read back as the task's outputData while it runs) and log lines, which the task's
//! log route answers in order with the lines added on their own; a finished workflow removed to
//! history at once.

mod common;

use common::api::Api;
use common::{PgSchema, Serve, test_db, wait_for};
use reqwest::StatusCode;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

async fn notes(db: String, logs: &Path) {
    let mut a = Serve::new(db.clone(), "notes-a").api().arg("--remote-agent").arg("copy").spawn(logs);
    a.wait_ready().await;
    let api = Api::of(&a);

    let task_def = json!({"name": "copy", "retryCount": 2, "retryLogic": "FIXED", "retryDelaySeconds": 1,
                          "responseTimeoutSeconds": 30, "timeoutSeconds": 120, "ownerEmail": "ops@example.com"});
    let (s, v) = api.post("/api/metadata/taskdefs", json!([task_def])).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // A field the rendering from the shiftboss definition would not give back: the document is kept.
    let def = json!({"name": "backup", "version": 1, "ownerEmail": "ops@example.com", "description": "nightly copy",
                     "tasks": [{"name": "copy", "taskReferenceName": "copy_files", "type": "SIMPLE"}]});
    let (s, v) = api.post("/api/metadata/workflow", def.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = api.post("/api/workflow/backup", json!({"dir": "/srv"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let id = v.as_str().map_or_else(|| v.to_string(), str::to_owned);

    let (s, task) = api.get("/api/tasks/poll/copy?workerid=w1").await;
    assert_eq!(s, StatusCode::OK, "{task}");
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let beat = json!({"taskId": task_id, "workflowInstanceId": id, "status": "IN_PROGRESS", "extendLease": true,
                      "workerId": "w1", "outputData": {"copied": 3, "of": 10},
                      "logs": [{"log": "listing /srv", "taskId": task_id, "createdTime": 1}, {"log": "3 of 10 copied"}]});
    let (s, v) = api.post("/api/tasks", beat).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let wf = api.get(&format!("/api/workflow/{id}?includeTasks=true")).await.1;
    let listed = &wf["tasks"][0];
    assert_eq!(
        (listed["status"].clone(), listed["outputData"].clone()),
        (json!("IN_PROGRESS"), json!({"copied": 3, "of": 10})),
        "{wf}"
    );

    // A line added on its own, as the SDKs' log call sends it (a JSON string).
    let res = api
        .http
        .post(format!("{}/api/tasks/{task_id}/log", api.base))
        .bearer_auth(&api.token)
        .header("content-type", "application/json")
        .body("\"halfway\"")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (s, _) = api.post("/api/tasks/99999999-1/log", json!("nobody's")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a task that does not exist");
    let (s, _) = api.post(&format!("/api/tasks/{task_id}/log"), json!("x".repeat(17 * 1024))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "an oversized line");

    let done = json!({"taskId": task_id, "workflowInstanceId": id, "status": "COMPLETED", "workerId": "w1",
                      "outputData": {"copied": 10}, "logs": [{"log": "all copied"}]});
    let (s, v) = api.post("/api/tasks", done).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    wait_for("the workflow completed", Duration::from_secs(30), || async {
        api.get(&format!("/api/workflow/{id}")).await.1["status"] == "COMPLETED"
    })
    .await;
    let wf = api.get(&format!("/api/workflow/{id}?includeTasks=true")).await.1;
    assert_eq!(wf["tasks"][0]["outputData"], json!({"copied": 10}), "the output, not the progress, once done");

    // Removed: to history at once, still read; a running workflow is refused and left running.
    let (s, v) = api.post("/api/workflow/backup", json!({"dir": "/home"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let running = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let remove =
        |wf: &str| api.http.delete(format!("{}/api/workflow/{wf}/remove", api.base)).bearer_auth(&api.token).send();
    assert_eq!(remove(&running).await.unwrap().status(), StatusCode::CONFLICT);
    assert_eq!(api.get(&format!("/api/workflow/{running}")).await.1["status"], "RUNNING");
    assert_eq!(remove(&id).await.unwrap().status(), StatusCode::OK);
    assert_eq!(remove(&id).await.unwrap().status(), StatusCode::NOT_FOUND, "gone from the live tables");
    let (s, wf) = api.get(&format!("/api/workflow/{id}")).await;
    assert_eq!((s, wf["status"].clone()), (StatusCode::OK, json!("COMPLETED")), "read from history");
    let (_, found) = api.get("/api/workflow/search?query=workflowType%3Dbackup").await;
    assert_eq!(found["totalHits"], 1, "only the running one is live: {found}");

    // A second process on the same database answers what the first was told.
    let mut b = Serve::new(db, "notes-b").api().arg("--remote-agent").arg("copy").spawn(logs);
    b.wait_ready().await;
    let other = Api { base: b.api_url().expect("b's API"), token: api.token.clone(), http: api.http.clone() };
    let (s, lines) = other.get(&format!("/api/tasks/{task_id}/log")).await;
    assert_eq!(s, StatusCode::OK, "{lines}");
    let text: Vec<&str> = lines.as_array().unwrap().iter().map(|l| l["log"].as_str().unwrap()).collect();
    assert_eq!(text, ["listing /srv", "3 of 10 copied", "halfway", "all copied"]);
    assert!(lines.as_array().unwrap().iter().all(|l| l["taskId"] == task_id && l["createdTime"].as_i64() > Some(0)));
    let (s, v) = other.get("/api/metadata/taskdefs/copy").await;
    assert_eq!(
        (s, v["retryCount"].clone(), v["ownerEmail"].clone()),
        (StatusCode::OK, json!(2), json!("ops@example.com"))
    );
    let (s, v) = other.get("/api/metadata/workflow/backup").await;
    assert_eq!((s, v), (StatusCode::OK, def.clone()), "the document as registered");
    let (_, all) = other.get("/api/metadata/workflow").await;
    assert!(all.as_array().unwrap().contains(&def), "{all}");
    let (s, _) = other.get("/api/tasks/not-a-task/log").await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let res = other.http.delete(format!("{}/api/metadata/taskdefs/copy", other.base)).bearer_auth(&other.token).send();
    assert_eq!(res.await.unwrap().status(), StatusCode::OK);
    let (s, _) = api.get("/api/metadata/taskdefs/copy").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "forgotten for every process");
    let (_, v) = api.get("/api/metadata/taskdefs").await;
    assert_eq!(v, json!([]));
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_notes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    notes(db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_notes_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    notes(schema.db_url(), dir.path()).await;
}
