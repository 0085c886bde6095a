//! Real `shiftboss serve` OS processes sharing one PostgreSQL schema (issue 3): several schedulers
//! at once, a scheduler killed with kill -9 (restarted under its id, or left dead), and two
//! supervisors electing one leader, then another when the leader's process is killed.
//!
//! Work is submitted through the library; the processes run it against a test service on loopback
//! that records every request per idempotency key; the state is checked through the store, the
//! service, and (for the leader row) psql. Each test has a schema of its own, dropped at the end.

mod common;

use common::*;
use shiftboss_core::{StepId, TaskState};
use shiftboss_store::event_kind::{STEP_CLAIMED, STEP_EXPIRED, STEP_RELEASED};
use shiftboss_store::{Store, TaskDetail};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The longest any test here waits for its tasks; they take seconds.
const WAIT: Duration = Duration::from_secs(45);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_serve_processes_share_one_schema_and_run_each_step_once() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let logs = tempfile::tempdir().unwrap();
    let service = Service::start(Duration::from_millis(10)).await;
    let started = Instant::now();
    let mut procs: Vec<ServeProc> = ["p1", "p2", "p3"]
        .iter()
        .map(|id| Serve::new(schema.db_url(), id).service(&service.url).concurrency(4).spawn(logs.path()))
        .collect();
    // Submitted once all three poll, so that each has a fair chance at the work.
    for p in &mut procs {
        p.wait_ready().await;
    }
    let n = 150;
    let ids = submit_orders(&store, "2s", n).await;
    wait_all_completed(&store, n, WAIT).await;
    let ran = started.elapsed();
    for p in &mut procs {
        assert!(p.is_running(), "{} is still up", p.instance);
        assert!(p.terminate().success(), "{} stops cleanly on SIGTERM", p.instance);
    }

    let (claims, lapses) = check_every_step_once(&store, &ids, &service).await;
    assert_eq!((claims, lapses), (3 * n as u64, 0), "one claim per step, no lease lapsed");
    assert!(service.keys().values().all(|k| k.requests == 1), "each step reached the service once");
    let s = store.summarize().await.unwrap();
    assert_eq!((s.expiries, s.releases, s.rejected_replies), (0, 0, 0), "{s:?}");

    let mut claims_by: std::collections::HashMap<String, usize> = Default::default();
    for d in details(&store, &ids).await {
        for e in d.events.iter().filter(|e| e.kind == STEP_CLAIMED) {
            *claims_by.entry(e.actor.clone()).or_default() += 1;
        }
    }
    let who: HashSet<&str> = claims_by.keys().map(String::as_str).collect();
    assert_eq!(who, HashSet::from(["p1", "p2", "p3"]), "every process claimed work: {claims_by:?}");
    eprintln!("3 processes, {n} tasks: {ran:?}; claims per process {claims_by:?}");
}

/// Drops from `held` the steps whose reply the victim had already sent when it was killed: its
/// COMMIT can still land after the kill (the server reads what is in its socket), and such a step
/// ends Processed by the victim, never released nor expired, with nothing for the test to check.
fn without_landed_replies(held: &mut Vec<(StepId, i64)>, ds: &[TaskDetail], victim: &str) {
    let processed = events_by_step(ds, shiftboss_store::event_kind::STEP_PROCESSED);
    let (released, expired) = (events_by_step(ds, STEP_RELEASED), events_by_step(ds, STEP_EXPIRED));
    held.retain(|(step, _)| {
        let taken_back = released.contains_key(step) || expired.contains_key(step);
        let landed = processed.get(step).is_some_and(|es| es.iter().any(|e| e.actor == victim));
        taken_back || !landed
    });
    assert!(!held.is_empty(), "{victim} held steps whose replies had not landed, or this test proves nothing");
}

