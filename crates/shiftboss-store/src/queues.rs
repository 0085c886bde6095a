//! What waits per agent type, for metrics and the console: how many steps are due now, how many
//! wait for a later time, how many run, how many are in Error, and how long the oldest due one
//! has waited. Counted over live steps only, so that a scrape stays cheap however much finished
//! work the store holds.

use shiftboss_core::Timestamp;

/// One agent type's queue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentQueue {
    /// The agent type (a job's handler).
    pub agent: String,
    /// Pending steps due now: the queue's depth.
    pub due: u64,
    /// Pending steps due later (a retry's delay, a held task's steps).
    pub later: u64,
    /// Steps running now (Processing).
    pub processing: u64,
    /// Steps in Error, waiting for an operator.
    pub error: u64,
    /// The due time of the oldest step due now, if any is due.
    pub oldest_due_at: Option<Timestamp>,
}

/// Every agent type's queue at one moment of the store's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    /// The store's clock when counted.
    pub now: Timestamp,
    /// By agent type, in name order; agent types with no live step are absent.
    pub agents: Vec<AgentQueue>,
}

impl QueueStats {
    /// Folds rows of (agent, state, due now, count, oldest due) into queues; `state` is a step
    /// state's name, `due` whether the pending steps counted are due at `now`.
    pub fn from_rows(
        now: Timestamp,
        rows: impl IntoIterator<Item = (String, String, bool, u64, Option<i64>)>,
    ) -> QueueStats {
        let mut agents: std::collections::BTreeMap<String, AgentQueue> = Default::default();
        for (agent, state, due, count, oldest) in rows {
            let q = agents.entry(agent.clone()).or_insert_with(|| AgentQueue { agent, ..AgentQueue::default() });
            match (state.as_str(), due) {
                ("pending", true) => {
                    q.due += count;
                    q.oldest_due_at = oldest.map(Timestamp);
                }
                ("pending", false) => q.later += count,
                ("processing", _) => q.processing += count,
                ("error", _) => q.error += count,
                _ => {}
            }
        }
        QueueStats { now, agents: agents.into_values().collect() }
    }
}
