//! Following the event log (issue 18): a reader of settled events that sleeps until something may
//! have happened, a task's events as a `Stream`, and awaiting a task's end, instead of a loop that
//! polls the database.
//!
//! What wakes a reader: the engine's event bell, rung by this process's writes (submissions,
//! replies, the scheduler's batches) and by the store's due-work channel (other processes' writes
//! that queue work). A task's end queues no work, so a write in another process that ends a task
//! rings nothing here: the safety poll (`poll`) bounds how late that is seen. While a read reports
//! events not settled yet (a transaction that may hold an earlier id still runs), nothing announces
//! their settling: the reader reads again after a short, growing pause.

use crate::engine::EngineError;
use futures_util::Stream;
use shiftboss_core::TaskId;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_store::{EventCursor, EventFilter, ReadEvents, Store, StoreError, StreamEvent};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The first pause before reading again while events are not settled; it doubles up to
/// [`UNSETTLED_MAX`].
const UNSETTLED_FIRST: Duration = Duration::from_millis(2);
const UNSETTLED_MAX: Duration = Duration::from_millis(100);

/// Reads the event log after a cursor, a page at a time, waiting for new events between reads.
pub struct EventFollower {
    store: Arc<dyn Store>,
    bell: watch::Receiver<()>,
    cursor: EventCursor,
    filter: EventFilter,
    page: u32,
    poll: Duration,
}

/// What one read found: events, or that the reader is caught up.
#[derive(Debug)]
pub enum Read {
    Events(Vec<StreamEvent>),
    /// Nothing new is settled yet; read again shortly.
    Unsettled,
    /// Every event written before this read (that the filter matches) has been returned.
    CaughtUp,
}

impl EventFollower {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        bell: watch::Receiver<()>,
        filter: EventFilter,
        after: i64,
        page: u32,
        poll: Duration,
    ) -> Self {
        EventFollower { store, bell, cursor: EventCursor::after(after), filter, page, poll }
    }

    /// Where the reader stands: every event up to `cursor().after` has been read.
    pub fn cursor(&self) -> EventCursor {
        self.cursor
    }

    /// One read, at once.
    pub async fn read(&mut self) -> Result<Read, StoreError> {
        // Marked before the read: a bell rung from here on wakes the next wait.
        self.bell.borrow_and_update();
        let p = ReadEvents { cursor: self.cursor, filter: self.filter.clone(), limit: self.page };
        let r = self.store.read_events(p).await?;
        self.cursor = r.cursor;
        Ok(match (r.events.is_empty(), r.again) {
            (false, _) => Read::Events(r.events),
            (true, true) => Read::Unsettled,
            (true, false) => Read::CaughtUp,
        })
    }

    /// Sleeps until the bell rings or the safety poll's time passes.
    pub async fn wait(&mut self) {
        let rung = tokio::time::timeout(self.poll, self.bell.changed()).await;
        if let Ok(Err(_)) = rung {
            // The engine is gone, and its bell with it: poll.
            tokio::time::sleep(self.poll).await;
        }
    }

    /// The next events (at least one), waiting as long as it takes.
    pub async fn next_events(&mut self) -> Result<Vec<StreamEvent>, StoreError> {
        let mut pause = UNSETTLED_FIRST;
        loop {
            match self.read().await? {
                Read::Events(e) => return Ok(e),
                Read::Unsettled => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(UNSETTLED_MAX);
                }
                Read::CaughtUp => {
                    pause = UNSETTLED_FIRST;
                    self.wait().await;
                }
            }
        }
    }
}

/// A task's record, live or from history.
pub(crate) async fn find_task(store: &dyn Store, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
    if let Some(d) = store.get_task_head(id, false, 0).await? {
        return Ok(Some(d.task));
    }
    Ok(store.get_task_head(id, true, 0).await?.map(|d| d.task))
}

/// Where a task's stream stands.
struct TaskFollow {
    follower: EventFollower,
    task: TaskId,
    buffer: VecDeque<EventRecord>,
    /// The task was found in a state it leaves only if an operator acts: the stream ends once it
    /// has caught up with the log (the events of that last move included).
    ending: bool,
    done: bool,
    /// Whether the task's existence has been checked.
    checked: bool,
    pause: Duration,
}

/// A task's events from `after` (0: from its first), in id order, ending after the event that
/// left the task in a state it leaves only if an operator acts (completed, failed, cancelled,
/// compensated, terminated). An unknown task gives one `NoTask` error.
pub(crate) fn follow_task(
    follower: EventFollower,
    task: TaskId,
) -> impl Stream<Item = Result<EventRecord, EngineError>> {
    let state = TaskFollow {
        follower,
        task,
        buffer: VecDeque::new(),
        ending: false,
        done: false,
        checked: false,
        pause: UNSETTLED_FIRST,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        match st.next().await {
            Ok(Some(e)) => Some((Ok(e), st)),
            Ok(None) => None,
            Err(e) => {
                st.done = true;
                Some((Err(e), st))
            }
        }
    })
}

impl TaskFollow {
    async fn next(&mut self) -> Result<Option<EventRecord>, EngineError> {
        loop {
            if let Some(e) = self.buffer.pop_front() {
                return Ok(Some(e));
            }
            if self.done {
                return Ok(None);
            }
            if !self.checked {
                self.checked = true;
                let found = find_task(self.follower.store.as_ref(), self.task).await?;
                let task = found.ok_or(EngineError::NoTask(self.task))?;
                self.ending = task.state.is_terminal();
            }
            match self.follower.read().await? {
                Read::Events(events) => {
                    self.pause = UNSETTLED_FIRST;
                    let moved = events.iter().any(|e| e.event.kind.starts_with("task."));
                    self.buffer.extend(events.into_iter().map(|e| e.event));
                    if moved && !self.ending {
                        // Read after the events: if the task has ended, the move's events were
                        // written before this read, and the reader catches up with them next.
                        let task = find_task(self.follower.store.as_ref(), self.task).await?;
                        self.ending = task.is_some_and(|t| t.state.is_terminal());
                    }
                }
                Read::Unsettled => {
                    tokio::time::sleep(self.pause).await;
                    self.pause = (self.pause * 2).min(UNSETTLED_MAX);
                }
                Read::CaughtUp if self.ending => self.done = true,
                Read::CaughtUp => {
                    self.pause = UNSETTLED_FIRST;
                    self.follower.wait().await;
                }
            }
        }
    }
}
