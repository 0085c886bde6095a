//! The `shiftboss` binary as a user runs it: the demo with faults, kill -9 in the middle of it,
//! operator commands, and bad input.

use shiftboss_core::TaskState;
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::Store;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shiftboss"));
    c.env_remove("SHIFTBOSS_DB").stdin(Stdio::null());
    c
}

fn run(db: &Path, args: &[&str]) -> Output {
    bin().arg("--db").arg(db).args(args).output().expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shiftboss.db");
    (dir, db)
}

/// The number after `label` on the summary line that starts with it.
fn figure(out: &str, label: &str) -> u64 {
    let line =
        out.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in:\n{out}"));
    let rest = line.trim_start()[label.len()..].trim_start();
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

fn summarize(db: &Path) -> shiftboss_store::Summary {
    try_summarize(db).unwrap_or_else(|| panic!("{} is not a state store", db.display()))
}

/// None while the file is missing or not yet made a store (the demo that makes it has just
/// started).
fn try_summarize(db: &Path) -> Option<shiftboss_store::Summary> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    match SqliteStore::open(db, &OpenOptions { create: false, ..OpenOptions::default() }) {
        Ok(store) => Some(rt.block_on(store.summarize()).unwrap()),
        Err(shiftboss_store::StoreError::NotFound { .. }) => None,
        Err(e) => panic!("{}: {e}", db.display()),
    }
}

#[test]
fn the_demo_with_faults_finishes_every_order_and_applies_no_effect_twice() {
    let (_d, db) = temp_db();
    let out = run(
        &db,
        &["demo", "--orders", "300", "--transient-rate", "0.2", "--hang-rate", "0.05", "--reject-rate", "0.02"],
    );
    let s = text(&out);
    assert!(out.status.success(), "{s}");
    assert_eq!(figure(&s, "effects applied twice"), 0, "{s}");
    assert_eq!(figure(&s, "orders"), 300, "{s}");
    assert!(s.contains("still running 0"), "{s}");
    assert!(figure(&s, "retried") > 0, "faults were injected, so some tries were repeated: {s}");
    assert!(figure(&s, "recovered") > 0, "hung calls were recovered after their lease expired: {s}");
    let sum = summarize(&db);
    assert_eq!(sum.tasks_in(TaskState::Running), 0);
    let ended = [TaskState::Completed, TaskState::Failed, TaskState::Compensated].map(|t| sum.tasks_in(t));
    assert_eq!(ended.iter().sum::<u64>(), 300, "every order ended: {ended:?}");
    assert!(sum.tasks_in(TaskState::Compensated) > 0, "refusals after a charge were undone: {s}");
    assert!(figure(&s, "compensated") > 0, "{s}");
}

