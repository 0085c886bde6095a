//! Conductor's scripted tasks through a real `shiftboss serve` (issue 21): a WorkflowDef with an
//! INLINE and a JSON_JQ_TRANSFORM task registered over the API runs to Conductor's output, with
//! the jq filter evaluated in serve's own worker process (`shiftboss __jq-worker`), and a script
//! that never ends fails its task while serve goes on.

mod common;

use common::Serve;
use common::api::Api;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_conductor_workflow_runs_through_serve() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db").display().to_string();
    let mut p = Serve::new(&db, "scripts-1").api().spawn(dir.path());
    p.wait_ready().await;
    let api = Api::of(&p);
    let def = json!({
        "name": "basket", "version": 1, "schemaVersion": 2,
        "tasks": [
            {"name": "total", "taskReferenceName": "total", "type": "INLINE", "inputParameters": {
                "evaluatorType": "graaljs", "items": "${workflow.input.items}",
                "expression": "(function () { var s = 0; for (var i = 0; i < $.items.length; i++) { s += $.items[i].qty * $.items[i].price; } if ($.items.length > 100) { while (true) {} } return s; })()"}},
            {"name": "skus", "taskReferenceName": "skus", "type": "JSON_JQ_TRANSFORM", "inputParameters": {
                "items": "${workflow.input.items}", "queryExpression": ".items | map(.sku) | sort"}}
        ],
        "outputParameters": {"total": "${total.output.result}", "skus": "${skus.output.result}"}
    });
    let (s, v) = api.post("/v1/workflows", def).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");

    let items = json!([{"sku": "b", "qty": 2, "price": 1.25}, {"sku": "a", "qty": 1, "price": 4}]);
    let (s, v) =
        api.post("/v1/tasks", json!({"key": "basket-1", "workflow": "basket", "input": {"items": items}})).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    api.wait_state(&id, "completed").await;
    assert_eq!(api.task(&id).await["output"], json!({"total": 6.5, "skus": ["a", "b"]}));

    // A script past its time limit fails its own task; serve runs the next one.
    let many: Vec<_> = (0..101).map(|i| json!({"sku": format!("s{i}"), "qty": 1, "price": 1})).collect();
    let (_, v) =
        api.post("/v1/tasks", json!({"key": "basket-2", "workflow": "basket", "input": {"items": many}})).await;
    let stuck = v["id"].as_str().unwrap().to_owned();
    api.wait_state(&stuck, "failed").await;
    let (_, v) =
        api.post("/v1/tasks", json!({"key": "basket-3", "workflow": "basket", "input": {"items": items}})).await;
    let next = v["id"].as_str().unwrap().to_owned();
    api.wait_state(&next, "completed").await;
}
