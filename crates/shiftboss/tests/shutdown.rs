//! `shiftboss serve` stops in bounded time whatever its store does: with PostgreSQL cut off or
//! silent behind a proxy of the test's own (the shared server is never touched), SIGTERM ends the
//! process within the grace period plus the time given to the last writes, the replies it could
//! not write are dropped, and their steps come back to another process. A second signal ends the
//! process at once.

mod common;

use common::proxy::{Mode, Proxy, upstream_of};
use common::*;
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{Store, SubmitTask};
use std::time::{Duration, Instant};

/// The engine's defaults: the grace period for running steps, then the time for the last writes.
const GRACE: Duration = Duration::from_secs(5);
const WRITES: Duration = Duration::from_secs(5);
/// The engine's margin to wind up (under two seconds), and room for the process's own start of
/// shutdown and exit on a loaded machine.
const SLACK: Duration = Duration::from_secs(5);

/// Waits until the service has `n` calls in flight at once.
async fn calls_in_flight(service: &Service, n: usize) {
    wait_for("calls in flight", Duration::from_secs(30), || async {
        service.keys().values().filter(|k| k.in_flight > 0).count() >= n
    })
    .await;
}

async fn stops_in_time_without_its_database(mode: Mode) {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let upstream = upstream_of(&url);
    let proxy = Proxy::start(upstream.clone()).await;
    let logs = tempfile::tempdir().unwrap();
    // Each call outlasts the cut by a second; a lease lapses three seconds after its claim.
    let service = Service::start(Duration::from_millis(1500)).await;
    let n = 8;
    let ids = submit_orders(&store, "3s", n).await;
    let mut serve = Serve::new(proxy.url(&schema.db_url(), &upstream), "cut-off")
        .service(&service.url)
        .concurrency(4)
        .spawn(logs.path());
    serve.wait_ready().await;
    calls_in_flight(&service, 4).await;

    proxy.set(mode);
    // The calls end with the database away: their replies cannot be written.
    wait_for("the calls to end", Duration::from_secs(30), || async {
        service.keys().values().all(|k| k.in_flight == 0)
    })
    .await;
    if mode == Mode::Cut {
        wait_for("a failed reply write", Duration::from_secs(30), || async {
            serve.log().contains("recording replies failed")
        })
        .await;
    }

    let asked = Instant::now();
    serve.signal("TERM");
    let status = serve.wait_exit(GRACE + WRITES + SLACK).await;
    let took = asked.elapsed();
    let log = serve.log();
    let status = status.unwrap_or_else(|| panic!("serve still running {took:?} after SIGTERM ({mode:?}):\n{log}"));
    assert!(status.success(), "a graceful stop, even with replies dropped: {status:?}\n{log}");
    assert!(log.contains("are dropped"), "the log says replies were dropped:\n{log}");
    eprintln!("{mode:?}: serve stopped {took:?} after SIGTERM");

    // A transaction the process had open when the database went silent still holds its row
    // locks on the server, which waits for the client (on a real network until TCP keepalive or
    // idle_in_transaction_session_timeout ends the session): closing the proxy's connections ends
    // those sessions here.
    proxy.set(Mode::Cut);
    // The dropped replies' steps lapse and another process (on the database itself) takes them
    // back: every task completes, no step is recorded twice, no effect repeats without a lapse.
    let mut other = Serve::new(schema.db_url(), "after").service(&service.url).spawn(logs.path());
    other.wait_ready().await;
    wait_all_completed(&store, n, Duration::from_secs(60)).await;
    let (claims, lapses) = check_every_step_once(&store, &ids, &service).await;
    assert!(lapses >= 1, "some replies were dropped, so some leases lapsed ({claims} claims)");
    assert!(other.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_in_time_when_postgresql_is_cut_off() {
    stops_in_time_without_its_database(Mode::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_in_time_when_postgresql_goes_silent() {
    stops_in_time_without_its_database(Mode::Silent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_serve_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SqliteStore::open(&db, &OpenOptions::default()).unwrap();
    store.register_workflow(&order_workflow("60s")).await.unwrap();
    for i in 0..2 {
        let t = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: format!("o-{i}"),
            workflow: "order".into(),
            version: None,
            input: serde_json::json!({}),
            priority: 0,
            actor: "test".into(),
        };
        store.submit_task(t).await.unwrap();
    }
    // Calls far longer than the grace period: a first signal alone would wait it out.
    let service = Service::start(Duration::from_secs(60)).await;
    let logs = tempfile::tempdir().unwrap();
    let mut serve = Serve::new(db.to_str().unwrap(), "twice").service(&service.url).concurrency(2).spawn(logs.path());
    serve.wait_ready().await;
    calls_in_flight(&service, 2).await;

    serve.signal("TERM");
    wait_for("serve to start stopping", Duration::from_secs(10), || async {
        serve.log().contains("shiftboss serve: stopping")
    })
    .await;
    let asked = Instant::now();
    serve.signal("INT");
    let status = serve.wait_exit(Duration::from_secs(2)).await;
    let log = serve.log();
    let status = status.unwrap_or_else(|| panic!("serve still running 2 s after a second signal:\n{log}"));
    assert_eq!(status.code(), Some(130), "exit code 128 + SIGINT:\n{log}");
    assert!(log.contains("second SIGINT: exiting at once"), "it says why:\n{log}");
    eprintln!("serve ended {:?} after the second signal", asked.elapsed());
}
