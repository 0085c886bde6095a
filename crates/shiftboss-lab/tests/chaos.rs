//! `shiftboss-lab chaos`, short: the harness run on a SQLite file and on PostgreSQL must pass its
//! own checks with faults really injected; and the fault points really kill a lab worker where they
//! say (the product binary, built without crash injection, has no such points: see
//! `crates/shiftboss/tests/no_lab.rs`).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::time::Duration;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The first number after `label` on the summary line that starts with it.
fn figure(out: &str, label: &str) -> u64 {
    let line =
        out.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in:\n{out}"));
    let rest = line.trim_start()[label.len()..].trim_start();
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// Runs the harness and checks that it passed and that faults were injected, so that a pass
/// means something.
fn chaos(db: Option<&str>, workdir: &std::path::Path, args: &[&str]) -> String {
    let mut cmd = common::bin();
    if let Some(db) = db {
        cmd.args(["--db", db]);
    }
    let out = cmd
        .args(["chaos", "--seed", "7", "--timeout", "4m", "--workdir"])
        .arg(workdir)
        .args(args)
        .output()
        .expect("the binary runs");
    let t = text(&out);
    assert!(out.status.success(), "chaos failed ({}):\n{t}", out.status);
    assert!(t.contains("result                PASS"), "{t}");
    let kills = figure(&t, "kills (SIGKILL)");
    assert!(kills >= 1, "no worker was killed:\n{t}");
    assert_eq!(figure(&t, "lost"), 0);
    assert_eq!(figure(&t, "effects applied twice"), 0);
    assert_eq!(figure(&t, "notifications lost"), 0, "every order's messages arrived:\n{t}");
    assert!(t.contains(" 0 dead, 0 pending"), "{t}");
    t
}

#[test]
fn chaos_on_a_sqlite_file_passes_with_kills_during_writes() {
    let dir = tempfile::tempdir().unwrap();
    let t = chaos(None, dir.path(), &["--tasks", "400", "--fault-every", "400ms", "--duration", "60s"]);
    assert!(t.contains("integrity_check       ok"), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn chaos_on_postgresql_passes_with_three_workers_and_forced_leader_changes() {
    let Some(url) = common::test_db() else { return };
    let dir = tempfile::tempdir().unwrap();
    let t = tokio::task::spawn_blocking(move || {
        chaos(Some(&url), dir.path(), &["--tasks", "1000", "--fault-every", "600ms", "--duration", "90s"])
    })
    .await
    .unwrap();
    assert!(figure(&t, "lease expiries") > 0, "no lease lapsed, so nothing was checked:\n{t}");
}

#[test]
fn a_process_armed_with_a_fault_point_kills_itself_there() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("armed.db");
    // The first write transaction of a worker (creating the store, taking back its claims, its
    // heartbeat) reaches before-commit at once.
    let mut child = common::bin()
        .arg("--db")
        .arg(&db)
        .args(["worker", "--instance-id", "armed"])
        .env("SHIFTBOSS_FAULT", "before-commit@1")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("an armed worker did not die at its fault point");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(9), "{status}");
}
