//! Retry jobs (M1-M8): "run this handler until it succeeds, on this retry schedule". A job is a
//! task of a one-step workflow, `job:<handler>`, whose only step (`run`) is claimed by the agent
//! named like the handler. Same tables, same claims, leases and supervisor as every other task.

use crate::buckets::{BUCKETS, bucket_of};
use crate::state::{StepState, TaskState};
use crate::workflow::{DefinitionError, StepDef, WorkflowDef, check_name};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Every job workflow's name starts with this; user definitions may not.
pub const WORKFLOW_PREFIX: &str = "job:";
/// The name of a job's only step.
pub const STEP: &str = "run";

/// The workflow of `handler`'s jobs.
pub fn workflow_name(handler: &str) -> String {
    format!("{WORKFLOW_PREFIX}{handler}")
}

/// The handler of a job workflow's name; `None` for other workflows.
pub fn handler_of(workflow: &str) -> Option<&str> {
    workflow.strip_prefix(WORKFLOW_PREFIX)
}

/// The definition of `handler`'s jobs: one agent step whose input is the job's parameters. The
/// step's timeout and retry policy are set per job on its row, so one version serves every job.
pub fn definition(handler: &str) -> Result<WorkflowDef, DefinitionError> {
    check_name("handler", handler)?;
    let step = StepDef::agent(STEP, handler).with_input(serde_json::Value::String("${task.input}".into()));
    let mut def = WorkflowDef::new(workflow_name(handler), 1, vec![step]);
    def.description = Some(format!("retry job of handler {handler}"));
    // A job has nothing to undo: its one step either succeeded or gave up.
    def.compensate_on_failure = false;
    Ok(def)
}

/// Where a job stands, as an operator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its due time (the first try, or the next after a failure).
    Pending,
    /// A server is running it now.
    Running,
    /// The handler succeeded: its task completed.
    Succeeded,
    /// The retry policy ran out (or the handler's failure was final): for a person to handle.
    GivenUp,
    /// Cancelled or terminated by an operator.
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 5] =
        [JobState::Pending, JobState::Running, JobState::Succeeded, JobState::GivenUp, JobState::Cancelled];

    /// The job's state from its task's and its step's.
    pub fn of(task: TaskState, step: StepState) -> JobState {
        match task {
            TaskState::Completed => JobState::Succeeded,
            TaskState::Failed => JobState::GivenUp,
            TaskState::Cancelled | TaskState::Terminated | TaskState::Compensated => JobState::Cancelled,
            TaskState::Running | TaskState::Paused | TaskState::Compensating => match step {
                StepState::Processing => JobState::Running,
                StepState::Error => JobState::GivenUp,
                _ => JobState::Pending,
            },
        }
    }

    /// True when the job has finished, one way or another, and may move to history.
    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::GivenUp | JobState::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::GivenUp => "given_up",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = crate::state::UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = if s == "given-up" { "given_up" } else { s };
        JobState::ALL.into_iter().find(|x| x.as_str() == s).ok_or_else(|| crate::state::UnknownState(s.to_owned()))
    }
}

/// How a client picks a job's load-balance number when the caller gives none (M3).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Balance {
    /// A hash of the job's key: the same key always lands in the same bucket.
    #[default]
    Hash,
    /// Buckets in turn, 0, 1, 2, ...: an even spread whatever the keys.
    RoundRobin,
    /// Each group of buckets (the buckets a server owns) gets jobs in proportion to its weight
    /// (its share of the machine power), buckets within a group in turn.
    Weighted {
        /// The groups; those with a weight of 0 or no bucket are passed over.
        shares: Vec<Share>,
    },
}

/// A group of buckets and its weight, for [`Balance::Weighted`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Share {
    /// The buckets of the group (each below 256).
    pub buckets: Vec<u16>,
    /// The group's share of the jobs; a group of weight 0 gets none.
    pub weight: u32,
}

/// A balance strategy that cannot pick a bucket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidBalance {
    /// No share has both a weight above 0 and a bucket.
    #[error("a weighted balance needs at least one share with a weight above 0 and at least one bucket")]
    NoShares,
    /// A share names a bucket of 256 or more.
    #[error("bucket {0} is out of range: buckets are 0 to {max}", max = BUCKETS - 1)]
    BucketOutOfRange(u16),
}