#[test]
fn killed_with_sigkill_mid_run_and_started_again_it_finishes_everything() {
    let (_d, db) = temp_db();
    let args = ["demo", "--orders", "3000", "--hang-rate", "0.01"];
    for round in 0..2 {
        let mut child =
            bin().arg("--db").arg(&db).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // Wait for real progress (a signal from the store), then kill without warning.
        let give_up = Instant::now() + Duration::from_secs(60);
        let target = 200 * (round + 1);
        loop {
            if try_summarize(&db).is_some_and(|s| s.tasks_in(TaskState::Completed) >= target) {
                break;
            }
            assert!(Instant::now() < give_up, "no progress in round {round}");
            assert!(child.try_wait().unwrap().is_none(), "the demo ended before it was killed");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Work left: orders still live, or not yet submitted (the demo submits while it runs).
        let s = summarize(&db);
        let live: u64 = TaskState::ALL.iter().filter(|t| !t.is_terminal()).map(|t| s.tasks_in(*t)).sum();
        let submitted: u64 = s.tasks.iter().map(|(_, n)| n).sum();
        assert!(live > 0 || submitted < 3000, "killed with work left, or the test proves nothing");
    }
    let out = run(&db, &args);
    let s = text(&out);
    assert!(out.status.success(), "{s}");
    assert_eq!(figure(&s, "effects applied twice"), 0, "{s}");
    assert!(s.contains("still running 0"), "{s}");
    assert_eq!(figure(&s, "orders"), 3000, "{s}");
    // The file is sound after the kills.
    let c = rusqlite::Connection::open(&db).unwrap();
    let check: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn an_operator_resubmits_a_failed_step_and_the_task_completes() {
    let (_d, db) = temp_db();
    // Every request refused for good: every order fails at its first step.
    let out = run(&db, &["demo", "--orders", "2", "--transient-rate", "0", "--hang-rate", "0", "--reject-rate", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let list = text(&run(&db, &["tasks", "list", "--state", "failed"]));
    assert!(list.contains("order-000001") && list.contains("order-000002"), "{list}");
    let show = text(&run(&db, &["tasks", "show", "order-000001", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&show).unwrap();
    assert_eq!(v["state"], "failed");
    let step = &v["steps"][0];
    assert_eq!(step["state"], "error");
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["kind"] == "step.error" && e["level"] == "alert"));
    let step_id = step["id"].as_str().unwrap().to_owned();

    let again = run(&db, &["steps", "resubmit", &step_id, "--actor", "ops", "--reason", "restocked"]);
    assert!(again.status.success(), "{}", text(&again));
    // The services are fixed; running the demo again finishes the resubmitted task.
    let out = run(&db, &["demo", "--orders", "2", "--no-faults"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value =
        serde_json::from_str(&text(&run(&db, &["tasks", "show", "order-000001", "--json"]))).unwrap();
    assert_eq!(v["state"], "completed");
    assert!(v["events"].as_array().unwrap().iter().any(|e| e["kind"] == "step.resubmitted" && e["actor"] == "ops"));

    // Resubmitting a processed step, or cancelling a completed task, is refused and changes nothing.
    let o = run(&db, &["steps", "resubmit", &step_id]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("only a step in error can be resubmitted"), "{}", text(&o));
    let task_id = v["id"].as_str().unwrap().to_owned();
    let o = run(&db, &["tasks", "cancel", &task_id]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("already ended (completed)"), "{}", text(&o));
    let o = run(&db, &["tasks", "cancel", "424242"]);
    assert!(text(&o).contains("not found"), "{}", text(&o));
}

#[test]
fn a_missing_corrupt_foreign_or_newer_file_gets_a_clear_error_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let o = run(&missing, &["tasks", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not found"), "{}", text(&o));
    assert!(!missing.exists(), "a read-only command created a database");

    let corrupt = dir.path().join("corrupt.db");
    let junk: Vec<u8> = (0..8192u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&corrupt, &junk).unwrap();
    for args in [&["tasks", "list"][..], &["demo", "--orders", "1"][..]] {
        let o = run(&corrupt, args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("not a SQLite database"), "{}", text(&o));
        assert!(!text(&o).contains("panicked"));
        assert_eq!(std::fs::read(&corrupt).unwrap(), junk, "the file was changed");
    }

    let foreign = dir.path().join("foreign.db");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (1);").unwrap();
    drop(c);
    let before = std::fs::read(&foreign).unwrap();
    let o = run(&foreign, &["demo", "--orders", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not a shiftboss state store"), "{}", text(&o));
    assert_eq!(std::fs::read(&foreign).unwrap(), before);

    let newer = dir.path().join("newer.db");
    assert!(run(&newer, &["demo", "--orders", "1", "--no-faults"]).status.success());
    let c = rusqlite::Connection::open(&newer).unwrap();
    c.execute_batch(&format!("PRAGMA user_version = {}", shiftboss_sqlite::SCHEMA_VERSION + 1)).unwrap();
    drop(c);
    let o = run(&newer, &["tasks", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("newer shiftboss"), "{}", text(&o));
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let (_d, db) = temp_db();
    for args in [
        &["demo", "--transient-rate", "2"][..],
        &["demo", "--orders", "0"][..],
        &["demo", "--transient-rate", "0.6", "--hang-rate", "0.6"][..],
        &["demo", "--instance-id", "has space"][..],
        &["demo", "--supervisor-interval", "soon"][..],
        &["tasks", "list", "--state", "sleeping"][..],
        &["tasks", "show"][..],
    ] {
        let o = run(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}");
    }
    assert!(!db.exists(), "a refused command created the database");
}

/// Processes whose command line contains `needle`.
fn processes_matching(needle: &str) -> usize {
    let out = Command::new("pgrep").args(["-f", "-c", needle]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn extra_scheduler_processes_share_the_demo_and_never_outlive_it() {
    let (_d, db) = temp_db();
    let id = format!("t{:08x}", fastrand::u32(..));
    // A low concurrency keeps the run long enough for the children to start and take a share.
    let args =
        ["demo", "--orders", "1000", "--no-faults", "--concurrency", "4", "--schedulers", "3", "--instance-id", &id];
    let out = run(&db, &args);
    let s = text(&out);
    assert!(out.status.success(), "{s}");
    assert!(s.contains("by 3 scheduler processes"), "{s}");
    assert_eq!(processes_matching(&format!("instance-id {id}-")), 0, "children left behind after a clean end");
    // The children claimed work too: their instance ids appear in the event log.
    let c = rusqlite::Connection::open(&db).unwrap();
    let actors: Vec<String> = c
        .prepare("SELECT DISTINCT actor FROM events WHERE kind = 'step.claimed'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(actors.iter().any(|a| a.starts_with(&format!("{id}-"))), "claims by {actors:?}");

    // Killed without warning, the demo takes its children with it (their stdin closes).
    let (_d2, db2) = temp_db();
    let id2 = format!("t{:08x}", fastrand::u32(..));
    let mut child = bin()
        .arg("--db")
        .arg(&db2)
        .args(["demo", "--orders", "5000", "--schedulers", "3", "--instance-id", &id2])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    while processes_matching(&format!("instance-id {id2}-")) < 2 {
        assert!(Instant::now() < give_up, "the extra schedulers never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    while processes_matching(&format!("instance-id {id2}-")) > 0 {
        assert!(Instant::now() < give_up, "extra schedulers outlived the killed demo");
        std::thread::sleep(Duration::from_millis(20));
    }
}
