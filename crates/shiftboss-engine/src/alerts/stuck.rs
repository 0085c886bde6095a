//! Tasks without progress (P17): a running task none of whose steps has ended (nor the task
//! changed state) for a set time. A task that waits on purpose (a wait step, or a sub-workflow,
//! whose child is looked at on its own) is not stuck. Each stuck spell is reported once: a task
//! is named again only after it moved and stalled anew.

use super::alert::Alert;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_store::{StalledTasks, Store, StoreError};
use std::collections::HashMap;
use std::time::Duration;

/// The most stalled tasks one look reports, oldest first; a larger backlog is reported over the
/// next looks.
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

    /// The alerts for tasks newly found without progress at `now` (the store's time): one read of
    /// the store, which leaves out the tasks that wait on purpose.
    pub async fn look(&mut self, store: &dyn Store, now: Timestamp) -> Result<Vec<Alert>, StoreError> {
        let cutoff = Timestamp(now.0.saturating_sub(shiftboss_core::time::duration_ms(self.after)));
        // Those reported already come first (oldest move first), so ask for as many more.
        let limit = (CANDIDATES as usize + self.reported.len()).min(shiftboss_store::MAX_STALLED as usize) as u32;
        let stalled = store.stalled_tasks(StalledTasks { cutoff, limit }).await?;
        let mut alerts = Vec::new();
        for s in &stalled {
            if self.reported.get(&s.task.id) == Some(&s.since) {
                continue;
            }
            if alerts.len() == CANDIDATES as usize {
                break;
            }
            self.reported.insert(s.task.id, s.since);
            alerts.push(Alert::stuck(&s.task, s.since, now));
        }
        if stalled.len() < limit as usize {
            // Every stalled task was in this look: forget those that moved or ended.
            self.reported.retain(|id, _| stalled.iter().any(|s| s.task.id == *id));
        }
        Ok(alerts)
    }
}
