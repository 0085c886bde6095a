//! What the tests that run real `shiftboss serve` processes share: the binary, a test service that
//! records what reached it, serve processes that are killed when a test ends (even by a panic), and
//! for the PostgreSQL tests the database URL (or a loud skip), a fresh schema per test that is
//! dropped at the end, and `psql` for what the store contract does not show (the leader row).
#![allow(dead_code)] // each test file uses its own part of this module

pub mod api;
pub mod proxy;

/// Two tests of one case, `async fn case(db: String, logs: &Path)`: one on a SQLite file, one on
/// a fresh PostgreSQL schema (skipped loudly, or failing under CI, without a server).
#[allow(unused_macros)] // only the files that run a case on both stores use it
macro_rules! on_both_stores {
    ($case:ident, $sqlite:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("s.db").display().to_string();
            $case(db, dir.path()).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            let Some(url) = $crate::common::test_db() else { return };
            let (schema, _store) = $crate::common::PgSchema::create(&url).await;
            let dir = tempfile::tempdir().unwrap();
            $case(schema.db_url(), dir.path()).await;
        }
    };
}

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use shiftboss_core::model::EventRecord;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_core::{StepId, StepState, TaskId, TaskState};
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The `shiftboss` binary, with nothing inherited that would choose its store or config.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shiftboss"));
    c.env_remove("SHIFTBOSS_DB")
        .env_remove("SHIFTBOSS_CONFIG")
        .env_remove("SHIFTBOSS_INSTANCE_ID")
        .env_remove("SHIFTBOSS_ROLES")
        .env_remove("SHIFTBOSS_SERVER")
        .env_remove("SHIFTBOSS_TOKEN")
        .stdin(Stdio::null());
    c
}

// ---------------------------------------------------------------------------------------------
// The test service

/// What the service saw of one idempotency key (one step).
#[derive(Debug, Clone, Default)]
pub struct KeyStats {
    /// Requests that arrived.
    pub requests: u32,
    /// Requests being handled now.
    pub in_flight: u32,
    /// The most requests handled at once: more than 1 means the step ran twice at the same time.
    pub max_in_flight: u32,
}

#[derive(Default)]
struct ServiceState {
    keys: Mutex<HashMap<String, KeyStats>>,
    delay_ms: AtomicU64,
}

/// One request in flight; counted out when the handler ends or is dropped (a client that went
/// away), so that only requests really being handled overlap.
struct InFlight {
    state: Arc<ServiceState>,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(k) = self.state.keys.lock().unwrap().get_mut(&self.key) {
            k.in_flight -= 1;
        }
    }
}

/// An HTTP service on loopback that answers every POST with `{"ok":true}` after a delay that a
/// test can change, and records per idempotency key how many requests arrived and how many were
/// handled at once.
pub struct Service {
    pub url: String,
    state: Arc<ServiceState>,
}

