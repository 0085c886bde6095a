//! Outbound calls against real servers on loopback: HTTPS with a CA made in the test, mTLS,
//! the SSRF guard and its allow-list, redirects, bounds, secrets, and Conductor's HTTP task.

mod conductor;
mod guard;
mod https;
mod secrets;
mod servers;

use shiftboss_engine::outbound::{AllowList, Outbound, OutboundConfig};

/// A client whose allow-list opens exactly `allow`.
pub fn client(allow: &[&str]) -> Outbound {
    Outbound::new(&OutboundConfig { allow: AllowList::parse(allow).unwrap(), ..OutboundConfig::default() }).unwrap()
}

/// A call of the HTTP agent with `config`, as the runtime makes it.
pub fn agent_call(config: serde_json::Value) -> shiftboss_engine::AgentCall {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    shiftboss_engine::AgentCall {
        task_id: shiftboss_core::TaskId(1),
        step_id: shiftboss_core::StepId(1),
        step: "s".into(),
        input: serde_json::json!({}),
        config,
        idempotency_key: "k".into(),
        attempt: 1,
        try_number: 1,
        complete_by: shiftboss_core::Timestamp(0),
        deadline,
        progress: shiftboss_engine::progress::Progress::fixed(deadline),
        previous_progress: None,
    }
}

/// An engine config that polls often, for tests that wait on a task's end.
pub fn engine_config() -> shiftboss_engine::EngineConfig {
    let mut c = shiftboss_engine::EngineConfig::default();
    c.scheduler.poll_interval = std::time::Duration::from_millis(20);
    c.supervisor.interval = std::time::Duration::from_millis(50);
    c
}

/// Waits until the task has ended.
pub async fn ended(store: &dyn shiftboss_store::Store, task: shiftboss_core::TaskId) -> shiftboss_store::TaskDetail {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let d = store.get_task(task).await.unwrap().unwrap();
        if d.task.state.is_terminal() {
            return d;
        }
        assert!(std::time::Instant::now() < deadline, "task {task} still {} after 20 s: {:#?}", d.task.state, d.steps);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

pub fn submit(key: &str, workflow: &str, input: serde_json::Value) -> shiftboss_store::SubmitTask {
    shiftboss_store::SubmitTask {
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
