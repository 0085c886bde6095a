//! Tasks without progress (P17): a running task none of whose steps has ended (nor the task
//! changed state) for a set time. A task that waits on purpose (a wait step, or a sub-workflow,
//! whose child is looked at on its own) is not stuck. Each stuck spell is reported once: a task
//! is named again only after it moved and stalled anew.

use super::alert::Alert;
use shiftboss_core::model::{StepRecord, TaskRecord};
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskId, TaskState, Timestamp};
use shiftboss_store::{ListTasks, Store, StoreError, TaskFilter};
use std::collections::HashMap;
use std::time::Duration;

/// The most candidates one look reads (oldest changes are not first: the list is by id, newest
/// first; a backlog larger than this is found over several looks).
const CANDIDATES: u32 = 200;

pub struct StuckScan {
    after: Duration,
    /// The tasks reported, with the progress time they were reported at.
    reported: HashMap<TaskId, Timestamp>,
}

impl StuckScan {
    pub fn new(after: Duration) -> StuckScan {
        StuckScan { after, reported: HashMap::new() }
    }

    /// The alerts for tasks newly found without progress at `now` (the store's time).
    pub async fn look(&mut self, store: &dyn Store, now: Timestamp) -> Result<Vec<Alert>, StoreError> {
        let cutoff = Timestamp(now.0.saturating_sub(shiftboss_core::time::duration_ms(self.after)));
        let filter = TaskFilter { state: Some(TaskState::Running), updated_to: Some(cutoff), ..TaskFilter::default() };
        let candidates = store.list_tasks(ListTasks { filter, limit: CANDIDATES, ..ListTasks::default() }).await?;
        let mut alerts = Vec::new();
        for task in &candidates {
            let Some(head) = store.get_task_head(task.id, false, 1).await? else { continue };
            let Some(since) = last_progress(&head.task, &head.steps) else { continue };
            if since > cutoff || self.reported.get(&task.id) == Some(&since) {
                continue;
            }
            self.reported.insert(task.id, since);
            alerts.push(Alert::stuck(&head.task, since, now));
        }
        if candidates.len() < CANDIDATES as usize {
            // Every stalled task was in this look: forget those that moved or ended.
            self.reported.retain(|id, _| candidates.iter().any(|t| t.id == *id));
        }
        Ok(alerts)
    }
}

/// When the task last moved: its last change of state or the last end of one of its steps. None
/// when it waits on purpose.
pub fn last_progress(task: &TaskRecord, steps: &[StepRecord]) -> Option<Timestamp> {
    let open = |s: &&StepRecord| matches!(s.state, StepState::Pending | StepState::Processing);
    if steps.iter().filter(open).any(|s| matches!(s.kind, StepKind::Wait | StepKind::SubWorkflow)) {
        return None;
    }
    let ended = steps.iter().filter(|s| !open(s)).map(|s| s.updated_at);
    Some(ended.fold(task.updated_at, Timestamp::max))
}
