//! The router in process, over a SQLite store: every documented route answers (none is missing
//! from the router), each needs the scope its document names (403 without it, 401 without a
//! token), and bad input gets a problem answer, never a 5xx.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use shiftboss_core::InstanceId;
use shiftboss_core::token::{Scope, Scopes, hash_secret, mint_secret};
use shiftboss_engine::outbound::{Outbound, OutboundConfig};
use shiftboss_engine::{Engine, HttpAgent};
use shiftboss_server::{ApiConfig, app};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{NewApiToken, Store};
use std::sync::Arc;
use tower::ServiceExt;

struct Api {
    router: Router,
    doc: Value,
    store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

impl Api {
    async fn new() -> Api {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
        let engine = Engine::builder(store.clone(), InstanceId::new("api-test").unwrap())
            .agent("http", HttpAgent::new(Outbound::new(&OutboundConfig::default()).unwrap()))
            .build()
            .unwrap();
        let (router, doc) = app(engine, ApiConfig::default()).unwrap();
        let doc = serde_json::to_value(&doc).unwrap();
        Api { router, doc, store, _dir: dir }
    }

    async fn token(&self, name: &str, scopes: &[Scope]) -> String {
        let secret = mint_secret();
        let t = NewApiToken {
            name: name.into(),
            scopes: Scopes::of(scopes.iter().copied()),
            secret_hash: hash_secret(&secret),
        };
        self.store.create_api_token(t).await.unwrap();
        secret
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        ct: &str,
    ) -> (StatusCode, Value, String) {
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            b = b.header(header::CONTENT_TYPE, ct);
        }
        let req = b.body(body.map(Body::from).unwrap_or_else(Body::empty)).unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let ctype = res.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        if ctype.starts_with("text/event-stream") {
            // A live stream does not end: its head is the answer.
            return (status, Value::Null, ctype);
        }
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, value, ctype)
    }

    async fn json(&self, method: Method, uri: &str, token: &str, body: Value) -> (StatusCode, Value) {
        let (s, v, _) =
            self.call(method, uri, Some(token), Some(serde_json::to_vec(&body).unwrap()), "application/json").await;
        (s, v)
    }

    /// Every operation of the document: its method, its path with the parameters filled in, and
    /// the scope it names (none for the open ones).
    fn operations(&self) -> Vec<(Method, String, Option<Scope>)> {
        let mut out = Vec::new();
        for (path, item) in self.doc["paths"].as_object().unwrap() {
            for (m, op) in item.as_object().unwrap() {
                let method = Method::from_bytes(m.to_uppercase().as_bytes()).unwrap();
                let scope = op["security"]
                    .as_array()
                    .and_then(|s| s.first())
                    .and_then(|s| s["token"][0].as_str())
                    .map(|s| Scope::parse(s).unwrap());
                let filled = path
                    .replace("{id}", "999999")
                    .replace("{key}", "nokey")
                    .replace("{name}", "noflow")
                    .replace("{version}", "1")
                    .replace("{action}", "cancel")
                    .replace("{workflowId}", "999999")
                    .replace("{tasktype}", "notype")
                    .replace("{taskReferenceName}", "nostep");
                out.push((method, filled, scope));
            }
        }
        out
    }
}

