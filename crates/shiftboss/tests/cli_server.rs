//! The CLI as a client of the HTTP API (issue 16): the real `shiftboss` binary run with `--db`
//! and with `--server URL --token T` against one real `serve` process and its store prints the
//! same. Reads of the same task, job or workflow are compared byte for byte; an action is taken
//! once each way, on twin tasks in the same state, and the two outputs differ only by the twin's
//! id. Then what goes wrong: a bad token, a token without the scope, a server that is down or
//! does not answer, and flags that do not go together.

mod common;

use common::{PgSchema, Serve, ServeProc, bin, test_db, wait_for};
use serde_json::Value;
use shiftboss::backend::{ApiBackend, Backend, ServerTarget, StoreBackend};
use shiftboss::target::DbTarget;
use shiftboss_engine::ClientConfig;
use shiftboss_store::{JobQuery, ListTasks, TaskFilter};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// One store, reached both ways.
struct Both {
    db: String,
    url: String,
    token: String,
}

impl Both {
    async fn of(p: &ServeProc, db: String) -> Both {
        wait_for("the API's address", Duration::from_secs(10), || async { p.api_url().is_some() }).await;
        let url = p.api_url().unwrap();
        let token = p.admin_token().expect("serve wrote the first admin token");
        Both { db, url, token }
    }

    fn db(&self, args: &[&str]) -> Output {
        bin().args(["--db", &self.db]).args(args).output().unwrap()
    }

    fn api_as(&self, token: &str, args: &[&str]) -> Output {
        // The token comes from the environment, as the README advises.
        bin().args(["--server", &self.url]).args(args).env("SHIFTBOSS_TOKEN", token).output().unwrap()
    }

    fn api(&self, args: &[&str]) -> Output {
        self.api_as(&self.token, args)
    }

    /// Runs `args` both ways; both succeed and print the same. Returns what they printed.
    fn same(&self, args: &[&str]) -> String {
        let (d, a) = (self.db(args), self.api(args));
        assert!(d.status.success(), "--db {args:?} failed: {}", err(&d));
        assert!(a.status.success(), "--server {args:?} failed: {}", err(&a));
        assert_eq!(out(&d), out(&a), "{args:?}: --db printed the first, --server the second");
        assert_eq!(err(&d), err(&a), "{args:?}: standard error");
        out(&d)
    }

    /// Runs `args` both ways; both fail with exit code 2 and say the same.
    fn same_refusal(&self, args: &[&str]) -> String {
        let (d, a) = (self.db(args), self.api(args));
        assert_eq!(d.status.code(), Some(2), "--db {args:?}: {}", err(&d));
        assert_eq!(a.status.code(), Some(2), "--server {args:?}: {}", err(&a));
        assert_eq!(out(&d), out(&a), "{args:?}");
        err(&a)
    }

    /// An action taken once each way, on twin tasks (or steps): `db_args` through the store,
    /// the same with `api_id` for `db_id` through the API. The outputs differ by the id only.
    fn twins(&self, db_args: &[&str], db_id: &str, api_id: &str) -> String {
        let api_args: Vec<&str> = db_args.iter().map(|a| if *a == db_id { api_id } else { a }).collect();
        let (d, a) = (self.db(db_args), self.api(&api_args));
        assert!(d.status.success(), "--db {db_args:?} failed: {}", err(&d));
        assert!(a.status.success(), "--server {api_args:?} failed: {}", err(&a));
        let expected = out(&d).replace(&format!(" {db_id}"), &format!(" {api_id}"));
        assert_eq!(expected, out(&a), "{db_args:?}: --db (ids swapped), then --server");
        out(&a)
    }

    /// The task's view through the store, as JSON.
    fn view(&self, task: &str) -> Value {
        let o = self.db(&["tasks", "show", task, "--json"]);
        assert!(o.status.success(), "{}", err(&o));
        serde_json::from_str(&out(&o)).unwrap()
    }