impl Balance {
    pub fn validate(&self) -> Result<(), InvalidBalance> {
        if let Balance::Weighted { shares } = self {
            if !shares.iter().any(|s| s.weight > 0 && !s.buckets.is_empty()) {
                return Err(InvalidBalance::NoShares);
            }
            if let Some(b) = shares.iter().flat_map(|s| &s.buckets).find(|b| **b >= BUCKETS) {
                return Err(InvalidBalance::BucketOutOfRange(*b));
            }
        }
        Ok(())
    }

    /// The bucket of the `n`-th job a client enqueues (counting from 0), whose key is `key`.
    /// Deterministic, so that a spread can be tested exactly; a client keeps `n` as a counter.
    pub fn bucket(&self, n: u64, key: &str) -> u16 {
        match self {
            Balance::Hash => bucket_of(key),
            Balance::RoundRobin => (n % u64::from(BUCKETS)) as u16,
            Balance::Weighted { shares } => {
                let usable: Vec<&Share> = shares.iter().filter(|s| s.weight > 0 && !s.buckets.is_empty()).collect();
                let total: u64 = usable.iter().map(|s| u64::from(s.weight)).sum();
                if total == 0 {
                    return bucket_of(key);
                }
                // Position `n % total` in a cycle where share i takes `weight_i` consecutive slots;
                // `n / total` turns the buckets within the share.
                let (mut slot, round) = (n % total, n / total);
                for s in usable {
                    let w = u64::from(s.weight);
                    if slot < w {
                        let i = (round * w + slot) % s.buckets.len() as u64;
                        return s.buckets[i as usize];
                    }
                    slot -= w;
                }
                bucket_of(key)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_is_one_agent_step_named_after_the_handler() {
        let def = definition("send-email").unwrap();
        assert_eq!(def.name, "job:send-email");
        def.validate().unwrap();
        assert_eq!(def.steps.len(), 1);
        assert_eq!(def.steps[0].agent_name(), "send-email");
        assert_eq!(handler_of(&def.name), Some("send-email"));
        assert_eq!(handler_of("order"), None);
        assert!(definition("bad name").is_err());
        let mut other = def.clone();
        other.steps[0] = StepDef::agent("run", "something-else");
        let e = other.validate().unwrap_err().to_string();
        assert!(e.contains("kept for retry jobs"), "{e}");
    }

    #[test]
    fn job_states_follow_task_and_step() {
        assert_eq!(JobState::of(TaskState::Running, StepState::Pending), JobState::Pending);
        assert_eq!(JobState::of(TaskState::Running, StepState::Processing), JobState::Running);
        assert_eq!(JobState::of(TaskState::Completed, StepState::Processed), JobState::Succeeded);
        assert_eq!(JobState::of(TaskState::Failed, StepState::Error), JobState::GivenUp);
        assert_eq!(JobState::of(TaskState::Terminated, StepState::Cancelled), JobState::Cancelled);
        for s in JobState::ALL {
            assert_eq!(s.as_str().parse::<JobState>(), Ok(s));
        }
        assert_eq!("given-up".parse::<JobState>(), Ok(JobState::GivenUp));
    }

    #[test]
    fn round_robin_turns_through_every_bucket() {
        let got: Vec<u16> = (0..4).map(|n| Balance::RoundRobin.bucket(n, "k")).collect();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(Balance::RoundRobin.bucket(256, "k"), 0);
        assert_eq!(Balance::Hash.bucket(0, "order-1"), bucket_of("order-1"));
    }

    #[test]
    fn weighted_gives_each_group_its_weight_and_turns_its_buckets() {
        let b = Balance::Weighted {
            shares: vec![Share { buckets: vec![0, 1], weight: 2 }, Share { buckets: vec![9], weight: 1 }],
        };
        b.validate().unwrap();
        let got: Vec<u16> = (0..6).map(|n| b.bucket(n, "k")).collect();
        assert_eq!(got, [0, 1, 9, 0, 1, 9]);
        let counts = (0..3000).map(|n| b.bucket(n, "k")).filter(|x| *x == 9).count();
        assert_eq!(counts, 1000, "one job in three goes to the weight-1 group");
        let none = Balance::Weighted { shares: vec![Share { buckets: vec![], weight: 3 }] };
        assert_eq!(none.validate(), Err(InvalidBalance::NoShares));
        let far = Balance::Weighted { shares: vec![Share { buckets: vec![300], weight: 1 }] };
        assert_eq!(far.validate(), Err(InvalidBalance::BucketOutOfRange(300)));
    }
}