impl Service {
    pub async fn start(delay: Duration) -> Service {
        let state = Arc::new(ServiceState::default());
        state.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
        let app = Router::new()
            .route(
                "/{action}",
                post(|State(state): State<Arc<ServiceState>>, h: HeaderMap| async move {
                    let key = h.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                    {
                        let mut keys = state.keys.lock().unwrap();
                        let k = keys.entry(key.clone()).or_default();
                        k.requests += 1;
                        k.in_flight += 1;
                        k.max_in_flight = k.max_in_flight.max(k.in_flight);
                    }
                    let _guard = InFlight { state: state.clone(), key };
                    let delay = state.delay_ms.load(Ordering::SeqCst);
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    "{\"ok\":true}"
                }),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Service { url, state }
    }

    pub fn set_delay(&self, d: Duration) {
        self.state.delay_ms.store(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Every key seen so far, with its counts.
    pub fn keys(&self) -> HashMap<String, KeyStats> {
        self.state.keys.lock().unwrap().clone()
    }

    pub fn requests(&self, key: &str) -> u32 {
        self.state.keys.lock().unwrap().get(key).map_or(0, |k| k.requests)
    }

    pub fn total_requests(&self) -> u64 {
        self.state.keys.lock().unwrap().values().map(|k| u64::from(k.requests)).sum()
    }

    /// Keys that had two requests in flight at once.
    pub fn overlapping_keys(&self) -> Vec<String> {
        self.state
            .keys
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, k)| k.max_in_flight > 1)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// serve processes

/// How to start one `shiftboss serve`: fast polling and short leases, so that tests take seconds.
#[derive(Debug, Clone)]
pub struct Serve {
    pub db: String,
    pub instance: String,
    /// The `svc` agent's service.
    pub service: Option<String>,
    /// `--roles`; none runs both.
    pub roles: Option<&'static str>,
    pub concurrency: Option<u32>,
    pub poll_interval: &'static str,
    pub supervisor_interval: &'static str,
    pub leader_ttl: &'static str,
    /// Pass `--instance-id` (on by default); off, the process chooses its own.
    pub explicit_id: bool,
    /// Serve the HTTP API on a free loopback port (off by default: tests run many serve
    /// processes side by side, and the default port would be shared).
    pub api: bool,
    /// More flags, after the others.
    pub extra: Vec<String>,
}

impl Serve {
    pub fn new(db: impl Into<String>, instance: &str) -> Serve {
        Serve {
            db: db.into(),
            instance: instance.to_owned(),
            service: None,
            roles: None,
            concurrency: None,
            poll_interval: "50ms",
            supervisor_interval: "100ms",
            leader_ttl: "1s",
            explicit_id: true,
            api: false,
            extra: Vec::new(),
        }
    }

    /// Serve the API on a free loopback port (see [`ServeProc::api_url`]).
    pub fn api(mut self) -> Serve {
        self.api = true;
        self
    }

    pub fn arg(mut self, a: impl Into<String>) -> Serve {
        self.extra.push(a.into());
        self
    }

    /// No `--instance-id`: the process takes its default (`instance` only names its log).
    pub fn default_instance_id(mut self) -> Serve {
        self.explicit_id = false;
        self
    }

    pub fn service(mut self, url: &str) -> Serve {
        self.service = Some(url.to_owned());
        self
    }

    pub fn roles(mut self, roles: &'static str) -> Serve {
        self.roles = Some(roles);
        self
    }

    pub fn concurrency(mut self, n: u32) -> Serve {
        self.concurrency = Some(n);
        self
    }

    /// Starts the process; its stderr goes to a log file in `logs`, shown if the test fails.
    pub fn spawn(&self, logs: &Path) -> ServeProc {
        let log = logs.join(format!("{}-{}.log", self.instance, fastrand::u32(..)));
        let file = std::fs::File::create(&log).unwrap();
        let mut c = bin();
        c.arg("--db").arg(&self.db).arg("serve");
        if self.explicit_id {
            c.args(["--instance-id", &self.instance]);
        }
        if let Some(url) = &self.service {
            c.args(["--agent", &format!("svc={url}"), "--allow-outbound", "127.0.0.1"]);
        }
        if let Some(r) = self.roles {
            c.args(["--roles", r]);
        }
        if let Some(n) = self.concurrency {
            c.args(["--concurrency", &n.to_string()]);
        }
        if self.api {
            let token = logs.join(format!("{}-admin-{}.token", self.instance, fastrand::u32(..)));
            c.args(["--listen", "127.0.0.1:0"]).arg("--admin-token-file").arg(&token);
        } else {
            c.args(["--listen", "off"]);
        }
        c.args(&self.extra);
        c.args(["--poll-interval", self.poll_interval])
            .args(["--supervisor-interval", self.supervisor_interval])
            .args(["--leader-ttl", self.leader_ttl])
            .env("SHIFTBOSS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file);
        let child = c.spawn().expect("shiftboss serve starts");
        ServeProc { child: Some(child), instance: self.instance.clone(), log }
    }
}

/// A running `shiftboss serve`. Dropping it kills the process (kill -9), so that a failed test
/// leaves nothing running; when the test is failing its log is printed first.
pub struct ServeProc {
    child: Option<Child>,
    pub instance: String,
    log: PathBuf,
}

impl ServeProc {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// kill -9: no grace, no resignation, no release of its claims.
    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// SIGTERM, the graceful stop; waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        Command::new("kill").args(["-TERM", &c.id().to_string()]).status().unwrap();
        c.wait().unwrap()
    }

    /// Sends a signal (`TERM`, `INT`...) without waiting for anything.
    pub fn signal(&self, sig: &str) {
        let pid = self.pid().to_string();
        assert!(Command::new("kill").args([&format!("-{sig}"), &pid]).status().unwrap().success(), "kill -{sig}");
    }

    /// Waits for the process to exit by itself, for at most `within`; None if it is still running.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let give_up = Instant::now() + within;
        loop {
            if let Some(status) = self.child.as_mut().expect("running").try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= give_up {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The instance id the process announced at start (`shiftboss serve: instance ID on ...`).
    pub fn announced_instance(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.starts_with("shiftboss serve: instance ") && l.contains(", roles:"))?;
        line.trim_start_matches("shiftboss serve: instance ").split_once(" on ").map(|(id, _)| id.to_owned())
    }

    /// The API's base URL, as the process announced it (`api (http://ADDR)`).
    pub fn api_url(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.starts_with("shiftboss serve: instance ") && l.contains(", roles:"))?;
        let from = line.find("api (")? + "api (".len();
        let rest = &line[from..];
        Some(rest[..rest.find(')')?].to_owned())
    }

    /// The first admin token's secret, from the file the process said it wrote.
    pub fn admin_token(&self) -> Option<String> {
        let log = self.log();
        let line = log.lines().find(|l| l.contains("its secret is in "))?;
        let path = line.split("its secret is in ").nth(1)?.split(" (").next()?;
        std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
    }

    /// The process is still running (it did not exit by itself).
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the process has opened its store and starts its roles (its first log line).
    pub async fn wait_ready(&mut self) {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !self.log().contains("shiftboss serve: instance") {
            assert!(self.is_running(), "serve {} exited at start:\n{}", self.instance, self.log());
            assert!(Instant::now() < give_up, "serve {} did not start:\n{}", self.instance, self.log());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for ServeProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!("---- log of serve {} (last {} lines) ----\n{}", self.instance, tail.len(), tail.join("\n"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workflows, tasks, waiting

/// `order`: three steps on the `svc` agent, each with `timeout`, retried quickly after a lapse,
/// with room for many lapses before a step gives up.
pub fn order_workflow(timeout: &str) -> WorkflowDef {
    WorkflowDef::from_json(&format!(
        r#"{{"name":"order","steps":[
            {{"name":"a","agent":"svc","config":{{"url":"/a"}},"timeout":"{timeout}"}},
            {{"name":"b","agent":"svc","config":{{"url":"/b"}},"timeout":"{timeout}"}},
            {{"name":"c","agent":"svc","config":{{"url":"/c"}},"timeout":"{timeout}"}}],
            "retry":{{"kind":"intervals","intervals":["10ms","10ms","10ms","10ms","10ms","10ms","10ms","10ms","10ms","10ms"]}}}}"#
    ))
    .unwrap()
}

/// Registers `order` and submits `n` orders through the library; returns their task ids.
pub async fn submit_orders(store: &dyn Store, timeout: &str, n: usize) -> Vec<TaskId> {
    store.register_workflow(&order_workflow(timeout)).await.unwrap();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let t = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: format!("o-{i}"),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({"order_id": i}),
            priority: 0,
            actor: "test".into(),
        };
        ids.push(store.submit_task(t).await.unwrap().task_id);
    }
    ids
}

/// Tasks in `state`; a store error (the database restarting, say) counts as none.
pub async fn tasks_in(store: &dyn Store, state: TaskState) -> u64 {
    match store.task_counts().await {
        Ok(c) => c.iter().find(|(s, _)| *s == state).map_or(0, |(_, n)| *n),
        Err(_) => 0,
    }
}

/// Polls `check` every 20 ms until it holds; fails the test with `what` if `timeout` passes first.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let give_up = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < give_up, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until all `n` tasks completed, failing with the task counts if `timeout` passes first.
pub async fn wait_all_completed(store: &dyn Store, n: usize, timeout: Duration) {
    let give_up = Instant::now() + timeout;
    while tasks_in(store, TaskState::Completed).await < n as u64 {
        assert!(
            Instant::now() < give_up,
            "not every task completed within {timeout:?}: {:?}",
            store.task_counts().await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A submission of `workflow` under `key`, at priority 0, with no domains, version or webhook.
pub fn submission(key: &str, workflow: &str, input: serde_json::Value) -> SubmitTask {
    SubmitTask {
        domains: Default::default(),
        correlation_id: None,
        notify: None,
        key: key.into(),
        workflow: workflow.into(),
        version: None,
        input,
        priority: 0,
        actor: "test".into(),
    }
}

/// Every task's steps and events, read through the store.
pub async fn details(store: &dyn Store, ids: &[TaskId]) -> Vec<TaskDetail> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        // A pool that lost its connections (the database restarted) fails a call per dead one.
        let mut tries = 0;
        let d = loop {
            match store.get_task(*id).await {
                Ok(d) => break d,
                Err(e) if e.is_transient() && tries < 10 => tries += 1,
                Err(e) => panic!("reading task {id}: {e}"),
            }
        };
        out.push(d.expect("the task exists"));
    }
    out
}

/// The events of `kind` per step.
pub fn events_by_step<'a>(details: &'a [TaskDetail], kind: &str) -> HashMap<StepId, Vec<&'a EventRecord>> {
    let mut out: HashMap<StepId, Vec<&EventRecord>> = HashMap::new();
    for d in details {
        for e in &d.events {
            if e.kind == kind
                && let Some(s) = e.step_id
            {
                out.entry(s).or_default().push(e);
            }
        }
    }
    out
}

/// The checks every run ends with, whatever faults it met: every task completed and every step
/// Processed once (one `step.processed` event); every claim beyond the first was caused by a
/// lapse (`step.released` or `step.expired`); the service saw every step, and no more requests for
/// a step than it was claimed (so no effect was repeated beyond the lapses); no step was handled
/// by the service twice at once. Returns (claims, lapses).
pub async fn check_every_step_once(store: &dyn Store, ids: &[TaskId], service: &Service) -> (u64, u64) {
    let ds = details(store, ids).await;
    let processed = events_by_step(&ds, shiftboss_store::event_kind::STEP_PROCESSED);
    let claimed = events_by_step(&ds, shiftboss_store::event_kind::STEP_CLAIMED);
    let released = events_by_step(&ds, shiftboss_store::event_kind::STEP_RELEASED);
    let expired = events_by_step(&ds, shiftboss_store::event_kind::STEP_EXPIRED);
    let keys = service.keys();
    let (mut claims, mut lapses) = (0u64, 0u64);
    for d in &ds {
        assert_eq!(d.task.state, TaskState::Completed, "task {}", d.task.id);
        assert_eq!(d.steps.len(), 3, "task {}", d.task.id);
        for s in &d.steps {
            assert_eq!(s.state, StepState::Processed, "step {}", s.id);
            let n = |m: &HashMap<StepId, Vec<&EventRecord>>| m.get(&s.id).map_or(0, Vec::len) as u64;
            assert_eq!(n(&processed), 1, "step {} recorded as processed once", s.id);
            let lapsed = n(&released) + n(&expired);
            assert_eq!(n(&claimed), 1 + lapsed, "step {}: every claim but the first follows a lapse", s.id);
            assert_eq!(u64::from(s.attempts), n(&claimed), "step {}: attempts = claims", s.id);
            let k = keys.get(&s.idempotency_key).unwrap_or_else(|| panic!("step {} never reached the service", s.id));
            assert!(
                u64::from(k.requests) <= n(&claimed),
                "step {}: {} requests for {} claims: an effect repeated without a lapse",
                s.id,
                k.requests,
                n(&claimed)
            );
            claims += n(&claimed);
            lapses += lapsed;
        }
    }
    assert_eq!(keys.len(), 3 * ids.len(), "the service saw one key per step and no others");
    assert_eq!(service.overlapping_keys(), Vec::<String>::new(), "steps handled twice at once");
    (claims, lapses)
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// The environment variable that names the test database.
pub const URL_VAR: &str = "SHIFTBOSS_TEST_PG";
/// The local database CI uses when the variable is not set.
pub const LOCAL_PG: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The test database's URL, or None when this test should be skipped: outside CI without
/// `SHIFTBOSS_TEST_PG` a loud message says so; under CI the test runs (on the local database if
/// the variable is not set) and fails if the database cannot be reached.
pub fn test_db() -> Option<String> {
    if let Ok(url) = std::env::var(URL_VAR)
        && !url.trim().is_empty()
    {
        return Some(url);
    }
    if under_ci() {
        return Some(LOCAL_PG.to_owned());
    }
    let test = std::thread::current().name().unwrap_or("a PostgreSQL test").to_owned();
    eprintln!(
        "\n\
         ************************************************************************\n\
         SKIPPED {test}: {URL_VAR} is not set, so shiftboss serve was NOT tested\n\
         on PostgreSQL. Run with {URL_VAR}={LOCAL_PG} (under CI this runs).\n\
         ************************************************************************\n"
    );
    None
}

/// Runs `sql` with psql on the test database (`search_path` set to `schema`), returning its
/// unaligned, tuples-only output.
pub fn psql(url: &str, schema: Option<&str>, sql: &str) -> Result<String, String> {
    let mut c = Command::new("psql");
    c.args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGAPPNAME", "sbtest_admin")
        .env("PGCONNECT_TIMEOUT", "5")
        .stdin(Stdio::null());
    if let Some(s) = schema {
        c.env("PGOPTIONS", format!("-c search_path={s}"));
    }
    let o = c.output().map_err(|e| format!("psql cannot run: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().to_owned())
    }
}

/// A schema that exists only for this test, and its store. Named like the PostgreSQL store's own
/// test schemas (`sbt_`, creation time, random), so that leftovers of killed runs are dropped by
/// their cleanup; dropped with everything in it when this value is dropped, even on a panic.
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

impl PgSchema {
    /// A fresh schema, created and migrated through the library, and a store on it. The name is
    /// reserved with a plain `CREATE SCHEMA` first (which fails if it exists), so that two tests
    /// can never share a schema, whatever their random numbers.
    pub async fn create(url: &str) -> (PgSchema, PostgresStore) {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let mut tries = 0;
        let schema = loop {
            let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as u32;
            // The process id keeps concurrent test processes apart; the count and the random bits
            // keep the schemas of one process apart.
            let made = MADE.fetch_add(1, Ordering::SeqCst) as u32;
            let unique = (std::process::id() << 10) ^ (made << 4) ^ (fastrand::u32(..) & 0xf);
            let name = format!("sbt_{secs:08x}{unique:08x}");
            match psql(url, None, &format!("CREATE SCHEMA \"{name}\"")) {
                Ok(_) => break PgSchema { url: url.to_owned(), name },
                Err(e) if e.contains("already exists") && tries < 5 => {
                    eprintln!("warning: test schema name {name} was taken; trying another");
                    tries += 1;
                }
                Err(e) => panic!("{URL_VAR}={url}: cannot create test schema {name}: {e}"),
            }
        };
        let opts = PgOptions { schema: schema.name.clone(), pool_size: 4, ..PgOptions::default() };
        let store = PostgresStore::connect(url, &opts)
            .await
            .unwrap_or_else(|e| panic!("{URL_VAR}={url}: cannot migrate test schema {}: {e}", schema.name));
        eprintln!("test schema {}", schema.name);
        (schema, store)
    }

    /// The application name the serve processes of this test connect with, so that a test can
    /// find (and kill) their connections and no others.
    pub fn app_name(&self) -> String {
        format!("sbtest_{}", self.name)
    }

    /// The `--db` URL for serve processes and commands: this schema, this test's application name.
    pub fn db_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}&application_name={}", self.url, self.name, self.app_name())
    }

    /// psql in this schema; panics on an error.
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.url, Some(&self.name), sql).unwrap_or_else(|e| panic!("psql {sql:?}: {e}"))
    }

    /// The supervisor's leader row: (holder, term), if there is one.
    pub fn leader(&self) -> Option<(String, i64)> {
        let out = self.sql("SELECT holder || ' ' || term FROM leaders WHERE name = 'supervisor'");
        let (holder, term) = out.split_once(' ')?;
        Some((holder.to_owned(), term.parse().unwrap()))
    }

    /// The database's clock in milliseconds, as the store reads it.
    pub fn db_now(&self) -> i64 {
        self.sql("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint").parse().unwrap()
    }

    /// The steps `instance` holds (Processing, locked by it): (step id, complete_by).
    pub fn held_by(&self, instance: &str) -> Vec<(StepId, i64)> {
        let out = self.sql(&format!(
            "SELECT id || ' ' || complete_by FROM steps WHERE state = 'processing' AND locked_by = '{instance}' ORDER BY id"
        ));
        out.lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (id, cb) = l.split_once(' ').unwrap();
                (StepId(id.parse().unwrap()), cb.parse().unwrap())
            })
            .collect()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Err(e) = psql(&self.url, None, &format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name)) {
            eprintln!("warning: could not drop test schema {}: {e}", self.name);
        }
    }
}
