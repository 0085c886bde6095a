//! What the Conductor end-to-end tests share: an engine on a SQLite file with in-process agents
//! standing in for the SIMPLE workers, the real `inline` and `jq` agents, and the Conductor
//! definitions of `tests/conductor/` imported and registered.

#![allow(dead_code)] // each test file uses its part

use async_trait::async_trait;
use serde_json::{Value, json};
use shiftboss_conductor::from_conductor;
use shiftboss_core::{InstanceId, TaskId};
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{Engine, EngineConfig, Roles, RunningEngine};
use shiftboss_scripts::jq::{JqLimits, WorkerCommand};
use shiftboss_scripts::js::JsLimits;
use shiftboss_scripts::{InlineAgent, JqAgent};
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{OperateTask, Store, SubmitTask, TaskCommand, TaskDetail};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A SIMPLE worker standing in: answers from a function of the call, and records its inputs.
struct Worker {
    answer: Answer,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
}

#[async_trait]
impl Agent for Worker {
    async fn call(&self, call: &AgentCall) -> Result<Value, AgentError> {
        self.calls.lock().unwrap().push((call.step.clone(), call.input.clone()));
        let answer = (self.answer)(call);
        // A worker that hangs answers `{"hang_ms": n}` after n ms (past its timeout, the lease
        // lapses); one that fails this attempt `{"fail": why}`; one that refuses for good
        // `{"refuse": why}`.
        if let Some(ms) = answer.get("hang_ms").and_then(Value::as_u64) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(why) = answer.get("fail").and_then(Value::as_str) {
            return Err(AgentError::Failure(why.to_owned()));
        }
        match answer.get("refuse").and_then(Value::as_str) {
            Some(why) => Err(AgentError::Permanent(why.to_owned())),
            None => Ok(answer),
        }
    }
}

pub struct Harness {
    _dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    engine: Engine,
    running: Option<RunningEngine>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    workflow: String,
}

/// How a stand-in worker answers a call.
type Answer = fn(&AgentCall) -> Value;

const WORKERS: &[(&str, Answer)] = &[
    ("load_cart", |_| json!({"lines": [{"unit": 40, "qty": 2}, {"unit": 25, "qty": 1}]})),
    ("bill_customer", |c| json!({"invoiceId": format!("INV-{}", c.input["amount"])})),
    ("record_grade", |_| json!({"saved": true})),
    ("book_freight", |_| json!({"carrier": "rail"})),
    ("ship_domestic", |_| json!({"carrier": "usps"})),
    ("ship_abroad", |_| json!({"carrier": "dhl"})),
    ("start_export", |_| json!({"exportId": "EX-7"})),
    // Ready on the third check.
    ("check_export", |c| json!({"status": if c.input["attempt"] == json!(3) { "READY" } else { "RUNNING" }})),
    ("list_users", |_| {
        json!({"people": [
            {"id": 1, "first": "Ann", "last": "Lee", "email": "ann@example.com", "active": true},
            {"id": 2, "first": "Bo", "last": "Kim", "email": "bo@example.com", "active": false},
            {"id": 3, "first": "Cy", "last": "Ng", "email": "cy@example.com", "active": true}
        ]})
    }),
    ("prepare", |_| json!({})),
    // Hangs past every attempt's 1 s timeout (`archive_ledger`, remote, has no worker at all).
    ("render_ledger", |_| json!({"hang_ms": 4000})),
    // The wider vocabulary's definitions.
    ("lookup_member", |_| json!({"tier": "gold"})),
    (
        "credit_points",
        |c| json!({"points": 100 * c.input["multiplier"].as_i64().unwrap_or(0) + c.input["bonus"].as_i64().unwrap_or(0)}),
    ),
    ("try_coupon", |_| json!({"refuse": "coupon expired"})),
    ("charge_card", |_| json!({"paymentId": "CARD-1"})),
    ("charge_wallet", |_| json!({"paymentId": "WAL-1"})),
    ("send_receipt", |_| json!({"sent": true})),
    ("alert_team", |_| json!({"paged": true})),
    ("sync_crm", |_| json!({"refuse": "crm is down"})),
    ("sync_billing", |_| json!({"synced": 3})),
    ("write_audit", |_| json!({"written": true})),
    ("confirm_order", |_| json!({"confirmed": true})),
    ("plan_variants", |_| {
        json!({
            "tasks": [
                {"name": "resize_image", "taskReferenceName": "thumb_ref", "type": "SIMPLE"},
                {"name": "watermark_image", "taskReferenceName": "mark_ref", "type": "SIMPLE"}
            ],
            "inputs": {"thumb_ref": {"w": 100}, "mark_ref": {"text": "(c)"}}
        })
    }),
    ("resize_image", |c| json!({"url": "thumb.png", "w": c.input["w"]})),
    ("watermark_image", |c| json!({"url": "mark.png", "text": c.input["text"]})),
    ("tag_image", |c| json!({"tagged": c.input["tag"]})),
    ("publish_image", |_| json!({"ok": true})),
    ("load_account", |c| {
        let region = if c.input["accountId"] == json!("A-US") {
            "us"
        } else if c.input["accountId"] == json!("A-XX") {
            "xx"
        } else {
            "eu"
        };
        json!({"plan": "pro", "seats": 3, "region": region})
    }),
    ("fraud_check", |_| json!({"refuse": "fraud service down"})),
    ("tax_lookup", |c| json!({"rate": if c.input["region"] == json!("eu") { 0.2 } else { 0.05 }})),
    ("charge_subscription", |c| json!({"status": if c.input["attempt"] == json!(2) { "ok" } else { "declined" }})),
    ("invoice_eu_vat", |c| json!({"number": format!("EU-{}", c.input["amount"])})),
    ("invoice_us", |c| json!({"number": format!("US-{}", c.input["amount"])})),
    // Fails its first two attempts, then answers.
    ("flaky_lookup", |c| {
        if c.attempt < 3 {
            json!({"fail": format!("busy (attempt {})", c.attempt)})
        } else {
            json!({"found": c.attempt})
        }
    }),
    // Answers after 3 s, past its 1 s timeout.
    ("slow_lookup", |_| json!({"hang_ms": 3000, "late": true})),
    ("choose_paper", |c| json!({"paper": format!("red for {}", c.input["item"].as_str().unwrap_or("?"))})),
    (
        "build_report",
        |c| json!({"reportId": format!("R-{}-{}", c.input["month"].as_str().unwrap_or("?"), c.input["format"].as_str().unwrap_or("?"))}),
    ),
];

