//! Group commit: the writes that queue for the connection while it is busy run together in one
//! transaction, each under a savepoint of its own, and share one commit.
//!
//! SQLite has one writer, and at `synchronous = FULL` every commit writes the WAL and waits for an
//! fsync. Under load the scheduler's claim and its reply batches queued behind each other and each
//! paid for a commit of its own (a drain of one-step jobs spent about a third of the writer's time
//! committing). A write that finds the connection free runs alone, as before: grouping adds no wait.
//!
//! Each write still sees all or nothing of its own changes: a write that fails is rolled back to
//! its savepoint while the others of its group go on, and no caller hears of success before the
//! commit that holds its changes.

use crate::error::map_err;
use crate::tx::{DefCache, Tx};
use rusqlite::{Connection, TransactionBehavior};
use shiftboss_core::Timestamp;
use shiftboss_store::{Result, StoreError, fault};
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// The most writes one transaction takes, so that the first of a long queue is not kept waiting
/// for all the rest.
const MAX_GROUP: usize = 16;

/// A write waiting for its group.
pub trait Write: Send {
    /// Runs the write in the group's transaction; false when it failed (its changes are to be
    /// undone).
    fn run(&mut self, t: &Tx<'_>) -> bool;
    /// Hands the caller its result once the group's fate is known: `Err` when nothing of the
    /// group was committed.
    fn finish(self: Box<Self>, committed: Result<()>);
}

/// The queue of writes and what running them needs.
pub struct Writer {
    pub queue: Mutex<VecDeque<Box<dyn Write>>>,
    /// This process's dispatchers, rung after a commit that wrote deliveries (the store writes
    /// them beside the message events, so nothing else in the process knows).
    pub outbox_bells: Mutex<Vec<(u64, shiftboss_store::WakeFn)>>,
}

/// A write of the store: `f` runs in the transaction, and its result reaches `send`.
pub struct Pending<T, F> {
    f: Option<F>,
    out: Option<Result<T>>,
    send: oneshot::Sender<Result<T>>,
}

impl<T, F> Pending<T, F> {
    pub fn new(f: F) -> (Self, oneshot::Receiver<Result<T>>) {
        let (send, recv) = oneshot::channel();
        (Pending { f: Some(f), out: None, send }, recv)
    }
}

impl<T: Send, F: FnOnce(&Tx<'_>) -> Result<T> + Send> Write for Pending<T, F> {
    fn run(&mut self, t: &Tx<'_>) -> bool {
        let Some(f) = self.f.take() else { return false };
        // The events this write recorded go in under its own savepoint.
        let out = f(t).and_then(|v| t.flush_events().map(|()| v));
        let ok = out.is_ok();
        self.out = Some(out);
        ok
    }

    fn finish(self: Box<Self>, committed: Result<()>) {
        let result = match (self.out, committed) {
            // Its own failure: its changes were undone whatever became of the others.
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(v)), Ok(())) => Ok(v),
            (_, Err(e)) => Err(e),
            (None, Ok(())) => Err(StoreError::Backend("a write was committed without being run".into())),
        };
        // A caller that went away needs no answer.
        let _ = self.send.send(result);
    }
}

impl Writer {
    pub fn new() -> Self {
        Writer { queue: Mutex::new(VecDeque::new()), outbox_bells: Mutex::new(Vec::new()) }
    }

    pub fn push(&self, w: Box<dyn Write>) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(w);
    }

    /// Runs the writes queued now (up to `MAX_GROUP`) in one transaction. Every write that is
    /// pushed calls this once afterwards, so each finds a runner; one that finds the queue empty
    /// was taken into an earlier group.
    pub fn run_group(&self, conn: &Mutex<Connection>, defs: &DefCache, now: impl Fn() -> Timestamp) {
        let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut writes: Vec<Box<dyn Write>> = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            let n = q.len().min(MAX_GROUP);
            q.drain(..n).collect()
        };
        if writes.is_empty() {
            return;
        }
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => {
                let e = map_err(e);
                return writes.into_iter().for_each(|w| w.finish(Err(e.clone())));
            }
        };
        // Alone, a write needs no savepoint: a failure rolls the whole transaction back.
        let alone = writes.len() == 1;
        let mut any_ok = false;
        let mut outbox = false;
        for w in &mut writes {
            if !alone && let Err(e) = savepoint(&tx, "SAVEPOINT shiftboss_write") {
                return writes.into_iter().for_each(|w| w.finish(Err(e.clone())));
            }
            let t = Tx::new(&tx, now(), defs);
            let ok = w.run(&t);
            any_ok |= ok;
            outbox |= ok && t.outbox.get();
            if alone {
                continue;
            }
            let undone = if ok {
                savepoint(&tx, "RELEASE shiftboss_write")
            } else if tx.is_autocommit() {
                // Some errors (a full disk, an I/O error) make SQLite roll back the whole
                // transaction: the writes before this one are lost too.
                Err(StoreError::Unavailable("the database rolled the transaction back after an error".into()))
            } else {
                savepoint(&tx, "ROLLBACK TO shiftboss_write").and_then(|()| savepoint(&tx, "RELEASE shiftboss_write"))
            };
            if let Err(e) = undone {
                return writes.into_iter().for_each(|w| w.finish(Err(e.clone())));
            }
        }
        if !any_ok {
            // Nothing to keep: dropping the transaction rolls it back.
            drop(tx);
            return writes.into_iter().for_each(|w| w.finish(Ok(())));
        }
        fault::reached(fault::FaultPoint::BeforeCommit);
        let committed = tx.commit().map_err(map_err);
        if committed.is_ok() {
            fault::reached(fault::FaultPoint::AfterCommit);
            if outbox {
                for (_, ring) in self.outbox_bells.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                    ring();
                }
            }
        }
        for w in writes {
            w.finish(committed.clone());
        }
    }
}