#[tokio::test]
async fn every_documented_route_answers_and_needs_its_scope() {
    let api = Api::new().await;
    let ops = api.operations();
    assert!(ops.len() >= 25, "the document lists {} operations", ops.len());
    let admin = api.token("root", &[Scope::Admin]).await;
    for (method, path, scope) in &ops {
        let body = (*method == Method::POST).then(|| b"{}".to_vec());
        // With every scope: the route exists (no "no such route"), and {} is refused as input, not as a route.
        let (status, v, _) = api.call(method.clone(), path, Some(&admin), body.clone(), "application/json").await;
        assert!(
            !(status == StatusCode::NOT_FOUND && v["detail"].as_str().is_some_and(|d| d.starts_with("no such route"))),
            "{method} {path} is documented but not routed"
        );
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(!status.is_server_error(), "{method} {path}: {status} {v}");
        let Some(scope) = scope else { continue };
        // Without a token: 401.
        let (status, v, ct) = api.call(method.clone(), path, None, body.clone(), "application/json").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} without a token: {v}");
        assert!(ct.starts_with("application/problem+json"), "{ct}");
        assert_eq!(v["code"], "unauthorized");
        // With every scope but the one it names (and not admin): 403.
        let others: Vec<Scope> = Scope::ALL.into_iter().filter(|s| s != scope && *s != Scope::Admin).collect();
        let name = format!("not-{scope}-{}", fastrand_name());
        let t = api.token(&name, &others).await;
        let (status, v, _) = api.call(method.clone(), path, Some(&t), body, "application/json").await;
        if *scope == Scope::Admin || !others.is_empty() {
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path} without scope {scope}: {v}");
            assert_eq!(v["code"], "forbidden");
        }
    }
}

fn fastrand_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

