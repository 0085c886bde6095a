//! Being told when another handle or process commits to the same file, so that an idle scheduler
//! starts new work at once instead of at its next poll (the SQLite side of `subscribe_due_work`).
//!
//! SQLite has no NOTIFY. What every commit in WAL mode does do is write its pages to the `-wal`
//! file, so on Linux a watcher thread blocks in inotify (no CPU while nothing is written) and, on
//! a write, checks `PRAGMA data_version` on a read connection of its own until the commit shows:
//! the write event comes before the writer's fsync, and a scheduler woken then would only find
//! the write lock held. `data_version` changes on every commit by any other connection, which is
//! also why this watcher wakes on commits that make nothing due (this process's own claims and
//! replies included): the scheduler then runs one claim that finds nothing, a transaction that
//! writes no page. The check is a read transaction and never a write.
//!
//! Measured against polling `data_version` (ARCHITECTURE.md): polling costs CPU on an idle host at
//! every tick and adds half its period to every pickup; this costs nothing while idle.
//!
//! Elsewhere than Linux there is no watcher: schedulers find such work at their next poll.

use shiftboss_store::{Subscription, WakeFn};
use std::path::Path;

/// Starts a watcher of `db`'s commits that calls `wake` after each, until the subscription is
/// dropped. Without a watcher (it could not start, or not on Linux) schedulers poll.
pub fn subscribe(db: &Path, wake: WakeFn) -> Subscription {
    #[cfg(target_os = "linux")]
    match linux::Watcher::start(db, wake) {
        Ok(w) => Subscription::new(w),
        Err(e) => {
            tracing::warn!(db = %db.display(), error = %e, "no cross-process wake: schedulers find other handles' work at their next poll");
            Subscription::none()
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (db, wake);
        Subscription::none()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::WakeFn;
    use rusqlite::{Connection, OpenFlags};
    use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
    use rustix::fd::OwnedFd;
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    use rustix::io::Errno;
    use std::ffi::OsString;
    use std::mem::MaybeUninit;
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    /// After a write to the WAL, how often to look for the commit at first: a commit becomes
    /// visible once its fsync returns, typically well under a few milliseconds.
    const FAST_STEP: Duration = Duration::from_micros(50);
    /// How long to look at `FAST_STEP` before slowing down (a loaded disk's fsync).
    const FAST_FOR: Duration = Duration::from_millis(5);
    const SLOW_STEP: Duration = Duration::from_millis(1);
    /// A write that shows no commit by then was not one (a large transaction spilling its cache,
    /// a checkpoint truncating the WAL), or was a commit whose fsync is that slow (a loaded disk).
    /// The watcher rings then anyway: a commit still in progress holds the write lock, which the
    /// scheduler's claim waits for, and a ring for nothing costs one claim that finds nothing.
    const GIVE_UP_AFTER: Duration = Duration::from_secs(1);

    #[derive(Debug, thiserror::Error)]
    pub enum WatchError {
        #[error("{0}")]
        Os(#[from] Errno),
        #[error("opening the watcher's read connection: {0}")]
        Sqlite(#[from] rusqlite::Error),
        #[error("starting the watcher thread: {0}")]
        Thread(#[from] std::io::Error),
        #[error("the database path has no file name")]
        NoFileName,
    }

    /// The watcher thread; dropping this stops it and waits for it, so no call of `wake` runs
    /// after the drop returns.
    pub struct Watcher {
        stop: Arc<Stop>,
        thread: Option<JoinHandle<()>>,
    }

    struct Stop {
        flag: AtomicBool,
        /// Readable once stopping: it wakes the thread out of its poll.
        fd: OwnedFd,
    }

    impl Drop for Watcher {
        fn drop(&mut self) {
            self.stop.flag.store(true, Ordering::SeqCst);
            // If this write failed the thread would block on; an eventfd write of 1 only fails
            // when the counter would overflow, which takes 2^64 - 1 earlier writes.
            let _ = rustix::io::write(&self.stop.fd, &1u64.to_ne_bytes());
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    impl Watcher {
        pub fn start(db: &Path, wake: WakeFn) -> Result<Self, WatchError> {
            let name = db.file_name().ok_or(WatchError::NoFileName)?;
            let dir = match db.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let mut wal_name = OsString::from(name);
            wal_name.push("-wal");
            let conn =
                Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
            let notify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
            // The directory tells when the WAL file is made anew (SQLite deletes it when the last
            // connection closes); the file's own watch tells when it is written.
            inotify::add_watch(&notify, &dir, WatchFlags::CREATE | WatchFlags::MOVED_TO)?;
            let stop = Arc::new(Stop {
                flag: AtomicBool::new(false),
                fd: eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?,
            });
            let mut state = State {
                conn,
                notify,
                wal: dir.join(&wal_name),
                wal_name,
                wal_wd: None,
                version: 0,
                wake,
                stop: stop.clone(),
            };
            state.watch_wal();
            state.version = state.data_version().unwrap_or(0);
            let thread = std::thread::Builder::new().name("shiftboss-wake".into()).spawn(move || state.run())?;
            Ok(Watcher { stop, thread: Some(thread) })
        }
    }

    struct State {
        /// A read connection of its own: `data_version` moves for other connections' commits.
        conn: Connection,
        notify: OwnedFd,
        wal: PathBuf,
        wal_name: OsString,
        wal_wd: Option<i32>,
        /// The last `data_version` seen.
        version: i64,
        wake: WakeFn,
        stop: Arc<Stop>,
    }

    /// What a batch of inotify events said.
    enum Seen {
        Nothing,
        Written,
        /// The inotify descriptor failed: nothing more will come from it.
        Broken,
    }

    impl State {
        fn run(mut self) {
            // Anything committed before the watch was set is found by one look.
            (self.wake)();
            loop {
                let mut fds = [PollFd::new(&self.notify, PollFlags::IN), PollFd::new(&self.stop.fd, PollFlags::IN)];
                match poll(&mut fds, None) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return self.broken(e),
                }
                if self.stopping() {
                    return;
                }
                match self.drain() {
                    Seen::Nothing => {}
                    Seen::Written => self.await_commit(),
                    Seen::Broken => return,
                }
            }
        }

        fn stopping(&self) -> bool {
            self.stop.flag.load(Ordering::SeqCst)
        }

        fn broken(&self, e: Errno) {
            tracing::warn!(error = %e, "the cross-process wake stopped: schedulers find other handles' work at their next poll");
        }

        /// After a write to the WAL: rings once the commit is visible (or on any doubt).
        fn await_commit(&mut self) {
            let started = Instant::now();
            loop {
                if self.changed() {
                    (self.wake)();
                    // The rest of this commit's write events are queued already (the kernel queues
                    // them in the write calls, all before the commit shows): drop them, then look
                    // once more in case another commit showed meanwhile. A commit still being
                    // written now holds the write lock, so the scheduler's claim, which this ring
                    // starts, waits for it and finds its work.
                    if let Seen::Broken = self.drain() {
                        return;
                    }
                    if self.changed() {
                        (self.wake)();
                    }
                    return;
                }
                let waited = started.elapsed();
                if self.stopping() {
                    return;
                }
                if waited > GIVE_UP_AFTER {
                    (self.wake)();
                    return;
                }
                std::thread::sleep(if waited < FAST_FOR { FAST_STEP } else { SLOW_STEP });
            }
        }

        /// True when another connection committed since the last look. A failed look counts as
        /// a change: ringing for nothing costs one empty claim, missing a commit a poll period.
        fn changed(&mut self) -> bool {
            match self.data_version() {
                Ok(v) if v == self.version => false,
                Ok(v) => {
                    self.version = v;
                    true
                }
                Err(_) => true,
            }
        }

        fn data_version(&self) -> rusqlite::Result<i64> {
            self.conn.prepare_cached("PRAGMA data_version")?.query_row([], |r| r.get(0))
        }

        fn watch_wal(&mut self) {
            // Missing until the first write after the last connection closed: the directory's
            // watch tells when it is back.
            self.wal_wd = inotify::add_watch(&self.notify, &self.wal, WatchFlags::MODIFY).ok();
        }

        /// Reads every queued event.
        fn drain(&mut self) -> Seen {
            let mut written = false;
            let mut rewatch = false;
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut events = inotify::Reader::new(&self.notify, &mut buf);
            loop {
                match events.next() {
                    Ok(e) => {
                        let flags = e.events();
                        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                            // Events were lost: assume a write and the WAL file made anew.
                            written = true;
                            rewatch = true;
                        } else if Some(e.wd()) == self.wal_wd {
                            written |= flags.contains(ReadFlags::MODIFY);
                            // IGNORED: the file is gone; the directory tells when it is back.
                            if flags.contains(ReadFlags::IGNORED) {
                                self.wal_wd = None;
                            }
                        } else if e.file_name().is_some_and(|n| n.to_bytes() == self.wal_name.as_bytes()) {
                            written = true;
                            rewatch = true;
                        }
                    }
                    Err(Errno::WOULDBLOCK) => break,
                    Err(Errno::INTR) => {}
                    Err(e) => {
                        self.broken(e);
                        return Seen::Broken;
                    }
                }
            }
            if rewatch {
                self.watch_wal();
            }
            if written { Seen::Written } else { Seen::Nothing }
        }
    }
}
