//! The kinds of events in the event log, the same in every store.

pub const TASK_RECEIVED: &str = "task.received";
pub const TASK_COMPLETED: &str = "task.completed";
pub const TASK_FAILED: &str = "task.failed";
pub const TASK_CANCELLED: &str = "task.cancelled";
pub const TASK_RESUMED: &str = "task.resumed";
pub const STEP_SCHEDULED: &str = "step.scheduled";
pub const STEP_CLAIMED: &str = "step.claimed";
pub const STEP_PROCESSED: &str = "step.processed";
/// A step went to Error: an alert.
pub const STEP_ERROR: &str = "step.error";
/// The supervisor found the lease lapsed and scheduled a retry.
pub const STEP_EXPIRED: &str = "step.expired";
/// A due attempt waited past its claim timeout with no claim; the step's timeout policy set
/// what follows (a retry, or Error).
pub const STEP_UNCLAIMED: &str = "step.unclaimed";
/// A restarted scheduler returned a step it held before it died.
pub const STEP_RELEASED: &str = "step.released";
pub const STEP_RESUBMITTED: &str = "step.resubmitted";
pub const STEP_CANCELLED: &str = "step.cancelled";
/// A reply whose lease had lapsed, or whose step had moved on: recorded, never applied.
pub const REPLY_REJECTED: &str = "reply.rejected";
/// A task failed and now compensates its completed steps: an alert.
pub const TASK_COMPENSATING: &str = "task.compensating";
pub const TASK_COMPENSATED: &str = "task.compensated";
/// A compensation failed for good: the task's effects are only partly undone. An alert.
pub const TASK_COMPENSATION_FAILED: &str = "task.compensation_failed";
pub const TASK_PAUSED: &str = "task.paused";
pub const TASK_TERMINATED: &str = "task.terminated";
/// An operator asked for a retry, a rerun or a skip (the detail says which).
pub const TASK_OPERATED: &str = "task.operated";
/// The workflow's timeout passed: the reconciler failed the task. An alert.
pub const TASK_TIMED_OUT: &str = "task.timed_out";
/// The reconciler decided a stalled task again.
pub const TASK_REDECIDED: &str = "task.redecided";
/// A control step began (a fork, a loop, a sub-workflow, a wait).
pub const STEP_STARTED: &str = "step.started";
/// A switch picked its case.
pub const STEP_DECIDED: &str = "step.decided";
/// A sub-workflow's child task was started.
pub const CHILD_STARTED: &str = "child.started";
/// A failed task's failure workflow started; the detail names its task.
pub const FAILURE_WORKFLOW_STARTED: &str = "task.failure_workflow_started";
/// A failed task's failure workflow could not start (not registered, chained too deep): an alert.
pub const FAILURE_WORKFLOW_NOT_STARTED: &str = "task.failure_workflow_not_started";
/// A wait ended by its time or by a signal.
pub const WAIT_ENDED: &str = "wait.ended";
/// An operator skipped a step.
pub const STEP_SKIPPED: &str = "step.skipped";
/// The supervisor found a lease lapsed, or a due attempt unclaimed past its claim timeout, on a
/// step whose policy is to alert only: it stays.
pub const STEP_OVERDUE: &str = "step.overdue";
/// An agent (a retry job's handler) reported that an attempt failed; the retry policy set the next try.
pub const STEP_FAILED: &str = "step.failed";
/// Its agent handed the step back unfinished, to be claimed again after a delay (no failure counted).
pub const STEP_POSTPONED: &str = "step.postponed";
/// A worker's log line for a step (Conductor's task execution log); the detail holds it as `log`.
pub const STEP_LOG: &str = "step.log";
/// The archiver moved a finished task, its steps and events to the history tables.
pub const TASK_ARCHIVED: &str = "task.archived";
/// A task was brought back from the history tables to run again.
pub const TASK_RESTORED: &str = "task.restored";
/// A status-channel delivery was given up (its retry schedule ran out, or the receiver refused it
/// for good): an alert. The detail names the delivery and its subscription.
pub const DELIVERY_DEAD: &str = "delivery.dead";

/// The kinds an operator's alert sinks are told of (issue 18): a step in Error, a task that failed
/// (for good, by its timeout, or into compensation), a compensation that failed, a step past its
/// lease under an alert-only policy, and a dead delivery. A task without progress is found by
/// the alerter's own look, not by an event.
pub const ALERT_KINDS: [&str; 7] =
    [STEP_ERROR, TASK_FAILED, TASK_COMPENSATING, TASK_COMPENSATION_FAILED, TASK_TIMED_OUT, STEP_OVERDUE, DELIVERY_DEAD];

/// The kind of the alert the alerter raises for a running task without progress for a set time.
/// Never written to the event log (nothing happened: that is the point).
pub const TASK_STUCK: &str = "task.stuck";