/// Kills `victim` (kill -9) while it holds steps and work is left; returns the steps it held
/// (id, complete_by), read after the kill, when nothing can change them but a release or a sweep.
async fn kill_while_holding(
    store: &dyn Store,
    schema: &PgSchema,
    victim: &mut ServeProc,
    n: usize,
) -> Vec<(StepId, i64)> {
    let name = victim.instance.clone();
    wait_for("work to flow, with steps held by the victim", WAIT, || {
        let held = schema.held_by(&name).len();
        async move { tasks_in(store, TaskState::Completed).await >= 5 && held > 0 }
    })
    .await;
    victim.kill9();
    let held = schema.held_by(&name);
    assert!(!held.is_empty(), "{name} held steps when it was killed, or this test proves nothing");
    assert!(tasks_in(store, TaskState::Completed).await < n as u64, "killed with work left");
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_and_restarted_under_its_id_releases_its_steps_at_once() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let logs = tempfile::tempdir().unwrap();
    // Slow answers keep steps held, so that the kill always finds some.
    let service = Service::start(Duration::from_millis(150)).await;
    let serve = |id: &str| Serve::new(schema.db_url(), id).service(&service.url).concurrency(8);
    let mut p1 = serve("p1").spawn(logs.path());
    let mut p2 = serve("p2").spawn(logs.path());
    p1.wait_ready().await;
    p2.wait_ready().await;
    let n = 60;
    // Leases long enough that the restarted p1 (a new process: start, connect, migrate check)
    // releases its steps before they lapse even on a loaded machine; with 2 s, a restart slowed by
    // a parallel build let the other supervisor expire one first (seen once in CI).
    let ids = submit_orders(&store, "6s", n).await;

    let held = kill_while_holding(&store, &schema, &mut p1, n).await;
    let killed_at = Instant::now();
    let mut p1 = serve("p1").spawn(logs.path());
    wait_for("the restarted p1 to release what it held", WAIT, || {
        let still = schema.held_by("p1").iter().filter(|h| held.contains(h)).count();
        async move { still == 0 }
    })
    .await;
    let released_after = killed_at.elapsed();
    wait_all_completed(&store, n, WAIT).await;
    assert!(p1.terminate().success());
    assert!(p2.terminate().success());

    let ds = details(&store, &ids).await;
    let mut held = held;
    without_landed_replies(&mut held, &ds, "p1");
    let released = events_by_step(&ds, STEP_RELEASED);
    let expired = events_by_step(&ds, STEP_EXPIRED);
    for (step, complete_by) in &held {
        let r = released.get(step).unwrap_or_else(|| panic!("step {step} held by p1 was released at its restart"));
        assert_eq!(r.len(), 1, "step {step}");
        assert_eq!(r[0].actor, "p1", "step {step}: released by the restarted p1");
        assert!(r[0].at.0 < *complete_by, "step {step}: back at once, before its lease would have lapsed");
        assert!(!expired.contains_key(step), "step {step}: not left to the supervisor");
    }
    let released_total: usize = released.values().map(Vec::len).sum();
    assert_eq!(released_total, held.len(), "only what p1 held was released");
    let (_, lapses) = check_every_step_once(&store, &ids, &service).await;
    assert_eq!(lapses, held.len() as u64, "no other lapse");
    eprintln!("p1 held {} steps at the kill; released {released_after:?} after it", held.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_for_good_has_its_steps_expired_by_another_supervisor() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let logs = tempfile::tempdir().unwrap();
    let service = Service::start(Duration::from_millis(150)).await;
    let serve = |id: &str| Serve::new(schema.db_url(), id).service(&service.url).concurrency(8);
    let mut p1 = serve("p1").spawn(logs.path());
    let mut p2 = serve("p2").spawn(logs.path());
    p1.wait_ready().await;
    p2.wait_ready().await;
    let n = 60;
    let ids = submit_orders(&store, "1s", n).await;

    let held = kill_while_holding(&store, &schema, &mut p1, n).await;
    let killed_at = Instant::now();
    wait_all_completed(&store, n, WAIT).await;
    let finished_after = killed_at.elapsed();
    assert!(p2.is_running());
    assert!(p2.terminate().success());

    let ds = details(&store, &ids).await;
    let mut held = held;
    without_landed_replies(&mut held, &ds, "p1");
    let expired = events_by_step(&ds, STEP_EXPIRED);
    for (step, complete_by) in &held {
        let e = expired.get(step).unwrap_or_else(|| panic!("step {step} held by the dead p1 was expired"));
        assert_eq!(e.len(), 1, "step {step} expired once");
        assert_eq!(e[0].actor, "supervisor:p2", "step {step}: swept by the supervisor of the live process");
        assert!(e[0].at.0 >= *complete_by, "step {step}: swept only once its complete-by passed");
    }
    assert!(events_by_step(&ds, STEP_RELEASED).is_empty(), "nothing was released: p1 never came back");
    let (_, lapses) = check_every_step_once(&store, &ids, &service).await;
    assert_eq!(lapses, held.len() as u64, "no other lapse");
    eprintln!("p1 held {} steps at the kill; all tasks done {finished_after:?} after it", held.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_supervisors_elect_one_leader_and_another_when_its_process_is_killed() {
    let Some(url) = test_db() else { return };
    let (schema, store) = PgSchema::create(&url).await;
    let logs = tempfile::tempdir().unwrap();
    let service = Service::start(Duration::from_millis(100)).await;
    let ttl = Duration::from_secs(1); // Serve's default --leader-ttl
    let mut s1 = Serve::new(schema.db_url(), "s1").roles("supervisor").spawn(logs.path());
    let mut s2 = Serve::new(schema.db_url(), "s2").roles("supervisor").spawn(logs.path());
    let scheduler = |id: &str| Serve::new(schema.db_url(), id).roles("scheduler").service(&service.url).concurrency(8);
    let mut k1 = scheduler("k1").spawn(logs.path());
    s1.wait_ready().await;
    s2.wait_ready().await;
    k1.wait_ready().await;

    wait_for("a supervisor to take the lease", WAIT, || {
        let l = schema.leader();
        async move { l.is_some() }
    })
    .await;
    let (holder, term) = schema.leader().unwrap();
    assert!(holder == "s1" || holder == "s2", "the leader is a supervisor process, not {holder}");
    // While both live, the lease stays with one holder in one term, across its renewals (every third
    // of the TTL).
    let watch_until = Instant::now() + ttl;
    while Instant::now() < watch_until {
        assert_eq!(schema.leader(), Some((holder.clone(), term)), "one leader at a time, renewing its term");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (leader, other) = if holder == "s1" { (&mut s1, &mut s2) } else { (&mut s2, &mut s1) };
    leader.kill9();
    let killed_at = Instant::now();
    let other_name = other.instance.clone();
    wait_for("the other supervisor to take over", WAIT, || {
        let l = schema.leader();
        let other_name = other_name.clone();
        async move { l.is_some_and(|(h, t)| h == other_name && t > term) }
    })
    .await;
    let takeover = killed_at.elapsed();
    let (_, new_term) = schema.leader().unwrap();
    assert!(takeover < ttl * 3, "took over {takeover:?} after the kill: about the lease's {ttl:?}");

    // Work whose leases lapse now must be swept by the new leader: a scheduler killed while
    // holding steps, and another scheduler to finish them.
    let n = 40;
    let ids = submit_orders(&store, "1s", n).await;
    let held = kill_while_holding(&store, &schema, &mut k1, n).await;
    let mut k2 = scheduler("k2").spawn(logs.path());
    wait_all_completed(&store, n, WAIT).await;
    assert_eq!(schema.leader(), Some((other_name.clone(), new_term)), "the new leader kept its term");
    assert!(other.is_running());
    assert!(other.terminate().success());
    assert!(k2.terminate().success());

    let ds = details(&store, &ids).await;
    let mut held = held;
    without_landed_replies(&mut held, &ds, "p1");
    let expired = events_by_step(&ds, STEP_EXPIRED);
    let sweeper = format!("supervisor:{other_name}");
    for (step, complete_by) in &held {
        let e = expired.get(step).unwrap_or_else(|| panic!("step {step} held by the dead k1 was expired"));
        assert_eq!(e.len(), 1, "step {step} expired once");
        assert_eq!(e[0].actor, sweeper, "step {step}: swept by the new leader");
        assert!(e[0].at.0 >= *complete_by, "step {step}: swept only once its complete-by passed");
    }
    let (_, lapses) = check_every_step_once(&store, &ids, &service).await;
    assert_eq!(lapses, held.len() as u64, "no other lapse");
    eprintln!(
        "leader {holder} (term {term}) killed; {other_name} took over in term {new_term} after {takeover:?}; \
         {} steps of the killed scheduler swept",
        held.len()
    );
}

/// One POST to the test service, on a connection of its own, on a thread of its own.
fn post(url: &str, key: &str) -> std::thread::JoinHandle<String> {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").to_owned();
    let key = key.to_owned();
    std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let req = format!(
            "POST /a HTTP/1.1\r\nHost: {addr}\r\nIdempotency-Key: {key}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
}

/// The overlap flag the tests above rely on can fail: two requests for one key at once are flagged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_service_flags_a_step_handled_twice_at_once() {
    let service = Service::start(Duration::from_millis(300)).await;
    let (a, b) = (post(&service.url, "k"), post(&service.url, "k"));
    assert!(a.join().unwrap().contains("{\"ok\":true}"));
    assert!(b.join().unwrap().contains("{\"ok\":true}"));
    let c = post(&service.url, "j");
    c.join().unwrap();
    let d = post(&service.url, "j");
    d.join().unwrap();
    assert_eq!(service.overlapping_keys(), vec!["k".to_owned()], "k ran twice at once, j twice one after the other");
    assert_eq!((service.requests("k"), service.requests("j"), service.total_requests()), (2, 2, 4));
}