    /// Waits until the task is in `state` with no step pending or processing (nothing moving).
    async fn settled(&self, task: &str, state: &str) -> Value {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.view(task);
            let moving = v["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == "agent" && (s["state"] == "pending" || s["state"] == "processing"));
            if v["state"] == state && !moving {
                return v;
            }
            assert!(Instant::now() < give_up, "task {task} never settled as {state}: {v:#}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A service for the `svc` agent: `/slow` answers after a moment, `/fail` refuses for good (422)
/// after a moment: an action that sends a step to run reads its task still running, however
/// soon the scheduler (which the API path wakes) claims the step.
async fn service() -> String {
    use axum::http::StatusCode;
    use axum::routing::post;
    let app = axum::Router::new()
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                "{\"ok\":true}"
            }),
        )
        .route(
            "/fail",
            post(|| async {
                tokio::time::sleep(Duration::from_millis(400)).await;
                (StatusCode::UNPROCESSABLE_ENTITY, "card declined")
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

const GATE: &str = r#"
name: gate
description: waits for an approval, then ships
steps:
  - {name: approval, kind: wait, signal: approve}
  - {name: ship, agent: svc, config: {url: /slow}, timeout: 5s}
"#;

const CHARGE: &str = r#"{"name": "charge", "steps": [
    {"name": "pay", "agent": "svc", "config": {"url": "/fail"}, "timeout": "5s"},
    {"name": "receipt", "agent": "svc", "config": {"url": "/slow"}, "timeout": "5s"}]}"#;

/// Starts a task each way (keys `KEY-db` and `KEY-api`); their ids.
fn start_twins(b: &Both, workflow: &str, key: &str) -> (String, String) {
    let (kd, ka) = (format!("{key}-db"), format!("{key}-api"));
    let d = b.db(&["tasks", "start", workflow, "--key", &kd, "--input", r#"{"n":1}"#]);
    let a = b.api(&["tasks", "start", workflow, "--key", &ka, "--input", r#"{"n":1}"#]);
    assert!(d.status.success() && a.status.success(), "{} / {}", err(&d), err(&a));
    let id = |o: &Output| out(o).split_whitespace().nth(1).unwrap().to_owned();
    let (id_d, id_a) = (id(&d), id(&a));
    assert_eq!(out(&d).replace(&kd, &ka).replace(&id_d, &id_a), out(&a), "tasks start");
    assert!(out(&a).ends_with("started\n"), "{}", out(&a));
    (id_d, id_a)
}

async fn both_ways(db: String, logs: &Path) {
    let svc = service().await;
    let mut p = Serve::new(db.clone(), "cli-1").service(&svc).api().spawn(logs);
    p.wait_ready().await;
    let b = Both::of(&p, db).await;
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate.yaml");
    let charge = dir.path().join("charge.json");
    std::fs::write(&gate, GATE).unwrap();
    std::fs::write(&charge, CHARGE).unwrap();
    let (gate, charge) = (gate.to_str().unwrap(), charge.to_str().unwrap());

    // Workflows: a dry run, registering (first through the API), again (unchanged), list, show.
    b.same(&["workflows", "apply", gate, "--dry-run"]);
    let first = b.api(&["workflows", "apply", gate]);
    assert_eq!(out(&first), "workflow gate v1: registered\n", "{}", err(&first));
    let first = b.db(&["workflows", "apply", charge]);
    assert_eq!(out(&first), "workflow charge v1: registered\n", "{}", err(&first));
    b.same(&["workflows", "apply", gate]);
    b.same(&["workflows", "apply", charge]);
    let list = b.same(&["workflows", "list"]);
    assert!(list.contains("waits for an approval"), "{list}");
    b.same(&["workflows", "show", "gate"]);
    b.same(&["workflows", "show", "charge", "--version", "1"]);
    assert!(b.same_refusal(&["workflows", "show", "nope"]).contains("no workflow \"nope\""));

    // Start, and start again (the same key gives back the task).
    let (g_db, g_api) = start_twins(&b, "gate", "g");
    let again = b.same(&["tasks", "start", "gate", "--key", "g-db", "--input", r#"{"n":1}"#]);
    assert_eq!(again, format!("task {g_db} (g-db) already existed\n"));
    for t in [&g_db, &g_api] {
        b.same(&["tasks", "show", t]);
        b.same(&["tasks", "show", t, "--json"]);
    }
    b.same(&["tasks", "show", "g-api"]);

    // Pause, resume, signal: once each way on the twins.
    assert!(b.twins(&["tasks", "pause", &g_db, "--reason", "hold"], &g_db, &g_api).contains("it is now paused"));
    b.same(&["tasks", "show", &g_api]);
    assert!(b.twins(&["tasks", "resume", &g_db], &g_db, &g_api).contains("it is now running"));
    b.twins(&["tasks", "signal", &g_db, "approve", "--data", r#"{"by":"ann"}"#], &g_db, &g_api);
    b.settled(&g_db, "completed").await;
    let done = b.settled(&g_api, "completed").await;
    assert!(
        done["events"].as_array().unwrap().iter().any(|e| e["actor"] == "admin"),
        "actions through the API are recorded as the token's name: {done:#}"
    );
    for t in [&g_db, &g_api] {
        b.same(&["tasks", "show", t]);
        b.same(&["tasks", "show", t, "--json"]);
    }
    // A refusal says the same either way (the store's words).
    assert!(b.same_refusal(&["tasks", "cancel", &g_db]).contains("already ended (completed)"));
    assert!(b.same_refusal(&["tasks", "show", "no-such-key"]).contains("no task with id or key \"no-such-key\""));

    // Cancel and terminate.
    let (c_db, c_api) = start_twins(&b, "gate", "cancelled");
    b.twins(&["tasks", "cancel", &c_db, "--reason", "customer left"], &c_db, &c_api);
    let (t_db, t_api) = start_twins(&b, "gate", "ended");
    b.twins(&["tasks", "terminate", &t_db], &t_db, &t_api);

    // A failing charge: retry, resubmit its step, rerun from it, skip it.
    let (f_db, f_api) = start_twins(&b, "charge", "f");
    b.settled(&f_db, "failed").await;
    b.settled(&f_api, "failed").await;
    b.same(&["tasks", "show", &f_db]);
    b.same(&["tasks", "show", &f_api, "--json"]);
    assert!(b.twins(&["tasks", "retry", &f_db], &f_db, &f_api).contains("it is now running"));
    b.settled(&f_db, "failed").await;
    let v = b.settled(&f_api, "failed").await;
    let step_api = v["steps"][0]["id"].as_str().unwrap().to_owned();
    let step_db = b.view(&f_db)["steps"][0]["id"].as_str().unwrap().to_owned();
    b.twins(&["steps", "resubmit", &step_db, "--reason", "card updated"], &step_db, &step_api);
    b.settled(&f_db, "failed").await;
    b.settled(&f_api, "failed").await;
    assert!(b.twins(&["tasks", "rerun", &f_db, "--from", "pay"], &f_db, &f_api).contains("it is now running"));
    b.settled(&f_db, "failed").await;
    b.settled(&f_api, "failed").await;
    b.twins(&["tasks", "skip", &f_db, "pay", "--output", r#"{"paid":"by hand"}"#], &f_db, &f_api);
    b.settled(&f_db, "completed").await;
    b.settled(&f_api, "completed").await;
    for t in [&f_db, &f_api] {
        b.same(&["tasks", "show", t]);
        b.same(&["tasks", "show", t, "--json"]);
    }

    // Bulk actions, dry: both count the same tasks.
    let (_, _) = start_twins(&b, "charge", "b");
    b.settled("b-db", "failed").await;
    b.settled("b-api", "failed").await;
    let dry = b.same(&["tasks", "bulk", "retry", "--state", "failed", "--dry-run"]);
    assert_eq!(dry, "retry (dry run): 2 tasks match; nothing changed\n");
    b.same(&["tasks", "bulk", "cancel", "--key-prefix", "g", "--dry-run", "--limit", "1"]);
    b.same(&["tasks", "bulk", "cancel", "--workflow", "gate", "--created-since", "1h", "--dry-run"]);

    // Listings, whole and filtered.
    b.same(&["tasks", "list"]);
    b.same(&["tasks", "list", "--state", "completed"]);
    b.same(&["tasks", "list", "--workflow", "charge", "--limit", "1"]);
    b.same(&["tasks", "list", "--key-prefix", "g-", "--archived"]);
    b.same(&["tasks", "list", "--before", &f_api]);

    // Jobs: enqueue (again: the same), list, show, resubmit.
    let first = b.db(&["jobs", "enqueue", "svc", "--key", "later", "--delay", "1h", "--params", r#"{"a":1}"#]);
    assert!(out(&first).contains("(later) enqueued: svc"), "{}", err(&first));
    b.same(&["jobs", "enqueue", "svc", "--key", "later", "--delay", "1h", "--params", r#"{"a":1}"#]);
    let first = b.api(&["jobs", "enqueue", "svc", "--key", "soon", "--max-tries", "1", "--bucket", "7"]);
    assert!(out(&first).contains("(soon) enqueued: svc, bucket 7"), "{}", err(&first));
    b.db(&["jobs", "enqueue", "svc", "--key", "soon-db", "--max-tries", "1"]);
    for key in ["soon", "soon-db"] {
        wait_for(&format!("job {key} given up"), Duration::from_secs(30), || async {
            out(&b.db(&["jobs", "show", key])).contains(": given_up [live]")
        })
        .await;
    }
    b.same(&["jobs", "list"]);
    b.same(&["jobs", "list", "--json"]);
    b.same(&["jobs", "list", "--state", "given-up", "--handler", "svc", "--since", "1h"]);
    b.same(&["jobs", "history"]);
    b.same(&["jobs", "show", "soon"]);
    b.same(&["jobs", "show", "soon", "--json"]);
    b.same(&["jobs", "show", "later"]);
    // The paging the API path does (listings and a task's events, read to the end): with pages
    // of 2, the same answers as the store's.
    paged_reads_match(&b, &[&g_db, &g_api, &f_db, &f_api, "soon", "soon-db"]).await;

    assert!(b.same_refusal(&["jobs", "resubmit", "later"]).contains("only a given-up job can be resubmitted"));
    assert_eq!(b.same(&["jobs", "resubmit", "--dry-run"]), "2 given-up jobs match; none resubmitted (dry run)\n");
    let d = b.db(&["jobs", "resubmit", "soon-db", "--comment", "retry"]);
    let a = b.api(&["jobs", "resubmit", "soon", "--comment", "retry"]);
    assert_eq!(out(&d), "1 given-up jobs match; 1 resubmitted\n", "{}", err(&d));
    assert_eq!(out(&d), out(&a), "{}", err(&a));

    // What goes wrong through the API, and how it is said.
    let bad = b.api_as("not-a-token", &["tasks", "list"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(err(&bad).contains("refused the token") && err(&bad).contains("unknown or revoked"), "{}", err(&bad));
    let made = b.db(&["tokens", "create", "--name", "reader", "--scopes", "read"]);
    assert!(made.status.success(), "{}", err(&made));
    let reader = out(&made).trim().to_owned();
    assert!(b.api_as(&reader, &["tasks", "list"]).status.success());
    let no_scope = b.api_as(&reader, &["tasks", "cancel", &g_api]);
    assert_eq!(no_scope.status.code(), Some(2));
    assert!(err(&no_scope).contains("may not do this") && err(&no_scope).contains("operate"), "{}", err(&no_scope));
    let actor = b.api(&["tasks", "pause", &g_api, "--actor", "ann"]);
    assert_eq!(actor.status.code(), Some(2));
    assert!(err(&actor).contains("--actor does not apply with --server"), "{}", err(&actor));
    let tokens = b.api(&["tokens", "list"]);
    assert_eq!(tokens.status.code(), Some(2));
    assert!(err(&tokens).contains("store only"), "{}", err(&tokens));
    let two = bin()
        .args(["--server", &b.url, "--db", &b.db, "tasks", "list"])
        .env("SHIFTBOSS_TOKEN", &b.token)
        .output()
        .unwrap();
    assert_eq!(two.status.code(), Some(2));
    assert!(err(&two).contains("both set"), "{}", err(&two));
    let no_token = bin().args(["--server", &b.url, "tasks", "list"]).output().unwrap();
    assert!(err(&no_token).contains("--server needs a token"), "{}", err(&no_token));
    p.terminate();
}

/// The backends compared as values, the API's read in pages of 2.
async fn paged_reads_match(b: &Both, tasks: &[&str]) {
    let target =
        ServerTarget { url: b.url.clone(), token: b.token.clone(), timeout: Duration::from_secs(20), ca_bundle: None };
    let api = ApiBackend::new(&target).unwrap().page_size(2);
    let direct = StoreBackend::new(DbTarget::parse(&b.db).unwrap(), Ok(ClientConfig::default()));
    for t in tasks {
        let (a, d) = (api.task(t).await.unwrap(), direct.task(t).await.unwrap());
        assert!(a.as_ref().is_some_and(|v| v.events.len() > 2), "task {t} has more events than a page");
        assert_eq!(json(&a), json(&d), "task {t}");
    }
    for limit in [1, 2, 5, 100] {
        let p = || ListTasks { filter: TaskFilter::default(), include_archived: false, before: None, limit };
        assert_eq!(json(&api.list_tasks(p()).await.unwrap()), json(&direct.list_tasks(p()).await.unwrap()), "{limit}");
        let q = || JobQuery { limit, ..JobQuery::default() };
        assert_eq!(json(&api.list_jobs(q()).await.unwrap()), json(&direct.list_jobs(q()).await.unwrap()), "{limit}");
    }
}

/// Any answer as JSON, for comparing the two backends' values (the wire types have no `PartialEq`).
fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_through_the_api_prints_what_it_prints_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db").display().to_string();
    both_ways(db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_through_the_api_prints_the_same_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    both_ways(schema.db_url(), dir.path()).await;
}

/// A server that is down, and one that takes the connection and never answers: a clear error,
/// within the bound, and a non-zero exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_out_of_reach_is_a_clear_error_within_the_timeout() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let started = Instant::now();
    let o = bin().args(["--server", &down, "--token", "t", "tasks", "list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains(&format!("cannot reach the server at {down}/")), "{}", err(&o));
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    // Accepted by the kernel (the backlog), never read nor answered.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let o = bin()
        .args(["--server", &url, "--server-timeout", "1s", "jobs", "list"])
        .env("SHIFTBOSS_TOKEN", "t")
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("did not answer within 1s"), "{}", err(&o));
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(8), "{took:?}");
    drop(silent);

    let o = bin().args(["--server", "ftp://example", "--token", "t", "tasks", "list"]).output().unwrap();
    assert!(err(&o).contains("not an http:// or https:// URL"), "{}", err(&o));
}