#[tokio::test]
async fn a_bad_token_is_refused_and_a_revoked_one_too() {
    let api = Api::new().await;
    let (status, v, _) = api.call(Method::GET, "/v1/tasks", Some("sbt_nothing"), None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    let (status, _, _) = api.call(Method::GET, "/v1/tasks", None, None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let reader = api.token("reader", &[Scope::Read]).await;
    let (status, _, _) = api.call(Method::GET, "/v1/tasks", Some(&reader), None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(api.store.revoke_api_token("reader").await.unwrap());
    // A fresh router: the revocation is seen at once by a process that had not cached the token.
    let (router, _) = app(
        Engine::builder(api.store.clone(), InstanceId::new("api-test-2").unwrap()).build().unwrap(),
        ApiConfig::default(),
    )
    .unwrap();
    let req = Request::builder()
        .uri("/v1/tasks")
        .header(header::AUTHORIZATION, format!("Bearer {reader}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(router.oneshot(req).await.unwrap().status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn bad_input_gets_a_problem_and_changes_nothing() {
    let api = Api::new().await;
    let t = api.token("all", &[Scope::Admin]).await;
    let flow = json!({"name": "one", "version": 1, "steps": [{"name": "a", "agent": "http", "config": {"url": "http://127.0.0.1:9/x"}}]});
    let (status, v) = api.json(Method::POST, "/v1/workflows", &t, flow).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");

    let raw = |body: &[u8]| api.call(Method::POST, "/v1/tasks", Some(&t), Some(body.to_vec()), "application/json");
    let (status, v, ct) = raw(b"{\"key\": ").await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::BAD_REQUEST, Some("malformed_json")), "{v}");
    assert!(ct.starts_with("application/problem+json"));
    assert!(v["request_id"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    let (status, v, _) = raw(br#"{"key": 5, "workflow": "one"}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("key"), "names the field: {v}");
    let (status, v, _) = raw(br#"{"key": "k", "workflow": "one", "colour": 1}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "unknown field: {v}");
    let (status, v, _) = raw(br#"{"key": "k", "workflow": "none"}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "unknown workflow: {v}");
    let (status, v, _) = raw(br#"{"key": "", "workflow": "one"}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "empty key: {v}");
    let deep = format!("{{\"key\":\"d\",\"workflow\":\"one\",\"input\":{}{}}}", "[".repeat(200), "]".repeat(200));
    let (status, v, _) = raw(deep.as_bytes()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "deep JSON: {v}");
    let big = format!("{{\"key\":\"b\",\"workflow\":\"one\",\"input\":\"{}\"}}", "x".repeat(2 << 20));
    let (status, v, _) = raw(big.as_bytes()).await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("body_too_large")), "{v}");
    let (status, _, _) = api.call(Method::POST, "/v1/tasks", Some(&t), Some(b"key=1".to_vec()), "text/plain").await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, v, _) = api.call(Method::GET, "/v1/nothing", Some(&t), None, "").await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{v}");
    let (status, v, _) = api.call(Method::DELETE, "/v1/tasks", Some(&t), None, "").await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::METHOD_NOT_ALLOWED, Some("method_not_allowed")), "{v}");
    let (status, _, _) = api.call(Method::GET, "/v1/tasks/abc", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api.call(Method::GET, "/v1/tasks?limit=5000", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _, _) = api.call(Method::GET, "/v1/tasks?state=sleeping", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Nothing of the above was written.
    let (status, v, _) = api.call(Method::GET, "/v1/tasks", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["items"].as_array().unwrap().len(), 0, "{v}");
}

#[tokio::test]
async fn the_same_key_gives_back_the_task_and_another_input_is_a_conflict() {
    let api = Api::new().await;
    let t = api.token("all", &[Scope::Admin]).await;
    let flow = json!({"name": "one", "version": 1, "steps": [{"name": "a", "agent": "http", "config": {"url": "http://127.0.0.1:9/x"}}]});
    assert_eq!(api.json(Method::POST, "/v1/workflows", &t, flow.clone()).await.0, StatusCode::CREATED);
    let (status, v) = api.json(Method::POST, "/v1/workflows", &t, flow).await;
    assert_eq!((status, v["outcome"].as_str()), (StatusCode::OK, Some("unchanged")));
    let submit = json!({"key": "order-1", "workflow": "one", "input": {"n": 1}});
    let (status, first) = api.json(Method::POST, "/v1/tasks", &t, submit.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["created"], true);
    let (status, again) = api.json(Method::POST, "/v1/tasks", &t, submit).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!((again["id"].clone(), again["created"].clone()), (first["id"].clone(), json!(false)));
    let (status, v) =
        api.json(Method::POST, "/v1/tasks", &t, json!({"key": "order-1", "workflow": "one", "input": {"n": 2}})).await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::CONFLICT, Some("conflict")), "{v}");
    let id = first["id"].as_str().unwrap();
    let (status, v, _) = api.call(Method::GET, &format!("/v1/tasks/{id}"), Some(&t), None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["key"], "order-1");
    assert_eq!(v["input"], json!({"n": 1}));
    assert!(!v["steps"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["events"][0]["kind"], "task.received");
    assert_eq!(v["events"][0]["actor"], "all", "the actor is the token's name");
    let (status, v, _) = api.call(Method::GET, "/v1/tasks/by-key/order-1", Some(&t), None, "").await;
    assert_eq!((status, v["id"].as_str()), (StatusCode::OK, Some(id)));

    // A batch: all or none, each idempotent by its key.
    let (status, v) = api
        .json(
            Method::POST,
            "/v1/tasks/batch",
            &t,
            json!({"tasks": [
            {"key": "order-1", "workflow": "one", "input": {"n": 1}},
            {"key": "order-2", "workflow": "one"},
            {"key": "order-3", "workflow": "one"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let created: Vec<bool> = v["items"].as_array().unwrap().iter().map(|i| i["created"].as_bool().unwrap()).collect();
    assert_eq!(created, vec![false, true, true], "{v}");
    assert_eq!(v["items"][0]["id"], first["id"]);
    let (status, v) = api
        .json(
            Method::POST,
            "/v1/tasks/batch",
            &t,
            json!({"tasks": [
            {"key": "order-4", "workflow": "one"},
            {"key": "order-1", "workflow": "one", "input": {"n": 9}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let (status, _, _) = api.call(Method::GET, "/v1/tasks/by-key/order-4", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a refused batch wrote nothing");

    // No scheduler runs here: the task's step waits, due, in its agent type's queue.
    let req = Request::builder()
        .uri("/metrics")
        .header(header::AUTHORIZATION, format!("Bearer {t}"))
        .body(Body::empty())
        .unwrap();
    let res = api.router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let text = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(text.contains("shiftboss_agent_steps{agent=\"http\",state=\"due\"} 3"), "{text}");
    assert!(text.contains("shiftboss_agent_oldest_due_age_seconds{agent=\"http\"}"), "{text}");
    assert!(text.contains("shiftboss_tasks{state=\"running\"} 3"), "{text}");
    assert!(text.contains("shiftboss_store_up 1"), "{text}");
}

#[tokio::test]
async fn jobs_enqueue_list_read_and_resubmit() {
    let api = Api::new().await;
    let t = api.token("shop", &[Scope::Submit, Scope::Read, Scope::Operate]).await;
    let (status, one) = api
        .json(
            Method::POST,
            "/v1/jobs",
            &t,
            json!({"handler": "mail", "params": {"to": "a"}, "key": "mail-a", "delay": "1h"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    let (status, again) = api
        .json(
            Method::POST,
            "/v1/jobs",
            &t,
            json!({"handler": "mail", "params": {"to": "a"}, "key": "mail-a", "delay": "1h"}),
        )
        .await;
    assert_eq!((status, again["id"].clone()), (StatusCode::OK, one["id"].clone()), "the same key gives back the job");
    let (status, v) = api
        .json(Method::POST, "/v1/jobs", &t, json!({"handler": "mail", "params": {"to": "b"}, "key": "mail-a"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let (status, batch) = api
        .json(
            Method::POST,
            "/v1/jobs/batch",
            &t,
            json!({"jobs": [{"handler": "mail", "key": "b1"}, {"handler": "mail", "key": "b2"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{batch}");
    assert_eq!(batch["items"].as_array().unwrap().len(), 2);
    // A bad job in a batch names its place, and nothing of the batch is written.
    let (status, v) = api
        .json(
            Method::POST,
            "/v1/jobs/batch",
            &t,
            json!({"jobs": [{"handler": "mail", "key": "c1"}, {"handler": "mail", "due_at": "soon"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(v["detail"].as_str().unwrap().starts_with("jobs[1]."), "{v}");
    let (status, v, _) = api.call(Method::GET, "/v1/jobs/by-key/c1", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    // Paging through the three jobs, two at a time.
    let (status, page, _) = api.call(Method::GET, "/v1/jobs?handler=mail&limit=2", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let next = page["next"].as_str().unwrap();
    let (_, rest, _) =
        api.call(Method::GET, &format!("/v1/jobs?handler=mail&limit=2&before={next}"), Some(&t), None, "").await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1, "{rest}");
    let id = one["id"].as_str().unwrap();
    let (status, v, _) = api.call(Method::GET, &format!("/v1/jobs/{id}"), Some(&t), None, "").await;
    assert_eq!(
        (status, v["key"].as_str(), v["state"].as_str()),
        (StatusCode::OK, Some("mail-a"), Some("pending")),
        "{v}"
    );
    let (status, v) = api
        .json(Method::POST, "/v1/jobs/resubmit", &t, json!({"handler": "mail", "dry_run": true, "reason": "r"}))
        .await;
    assert_eq!((status, v["matched"].as_u64()), (StatusCode::OK, Some(0)), "nothing has given up: {v}");
    let (status, _, _) = api.call(Method::GET, "/v1/jobs?colour=red", Some(&t), None, "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an unknown filter is refused, not ignored");
}

#[tokio::test]
async fn the_worker_protocol_routes_are_documented_with_their_scopes() {
    let api = Api::new().await;
    let ops = api.operations();
    let scope_of = |m: Method, p: &str| ops.iter().find(|(om, op, _)| *om == m && op == p).map(|(_, _, s)| *s);
    assert_eq!(scope_of(Method::POST, "/v1/agents/poll"), Some(Some(Scope::Agent)));
    for verb in ["heartbeat", "complete", "fail"] {
        let path = format!("/v1/agents/steps/999999/{verb}");
        assert_eq!(scope_of(Method::POST, &path), Some(Some(Scope::Agent)), "{path}");
    }
    assert_eq!(scope_of(Method::GET, "/v1/agents/workers"), Some(Some(Scope::Read)));
    // This engine declares no remote agent type: a poll for any type is refused, so a worker
    // never takes the steps of an in-process agent.
    let worker = api.token("ship-worker", &[Scope::Agent]).await;
    let (status, v) = api
        .json(Method::POST, "/v1/agents/poll", &worker, json!({"agents": ["http"], "worker": "w1", "capacity": 1}))
        .await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("agent_not_remote")), "{v}");
    // A reply for a step that does not exist is a lost lease, not a server error.
    let (status, v) = api
        .json(Method::POST, "/v1/agents/steps/999999/complete", &worker, json!({"lease_token": "1", "output": {}}))
        .await;
    assert_eq!((status, v["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")), "{v}");
    let (status, v) =
        api.json(Method::POST, "/v1/agents/steps/999999/heartbeat", &worker, json!({"lease_token": "x"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
}

#[tokio::test]
async fn conductor_token_and_x_authorization_map_onto_api_tokens() {
    let api = Api::new().await;
    let secret = api.token("sdk-app", &[Scope::Read]).await;
    // A key (the token's name) and secret give the token the SDK sends as X-Authorization.
    let body = |id: &str, s: &str| serde_json::to_vec(&json!({"keyId": id, "keySecret": s})).unwrap();
    let (s, v, _) =
        api.call(Method::POST, "/api/token", None, Some(body("sdk-app", &secret)), "application/json").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let token = v["token"].as_str().unwrap().to_owned();
    // Another name with the right secret, or a wrong secret: 401.
    for (id, sec) in [("other", secret.as_str()), ("sdk-app", "sb_wrong")] {
        let (s, _, _) = api.call(Method::POST, "/api/token", None, Some(body(id, sec)), "application/json").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{id}");
    }
    let with_header = |h: &'static str, value: String, uri: &'static str| {
        let req = Request::builder().method(Method::GET).uri(uri).header(h, value).body(Body::empty()).unwrap();
        api.router.clone().oneshot(req)
    };
    let res = with_header("x-authorization", token.clone(), "/api/metadata/taskdefs").await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    // The token's scopes hold: reading is allowed, polling (agent) is not.
    let res = with_header("x-authorization", token.clone(), "/api/tasks/poll/batch/ship").await.unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = with_header("x-authorization", "sb_wrong".into(), "/api/metadata/taskdefs").await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // Each of Conductor's routes is documented with its scope.
    let ops = api.operations();
    let scope_of = |m: Method, p: &str| ops.iter().find(|(om, op, _)| *om == m && op == p).map(|(_, _, s)| *s);
    assert_eq!(scope_of(Method::POST, "/api/token"), Some(None));
    assert_eq!(scope_of(Method::GET, "/api/tasks/poll/batch/notype"), Some(Some(Scope::Agent)));
    assert_eq!(scope_of(Method::POST, "/api/tasks"), Some(Some(Scope::Agent)));
    assert_eq!(scope_of(Method::POST, "/api/workflow"), Some(Some(Scope::Submit)));
    assert_eq!(scope_of(Method::GET, "/api/workflow/999999"), Some(Some(Scope::Read)));
    assert_eq!(scope_of(Method::DELETE, "/api/workflow/999999"), Some(Some(Scope::Operate)));
    assert_eq!(scope_of(Method::POST, "/api/metadata/workflow"), Some(Some(Scope::Admin)));
    // A malformed task id in an update is 404; update-v2 is not served (the SDKs fall back on 404).
    let admin = api.token("root", &[Scope::Admin]).await;
    let (s, v) = api.json(Method::POST, "/api/tasks", &admin, json!({"taskId": "x", "status": "COMPLETED"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, _) = api.json(Method::POST, "/api/tasks/update-v2", &admin, json!({"taskId": "1.1"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