impl Harness {
    /// An engine with `file`'s workflow registered, which [`Harness::run`] submits.
    pub async fn start(file: &str) -> Harness {
        Harness::start_all(&[file]).await
    }

    /// An engine with every file's workflow registered (the ones a start or a failure names
    /// first); [`Harness::run`] submits the last one.
    pub async fn start_all(files: &[&str]) -> Harness {
        let imports: Vec<_> = files
            .iter()
            .map(|file| {
                let path = format!("{}/tests/conductor/{file}", env!("CARGO_MANIFEST_DIR"));
                from_conductor(&std::fs::read_to_string(path).unwrap()).unwrap_or_else(|e| panic!("{file}: {e}"))
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("s.db"), &OpenOptions::default()).unwrap());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut config = EngineConfig { roles: Roles::default(), ..EngineConfig::default() };
        config.scheduler.poll_interval = Duration::from_millis(20);
        config.supervisor.interval = Duration::from_millis(50);
        config.supervisor.reconcile_interval = Duration::from_millis(50);
        let js = JsLimits { time: Duration::from_millis(300), memory: 16 << 20, ..JsLimits::default() };
        let worker = WorkerCommand { program: env!("CARGO_BIN_EXE_shiftboss-jq-worker").into(), args: vec![] };
        let mut builder = Engine::builder(store.clone(), InstanceId::new("e1").unwrap())
            .agent("inline", InlineAgent::new(js, 2))
            .agent("jq", JqAgent::new(worker, JqLimits::default()))
            // A remote worker's agent that no worker here serves: nothing ever claims its steps.
            .remote_agent("archive_ledger")
            .config(config);
        let mut names: Vec<&str> = WORKERS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WORKERS.len(), "a stand-in worker named twice answers for both");
        for (name, answer) in WORKERS {
            builder = builder.agent(*name, Worker { answer: *answer, calls: calls.clone() });
        }
        let engine = builder.build().unwrap();
        for import in &imports {
            for sub in &import.sub_workflows {
                engine.register_workflow(sub).await.expect("a definition given inline registers");
            }
            engine.register_workflow(&import.workflow).await.expect("the imported definition registers");
        }
        let running = Some(engine.start());
        let workflow = imports.last().expect("a file").workflow.name.clone();
        Harness { _dir: dir, store, engine, running, calls, workflow }
    }

    /// Submits a task of the workflow and waits for its end.
    pub async fn run(&self, key: &str, input: Value) -> TaskDetail {
        let id = self.submit(key, input).await;
        self.ended(id).await
    }

    /// Submits a task of the workflow.
    pub async fn submit(&self, key: &str, input: Value) -> TaskId {
        let submit = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: key.into(),
            workflow: self.workflow.clone(),
            version: None,
            input,
            priority: 0,
            actor: "test".into(),
        };
        self.engine.submit(submit).await.unwrap().task_id
    }

    /// The task once it has ended (it must within 20 s).
    pub async fn ended(&self, id: TaskId) -> TaskDetail {
        self.until(id, "ended", |d| d.task.state.is_terminal()).await
    }

    /// The task once `ready` holds of it (it must within 20 s).
    pub async fn until(&self, id: TaskId, what: &str, ready: impl Fn(&TaskDetail) -> bool) -> TaskDetail {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let d = self.store.get_task(id).await.unwrap().unwrap();
            if ready(&d) {
                return d;
            }
            assert!(Instant::now() < deadline, "task {id} not {what} after 20 s ({}): {:#?}", d.task.state, d.steps);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends a wait's signal, as an operator or a person's answer would.
    pub async fn signal(&self, task: TaskId, name: &str, payload: Value) {
        let command = TaskCommand::Signal { name: name.into(), payload };
        let p = OperateTask { task_id: task, actor: "ann".into(), reason: "approved".into(), command };
        self.store.operate_task(p).await.expect("the signal is taken");
    }

    pub fn input_of(&self, step: &str) -> Value {
        let calls = self.calls.lock().unwrap();
        calls.iter().rev().find(|(s, _)| s == step).map(|c| c.1.clone()).unwrap_or_else(|| panic!("{step} ran"))
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

pub fn step<'a>(d: &'a TaskDetail, name: &str) -> &'a shiftboss_core::model::StepRecord {
    d.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}: {:#?}", d.steps))
}
