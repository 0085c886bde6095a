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
    }
}
