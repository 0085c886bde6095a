//! Commands ride out a store out of reach (issue 26, item 2): `tasks start` started while the
//! database is away says once what it waits for, and finishes when the database is back; with
//! `--store-wait 0s` it fails at once, as before.

mod common;

use common::proxy::{Mode, Proxy, upstream_of};
use common::*;
use shiftboss_store::Store;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waits_for_the_store_and_goes_on() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    store.register_workflow(&order_workflow("30s")).await.unwrap();
    let upstream = upstream_of(&url);
    let proxy = Proxy::start(upstream.clone()).await;
    let db = proxy.url(&schema.db_url(), &upstream);
    proxy.set(Mode::Cut);

    let mut child = bin()
        .args(["--db", &db, "--store-wait", "60s", "tasks", "start", "order", "--key", "waited-1", "--input", "{}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let said = rx.recv_timeout(Duration::from_secs(30)).expect("the command says what it waits for");
    assert!(said.starts_with("waiting up to 1m for the state store"), "{said}");

    proxy.set(Mode::Open);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(out.status.success(), "tasks start failed: {rest:?}");
    assert_eq!(rest.iter().filter(|l| l.starts_with("waiting up to")).count(), 0, "said once: {rest:?}");
    let task = store.find_task_by_key("waited-1").await.unwrap().expect("the task was submitted");
    assert_eq!(task.workflow, "order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_wait_fails_at_once() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let upstream = upstream_of(&url);
    let proxy = Proxy::start(upstream.clone()).await;
    let db = proxy.url(&schema.db_url(), &upstream);
    proxy.set(Mode::Cut);
    let out = bin().args(["--db", &db, "--store-wait", "0s", "tasks", "list"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("state store unavailable"), "{stderr}");
    assert!(!stderr.contains("waiting up to"), "{stderr}");
}
