//! The HTTP API as the remote-worker tests use it: a `serve` process's URL and admin token, and
//! the calls they make (register the one-step workflow of the remote agent type, submit, poll,
//! read a task, the workers list).

use super::{ServeProc, wait_for};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The remote agent type every test serves.
pub const AGENT: &str = "ship";

pub struct Api {
    pub base: String,
    pub token: String,
    pub http: Client,
}

impl Api {
    pub fn of(p: &ServeProc) -> Api {
        let give_up = Instant::now() + Duration::from_secs(10);
        while p.api_url().is_none() && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
        }
        let base = p.api_url().unwrap_or_else(|| panic!("serve announced no API:\n{}", p.log()));
        let token = p.admin_token().expect("serve wrote the first admin token");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Api { base, token, http }
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let res =
            self.http.post(format!("{}{path}", self.base)).bearer_auth(&self.token).json(&body).send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let res = self.http.get(format!("{}{path}", self.base)).bearer_auth(&self.token).send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn register(&self, timeout: &str, response_timeout: Option<&str>) {
        let mut step = json!({"name": "ship", "agent": AGENT, "timeout": timeout, "config": {"carrier": "post"}});
        if let Some(r) = response_timeout {
            step["response_timeout"] = json!(r);
        }
        let flow =
            json!({"name": "parcel", "steps": [step], "retry": {"kind": "fixed", "delay": "100ms", "max_failures": 5}});
        let (s, v) = self.post("/v1/workflows", flow).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }

    pub async fn submit(&self, key: &str, input: Value, priority: i32) -> String {
        let (s, v) = self
            .post("/v1/tasks", json!({"key": key, "workflow": "parcel", "input": input, "priority": priority}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    pub async fn poll(&self, worker: &str, capacity: u32, wait_ms: u64) -> Vec<Value> {
        let body = json!({"agents": [AGENT], "worker": worker, "capacity": capacity, "wait_ms": wait_ms});
        let (s, v) = self.post("/v1/agents/poll", body).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["steps"].as_array().unwrap().clone()
    }

    pub async fn task(&self, id: &str) -> Value {
        let (s, v) = self.get(&format!("/v1/tasks/{id}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    pub async fn wait_state(&self, id: &str, want: &str) {
        wait_for(&format!("task {id} {want}"), Duration::from_secs(30), || async {
            self.task(id).await["state"] == want
        })
        .await;
    }

    pub async fn workers_of(&self) -> Vec<String> {
        let (s, v) = self.get("/v1/agents/workers").await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let agents = v["agents"].as_array().unwrap();
        let ship = agents.iter().find(|a| a["agent"] == AGENT);
        ship.map(|a| {
            a["workers"].as_array().unwrap().iter().map(|w| w["worker"].as_str().unwrap().to_owned()).collect()
        })
        .unwrap_or_default()
    }
}
