//! The cross-process wake (`subscribe_due_work` on a SQLite file): a commit through another handle
//! on the same file rings the subscriber, across checkpoints, and nothing rings once the
//! subscription is dropped.

use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{EnqueueJob, EnqueueJobs, Store, WakeFn};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// Generous: the machine may be loaded; a missing wake is told from a slow one by never coming.
const PATIENCE: Duration = Duration::from_secs(20);

/// Counts rings and tells a waiting test about each.
#[derive(Default)]
struct Bell {
    rings: AtomicUsize,
    rung: Notify,
}

impl Bell {
    fn wake_fn(self: &Arc<Self>) -> WakeFn {
        let me = self.clone();
        Arc::new(move || {
            me.rings.fetch_add(1, Ordering::SeqCst);
            me.rung.notify_one();
        })
    }

    fn count(&self) -> usize {
        self.rings.load(Ordering::SeqCst)
    }

    /// Waits until more than `seen` rings have come, or fails the test.
    async fn rung_after(&self, seen: usize, what: &str) -> usize {
        let wait = async {
            loop {
                let notified = self.rung.notified();
                if self.count() > seen {
                    return self.count();
                }
                notified.await;
            }
        };
        match tokio::time::timeout(PATIENCE, wait).await {
            Ok(n) => n,
            Err(_) => panic!("no wake within {PATIENCE:?} after {what}"),
        }
    }
}

fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path, &OpenOptions::default()).unwrap()
}

/// A new store file with two handles on it (a scheduler's and a client's, as two processes would
/// hold), and a bell for the scheduler side's subscription.
struct Files {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    scheduler_side: SqliteStore,
    client_side: SqliteStore,
    bell: Arc<Bell>,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (scheduler_side, client_side) = (open(&path), open(&path));
    Files { _dir: dir, path, scheduler_side, client_side, bell: Arc::new(Bell::default()) }
}

async fn enqueue(store: &SqliteStore, n: u32) {
    let job = EnqueueJob::new("send-mail", serde_json::json!({ "n": n }));
    store.enqueue_jobs(EnqueueJobs { jobs: vec![job], actor: "test".into() }).await.unwrap();
}

#[tokio::test]
async fn a_job_enqueued_through_another_handle_rings_the_subscriber() {
    let Files { _dir, path: _, scheduler_side, client_side, bell } = files();
    let _sub = scheduler_side.subscribe_due_work(bell.wake_fn());
    // The watcher rings once when it starts (work committed before it watched is found by a look).
    let started = bell.rung_after(0, "the watcher started").await;

    enqueue(&client_side, 1).await;
    bell.rung_after(started, "a job enqueued through the other handle").await;
}

#[tokio::test]
async fn the_watcher_survives_checkpoints() {
    let Files { _dir, path, scheduler_side, client_side, bell } = files();
    let _sub = scheduler_side.subscribe_due_work(bell.wake_fn());
    let mut seen = bell.rung_after(0, "the watcher started").await;
    let raw = rusqlite::Connection::open(&path).unwrap();
    for (n, mode) in ["PASSIVE", "RESTART", "TRUNCATE", "TRUNCATE"].into_iter().enumerate() {
        // Every frame checkpointed: the next writer starts the WAL over (RESTART), or finds it
        // cut to nothing (TRUNCATE).
        raw.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(())).unwrap();
        enqueue(&client_side, n as u32).await;
        seen = bell.rung_after(seen, &format!("an enqueue after a {mode} checkpoint")).await;
    }
}

#[tokio::test]
async fn dropping_the_subscription_stops_the_watcher() {
    let Files { _dir, path: _, scheduler_side, client_side, bell } = files();
    let wake = bell.wake_fn();
    let sub = scheduler_side.subscribe_due_work(wake.clone());
    bell.rung_after(0, "the watcher started").await;
    assert!(Arc::strong_count(&wake) > 1, "the watcher holds the bell");

    drop(sub);
    // The drop waits for the thread, and the thread owns the only other handle on the bell.
    assert_eq!(Arc::strong_count(&wake), 1, "the watcher thread has ended");
    let before = bell.count();
    enqueue(&client_side, 1).await;
    assert_eq!(bell.count(), before, "nothing rings after the drop");
}

#[tokio::test]
async fn the_watcher_survives_every_other_connection_closing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let bell = Arc::new(Bell::default());
    let sub = open(&path).subscribe_due_work(bell.wake_fn());
    let mut seen = bell.rung_after(0, "the watcher started").await;
    for n in 0..3 {
        // A handle that comes, writes and goes: were the WAL file deleted as the last writer
        // closed, the next would make it anew.
        let client = open(&path);
        enqueue(&client, n).await;
        seen = bell.rung_after(seen, &format!("enqueue {n} through a fresh handle")).await;
        drop(client);
    }
    drop(sub);
}
