//! Agents (P3, P4): the code that calls one remote service on behalf of a step.

use crate::exception::ExceptionStrategy;
use async_trait::async_trait;
use shiftboss_core::workflow::StepDef;
use shiftboss_core::{StepId, TaskId, Timestamp};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One request to an agent: the work, its deadline and the stable id the service can dedupe by.
#[derive(Debug, Clone)]
pub struct AgentCall {
    pub task_id: TaskId,
    pub step_id: StepId,
    pub step: String,
    pub input: serde_json::Value,
    /// The step definition's agent settings (for the HTTP agent: method, url, headers).
    pub config: serde_json::Value,
    /// The same on every attempt at this step, so the remote service can drop duplicates (P4).
    pub idempotency_key: String,
    /// The claim's number (1 for the first claim of the step).
    pub attempt: u32,
    /// The try within this claim (1 for the first call; more after transient faults).
    pub try_number: u32,
    /// The claim's complete-by, by the store's clock.
    pub complete_by: Timestamp,
    /// The same deadline on this process's monotonic clock; the runtime drops the call at it.
    pub deadline: tokio::time::Instant,
    /// Reports progress (a step heartbeat), which moves complete-by on when the step has a
    /// response timeout.
    pub progress: crate::progress::Progress,
    /// What an earlier attempt last reported with `progress.report_with`: where this one may go on
    /// from. None when no attempt reported any.
    pub previous_progress: Option<serde_json::Value>,
}

/// How a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// A fault that may pass (a timeout, a 503): the runtime tries again within complete-by.
    #[error("transient: {0}")]
    Transient(String),
    /// A fault that will not pass (a rejected card, a 400): the step goes to Error at once (P16).
    #[error("permanent: {0}")]
    Permanent(String),
    /// This attempt failed (a retry job's handler failure, M5): no retry within the call; the
    /// step's retry policy sets the next try (count + 1, this reason kept) or gives up.
    #[error("failed: {0}")]
    Failure(String),
    /// Not ready yet (a job still running at the service, a resource busy): the step goes back to
    /// be claimed again after this delay, with no failure counted and its retry policy untouched.
    #[error("postponed for {0:?}")]
    Postpone(std::time::Duration),
}

#[async_trait]
pub trait Agent: Send + Sync + 'static {
    /// Calls the remote service once. The runtime retries transient errors and cancels the future
    /// at the deadline, so an implementation needs no retry or timeout of its own.
    async fn call(&self, call: &AgentCall) -> Result<serde_json::Value, AgentError>;

    /// Checks a step definition's `config` for this agent when a workflow is registered, so that a
    /// bad definition is refused before any task runs.
    fn check_config(&self, _step: &StepDef) -> Result<(), String> {
        Ok(())
    }

    /// The remote service a call goes to, for the circuit breaker; `None` means the agent is one service.
    fn service(&self, _config: &serde_json::Value) -> Option<String> {
        None
    }
}

/// The agents an engine can run, by name, with their exception strategies.
#[derive(Clone, Default)]
pub struct AgentRegistry {
    agents: BTreeMap<String, Arc<dyn Agent>>,
    strategies: BTreeMap<String, Arc<dyn ExceptionStrategy>>,
}

impl AgentRegistry {
    pub fn insert(&mut self, name: impl Into<String>, agent: Arc<dyn Agent>) {
        self.agents.insert(name.into(), agent);
    }

    pub fn set_strategy(&mut self, name: impl Into<String>, strategy: Arc<dyn ExceptionStrategy>) {
        self.strategies.insert(name.into(), strategy);
    }

    /// The exception strategy of an agent type, if it has one.
    pub fn strategy(&self, name: &str) -> Option<&Arc<dyn ExceptionStrategy>> {
        self.strategies.get(name)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Agent>> {
        self.agents.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.agents.keys().cloned().collect()
    }

    /// The circuit breaker's key for a call.
    pub fn service_key(&self, agent: &str, config: &serde_json::Value) -> String {
        match self.agents.get(agent).and_then(|a| a.service(config)) {
            Some(s) => format!("{agent}:{s}"),
            None => agent.to_owned(),
        }
    }
}
