//! The demo's ledger belongs to the store it checks (issue 25, item 1): demos of different stores
//! run one after the other in one directory reuse the same order keys, and each must count only
//! its own store's effects.

mod common;

use std::path::Path;
use std::process::Output;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The number after `label` on the summary line that starts with it.
fn figure(out: &str, label: &str) -> u64 {
    let line =
        out.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in:\n{out}"));
    let rest = line.trim_start()[label.len()..].trim_start();
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// `shiftboss [--db DB] demo --no-faults --orders N` in `dir`: it must finish every order, apply
/// no effect twice and exit 0; returns its output.
fn demo(dir: &Path, db: Option<&str>, orders: u32) -> String {
    let mut cmd = common::bin();
    if let Some(db) = db {
        cmd.args(["--db", db]);
    }
    let out = cmd
        .current_dir(dir)
        .args(["demo", "--no-faults", "--concurrency", "16", "--orders", &orders.to_string()])
        .output()
        .expect("the binary runs");
    let t = text(&out);
    assert_eq!(figure(&t, "effects applied twice"), 0, "{t}");
    assert!(out.status.success(), "the demo on {db:?} failed ({}):\n{t}", out.status);
    assert_eq!(figure(&t, "orders"), u64::from(orders), "{t}");
    t
}

#[tokio::test(flavor = "multi_thread")]
async fn a_demo_on_sqlite_then_one_on_postgresql_in_one_directory_each_apply_nothing_twice() {
    let Some(url) = common::test_db() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (schema, _store) = common::PgSchema::create(&url).await;
    let pg = schema.db_url();
    let path = dir.path().to_owned();
    tokio::task::spawn_blocking(move || {
        // The README's default store, ./shiftboss.db, and then a fresh schema: the same orders
        // (order-000001...) under other steps' idempotency keys.
        demo(&path, None, 30);
        demo(&path, Some(&pg), 30);
        // And back: the SQLite store's ledger still holds its own effects only.
        demo(&path, None, 30);
    })
    .await
    .unwrap();
    drop(schema);
}

#[test]
fn a_store_started_over_starts_its_ledger_over() {
    let dir = tempfile::tempdir().unwrap();
    demo(dir.path(), None, 20);
    // The store is removed by hand (not with --fresh), its ledger left behind: the new store
    // holds no task, so the ledger starts over with it.
    for f in ["shiftboss.db", "shiftboss.db-wal", "shiftboss.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    demo(dir.path(), None, 20);
    // --fresh starts both over too.
    let out = common::bin().current_dir(dir.path()).args(["demo", "--fresh", "--no-faults", "--orders", "20"]).output();
    let out = out.expect("the binary runs");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(figure(&text(&out), "effects applied twice"), 0);
}