fn savepoint(tx: &rusqlite::Transaction<'_>, sql: &str) -> Result<()> {
    tx.prepare_cached(sql).and_then(|mut st| st.execute([])).map(|_| ()).map_err(map_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn store_file(dir: &tempfile::TempDir) -> (std::path::PathBuf, Mutex<Connection>) {
        let path = dir.path().join("group.db");
        let conn = crate::open::open_connection(&path, &crate::open::OpenOptions::default()).unwrap();
        conn.execute_batch("CREATE TABLE t (v TEXT NOT NULL UNIQUE)").unwrap();
        (path, Mutex::new(conn))
    }

    /// A write that inserts `v`, then fails when `fail` says so.
    fn insert(v: &'static str, fail: bool) -> (Box<dyn Write>, oneshot::Receiver<Result<&'static str>>) {
        let (p, answer) = Pending::new(move |t: &Tx<'_>| {
            t.tx.execute("INSERT INTO t (v) VALUES (?1)", [v]).map_err(map_err)?;
            if fail { Err(StoreError::Conflict(format!("{v} fails after writing"))) } else { Ok(v) }
        });
        (Box::new(p), answer)
    }

    /// Queues an insert of each value (failing after it writes when its flag says so).
    fn push_all(writer: &Writer, values: &[(&'static str, bool)]) -> Vec<oneshot::Receiver<Result<&'static str>>> {
        values
            .iter()
            .map(|&(v, fail)| {
                let (w, answer) = insert(v, fail);
                writer.push(w);
                answer
            })
            .collect()
    }

    fn rows(conn: &Mutex<Connection>) -> Vec<String> {
        let conn = conn.lock().unwrap();
        let mut st = conn.prepare("SELECT v FROM t ORDER BY v").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().collect::<std::result::Result<_, _>>().unwrap()
    }

    #[test]
    fn a_failed_write_is_undone_and_the_rest_of_its_group_commits() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = store_file(&dir);
        let writer = Writer::new();
        let answers = push_all(&writer, &[("a", false), ("b", true), ("c", false)]);
        // A write that fails on SQLite's own constraint, after "a" took the value.
        let (w, dup) = insert("a", false);
        writer.push(w);
        writer.run_group(&conn, &DefCache::default(), || Timestamp(0));
        assert!(writer.queue.lock().unwrap().is_empty(), "one group took every write");
        let got: Vec<_> = answers.into_iter().map(|mut a| a.try_recv().expect("answered")).collect();
        assert_eq!(got[0].as_ref().ok(), Some(&"a"));
        assert!(matches!(&got[1], Err(StoreError::Conflict(m)) if m.contains("b fails")), "{:?}", got[1]);
        assert_eq!(got[2].as_ref().ok(), Some(&"c"));
        assert!(dup.blocking_recv().expect("answered").is_err(), "the duplicate is refused");
        assert_eq!(rows(&conn), ["a", "c"], "the failed writes left nothing");
    }

    #[test]
    fn a_write_alone_that_fails_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = store_file(&dir);
        let writer = Writer::new();
        let (w, answer) = insert("x", true);
        writer.push(w);
        writer.run_group(&conn, &DefCache::default(), || Timestamp(0));
        assert!(answer.blocking_recv().unwrap().is_err());
        assert!(rows(&conn).is_empty());
    }

    #[test]
    fn a_group_that_cannot_begin_answers_every_write_with_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn) = store_file(&dir);
        conn.lock().unwrap().busy_timeout(Duration::from_millis(10)).unwrap();
        // Another process holds the write lock.
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let writer = Writer::new();
        let answers = push_all(&writer, &[("p", false), ("q", false)]);
        writer.run_group(&conn, &DefCache::default(), || Timestamp(0));
        for a in answers {
            let e = a.blocking_recv().unwrap().unwrap_err();
            assert!(e.is_transient(), "busy is worth a retry: {e}");
        }
        other.execute_batch("ROLLBACK").unwrap();
        assert!(rows(&conn).is_empty());
    }

    #[test]
    fn a_queue_longer_than_a_group_is_left_for_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let (_, conn) = store_file(&dir);
        let writer = Writer::new();
        let values: Vec<(&'static str, bool)> =
            (0..MAX_GROUP + 3).map(|i| (&*format!("v{i:02}").leak(), false)).collect();
        let answers = push_all(&writer, &values);
        writer.run_group(&conn, &DefCache::default(), || Timestamp(0));
        assert_eq!(writer.queue.lock().unwrap().len(), 3);
        assert_eq!(rows(&conn).len(), MAX_GROUP);
        writer.run_group(&conn, &DefCache::default(), || Timestamp(0));
        for a in answers {
            assert!(a.blocking_recv().unwrap().is_ok());
        }
        assert_eq!(rows(&conn).len(), MAX_GROUP + 3);
    }
}
