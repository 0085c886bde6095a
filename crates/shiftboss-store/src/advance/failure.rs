//! The failure workflow (Conductor's `failureWorkflow`): when a task fails for good and its
//! workflow names one, a task of that workflow starts in the same transaction, so that the failure
//! and what it sets off commit together or not at all. Its input names the failed task, its
//! reason and its input; the two tasks name each other in their events.

use super::MAX_CHILD_DEPTH;
use super::agenda::Agenda;
use super::tx::{NewTask, TaskRow, WriteTx};
use crate::StoreError;
use crate::event_kind as ev;
use serde_json::{Value, json};
use shiftboss_core::model::EventLevel;
use shiftboss_core::{TaskId, TaskState};

/// Starts the failure workflow of a task that has just failed, if its workflow names one. What
/// cannot start (the workflow is not registered, the chain of failure workflows is too deep, the
/// key is taken) is an alert on the failed task; the failure itself stands.
pub(super) async fn start_failure_workflow<T: WriteTx>(
    t: &T,
    agenda: &mut Agenda,
    failed: TaskId,
    task: &TaskRow,
    why: &Value,
    actor: &str,
) -> Result<(), StoreError> {
    let def = t.definition(&task.workflow, task.version).await?;
    let Some(workflow) = def.on_failure.as_deref() else { return Ok(()) };
    let reason = why.get("reason").and_then(Value::as_str).unwrap_or("the task failed");
    let step = why.get("step").and_then(Value::as_str).unwrap_or("");
    let not_started = |problem: String| json!({"workflow": workflow, "problem": problem});
    let version = t.latest_version(workflow).await?;
    let outcome = match version {
        None => Err(format!("workflow {workflow:?} is not registered")),
        Some(_) if task.depth + 1 > MAX_CHILD_DEPTH => {
            Err(format!("failure workflows chain at most {MAX_CHILD_DEPTH} deep"))
        }
        Some(version) => {
            let input = json!({
                "task_id": failed.0,
                // Conductor's names, which an imported failure workflow reads.
                "workflowId": failed.0.to_string(),
                "reason": reason,
                "failureStatus": "FAILED",
                "failedStep": step,
                "failedWorkflow": {
                    "workflowId": failed.0.to_string(),
                    "workflowName": task.workflow,
                    "version": task.version,
                    "correlationId": task.key,
                    "input": task.input,
                },
            });
            let child_def = match t.definition(workflow, version).await {
                Ok(d) => d,
                // A definition that cannot be read is this start's problem (an alert), not the
                // failing transaction's: the failure must commit.
                Err(e @ (StoreError::NotFound { .. } | StoreError::Incompatible(_))) => {
                    let detail = not_started(format!("workflow {workflow:?} version {version}: {e}"));
                    return t
                        .event(failed, None, ev::FAILURE_WORKFLOW_NOT_STARTED, EventLevel::Alert, actor, detail)
                        .await;
                }
                Err(e) => return Err(e),
            };
            // One key per generation; a task that fails again after a retry (the same generation)
            // starts another, keyed by the time of this failure too.
            let first = format!("{}/on_failure/{}", task.key, task.generation);
            let again = format!("{first}/{}", t.now().0);
            let mut started = None;
            for key in [first, again] {
                let new = NewTask {
                    key: &key,
                    workflow,
                    version,
                    priority: task.priority,
                    input: &input,
                    parent: None,
                    depth: task.depth + 1,
                    deadline_at: child_def.timeout.map(|d| t.now().plus(d).0),
                    domains: None,
                    correlation_id: None,
                };
                if let Some(id) = t.insert_task(&new).await? {
                    started = Some((id, key));
                    break;
                }
            }
            match started {
                None => Err(format!("its task keys are taken by other tasks ({}/on_failure/...)", task.key)),
                Some((id, key)) => {
                    let detail = json!({"key": key, "workflow": workflow, "version": version, "failure_of": failed.0});
                    t.event(id, None, ev::TASK_RECEIVED, EventLevel::Info, actor, detail).await?;
                    agenda.noted(id, TaskState::Running);
                    agenda.decide(id);
                    Ok(id)
                }
            }
        }
    };
    match outcome {
        Ok(id) => {
            let detail = json!({"workflow": workflow, "task_id": id.0});
            t.event(failed, None, ev::FAILURE_WORKFLOW_STARTED, EventLevel::Info, actor, detail).await
        }
        Err(problem) => {
            let detail = not_started(problem);
            t.event(failed, None, ev::FAILURE_WORKFLOW_NOT_STARTED, EventLevel::Alert, actor, detail).await
        }
    }
}
