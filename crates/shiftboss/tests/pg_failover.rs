//! A replicated PostgreSQL fails over (issue 26): a primary and a synchronous streaming standby of
//! the test's own on spare loopback ports, `serve` processes and a submitter on a URL naming both,
//! the primary crashed (SIGKILL of its processes) or frozen (SIGSTOP), the standby promoted.
//! Every acknowledged task finishes; the service sees one idempotency key per step of work, each
//! the key made from the work; the first step completes within the store's bounds after the
//! promotion; a `serve` sent SIGTERM while the store is frozen ends within its grace plus the
//! bound. The clusters are stopped and removed when the test ends, also when it fails.
//!
//! Under root the server binaries run as the `postgres` user (initdb refuses root). Without them (no
//! `/usr/lib/postgresql/*/bin/initdb`), the test says so and passes outside CI, fails under CI.
//! `SHIFTBOSS_FAILOVERS=N` repeats each case N times and prints the promotion-to-first-step times.

mod common;

use common::*;
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::idempotency::step_key;
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_store::{Store, SubmitTask};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;

const STORE_TIMEOUT: &str = "2s";
const CONNECT_TIMEOUT: &str = "1s";
/// The bound on a stall after the promotion: a call on the old primary given up (store timeout),
/// a connect to it given up (connect timeout), and what a loaded machine adds.
const PROGRESS_BOUND: Duration = Duration::from_secs(2 + 1 + 5);
const SCHEMA: &str = "sbfo";
const ORDERS: usize = 40;
/// Submissions in the asynchronous case after the standby is cut off, at once.
const BURST: usize = 40;

fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// True when the test runs as root: initdb refuses root, so the server binaries then run as
/// `postgres` (the packages' user); otherwise as the test's own user.
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Runs a server binary (as `postgres` under root); panics with its output when it fails.
fn as_postgres(bin: &Path, tool: &str, args: &[&str]) {
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(tool));
        c
    } else {
        Command::new(bin.join(tool))
    };
    let out = c.args(args).output().expect("the server binary runs");
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The postmaster's pid and its children's: every process of one cluster.
fn cluster_pids(data: &Path) -> Vec<i32> {
    let Ok(text) = std::fs::read_to_string(data.join("postmaster.pid")) else { return Vec::new() };
    let Some(main) = text.lines().next().and_then(|l| l.trim().parse::<i32>().ok()) else { return Vec::new() };
    let mut pids = vec![main];
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // The field after the command (which may hold spaces, inside parentheses) is the state,
        // then the parent's pid.
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        if after.split_whitespace().nth(1).and_then(|p| p.parse::<i32>().ok()) == Some(main) {
            pids.push(pid);
        }
    }
    pids
}

fn signal_all(pids: &[i32], sig: &str) {
    for p in pids {
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), &p.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A primary and a synchronous standby in a directory of the test's own; stopped and removed on drop.
struct Clusters {
    bin: PathBuf,
    dir: PathBuf,
    primary_port: u16,
    standby_port: u16,
}

impl Clusters {
    fn primary(&self) -> PathBuf {
        self.dir.join("primary")
    }
    fn standby(&self) -> PathBuf {
        self.dir.join("standby")
    }

    /// `synchronous`: whether commits wait for the standby.
    fn start(bin: PathBuf, synchronous: bool) -> Clusters {
        let dir = std::env::temp_dir().join(format!("sbfo-{}-{}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let c = Clusters { bin, dir, primary_port: free_port(), standby_port: free_port() };
        if is_root() {
            assert!(Command::new("chown").args(["postgres:"]).arg(&c.dir).status().unwrap().success());
        }
        let (p, s) = (c.primary(), c.standby());
        let (ps, ss) = (p.to_str().unwrap(), s.to_str().unwrap());
        as_postgres(&c.bin, "initdb", &["-D", ps, "-U", "postgres", "-A", "trust", "--no-sync"]);
        let conf = format!(
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\nwal_level = replica\n\
             max_wal_senders = 5\nsynchronous_standby_names = '{}'\nsynchronous_commit = on\nfsync = off\n\
             max_connections = 60\nshared_buffers = 32MB\n",
            c.primary_port,
            c.dir.display(),
            if synchronous { "standby1" } else { "" }
        );
        append(&p.join("postgresql.conf"), &conf);
        c.pg_ctl(&p, "start");
        let conninfo = format!("host=127.0.0.1 port={} user=postgres application_name=standby1", c.primary_port);
        as_postgres(&c.bin, "pg_basebackup", &["-D", ss, "-R", "-X", "stream", "-d", &conninfo]);
        // The standby, once promoted, stands alone: it must not wait for a standby of its own.
        append(&s.join("postgresql.conf"), &format!("port = {}\nsynchronous_standby_names = ''\n", c.standby_port));
        append(&s.join("postgresql.auto.conf"), &format!("primary_conninfo = '{conninfo}'\n"));
        c.pg_ctl(&s, "start");
        c
    }

    fn pg_ctl(&self, data: &Path, what: &str) {
        let log = data.with_extension("log");
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-t", "60", what],
        );
    }

    fn url(&self, port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }

    /// The URL the processes use: both hosts, the writable one chosen.
    fn multi_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.primary_port, self.standby_port
        )
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        for data in [self.primary(), self.standby()] {
            let pids = cluster_pids(&data);
            signal_all(&pids, "CONT");
            signal_all(&pids, "KILL");
        }
        if std::thread::panicking() {
            for log in ["primary.log", "standby.log"] {
                let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                eprintln!("---- {log} ----\n{}", lines[lines.len().saturating_sub(20)..].join("\n"));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// What the application was told at submission: the key, what it sent, and the task's id.
#[derive(Clone)]
struct Acked {
    key: String,
    input: serde_json::Value,
    id: TaskId,
}

fn order(key: &str, input: &serde_json::Value) -> SubmitTask {
    submission(key, "order", input.clone())
}

/// The highest id of each table whose ids clients see (tasks, steps, events), on `url`.
async fn max_ids(url: &str) -> [i64; 3] {
    let mut out = [0; 3];
    for (i, table) in ["tasks", "steps", "events"].iter().enumerate() {
        out[i] = query_i64(url, &format!("SELECT coalesce(max(id), 0) FROM {SCHEMA}.{table}")).await.unwrap();
    }
    out
}

async fn query_i64(url: &str, sql: &str) -> Option<i64> {
    let connect = tokio_postgres::connect(url, NoTls);
    let (client, conn) = tokio::time::timeout(Duration::from_secs(2), connect).await.ok()?.ok()?;
    tokio::spawn(conn);
    let row = tokio::time::timeout(Duration::from_secs(2), client.query_one(sql, &[])).await.ok()?.ok()?;
    Some(row.get(0))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Crash,
    Freeze,
    /// Asynchronous replication, the standby cut off (the primary's WAL sender stopped) while the primary
    /// acknowledges more, then the primary crashed: the promoted standby lacks acknowledged work.
    AsyncCrash,
}

struct Outcome {
    /// From the promotion to the first step completed after it.
    first_step: Duration,
    /// Acknowledged tasks the promoted standby lacked.
    lost: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_primary_fails_over() {
    failovers(Fault::Crash).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_primary_fails_over() {
    failovers(Fault::Freeze).await;
}

/// The lost tasks, submitted again under their keys, apply nothing twice: their steps call the
/// service with the keys they used before the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_work_resubmitted_under_its_keys_applies_nothing_twice() {
    failovers(Fault::AsyncCrash).await;
}

async fn failovers(fault: Fault) {
    let Some(bin) = pg_bin() else {
        assert!(!under_ci(), "the failover test needs PostgreSQL's server binaries under CI");
        eprintln!("SKIPPED: no /usr/lib/postgresql/*/bin/initdb");
        return;
    };
    let runs: usize = std::env::var("SHIFTBOSS_FAILOVERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut times = Vec::new();
    let mut lost = 0;
    for _ in 0..runs {
        let o = one_failover(&bin, fault).await;
        times.push(o.first_step);
        lost += o.lost;
    }
    times.sort();
    eprintln!(
        "failover ({fault:?}, {runs} runs): promotion to first step completed p50 {:?}, max {:?}; acknowledged \
         tasks missing after promotion: {lost}; effects applied twice: 0",
        times[times.len() / 2],
        times[times.len() - 1]
    );
}

async fn one_failover(bin: &Path, fault: Fault) -> Outcome {
    let clusters = Clusters::start(bin.to_path_buf(), fault != Fault::AsyncCrash);
    let logs = tempfile::tempdir().unwrap();
    let opts = PgOptions {
        schema: SCHEMA.into(),
        pool_size: 4,
        store_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&clusters.multi_url(), &opts).await.unwrap());
    store.register_workflow(&order_workflow("5s")).await.unwrap();
    // Item 5 against a real standby: commits wait for it.
    let r = store.replication().await.unwrap().unwrap();
    if fault == Fault::AsyncCrash {
        assert_eq!((r.standbys, r.synchronous_standbys), (1, 0), "{r:?}");
        assert!(r.warning().is_some(), "an asynchronous standby is warned of: {r:?}");
    } else {
        assert_eq!((r.standbys, r.synchronous_standbys, r.warning()), (1, 1, None), "{r:?}");
    }

    let service = Service::start(Duration::from_millis(20)).await;
    let db = format!("{}&schema={SCHEMA}", clusters.multi_url());
    let mut serves: Vec<ServeProc> = (0..3)
        .map(|i| {
            Serve::new(db.clone(), &format!("fo-{i}"))
                .service(&service.url)
                .arg("--store-timeout")
                .arg(STORE_TIMEOUT)
                .arg("--store-connect")
                .arg(CONNECT_TIMEOUT)
                .spawn(logs.path())
        })
        .collect();
    for s in &mut serves {
        s.wait_ready().await;
    }

    // The submitter: orders one after another, each tried until acknowledged, through the fault.
    let acknowledged: Arc<std::sync::Mutex<Vec<Acked>>> = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (store, acknowledged, stop) = (store.clone(), acknowledged.clone(), stop.clone());
        tokio::spawn(async move {
            for n in 0..ORDERS {
                let key = format!("o-{n}");
                let input = json!({"n": n});
                let id = loop {
                    match store.submit_task(order(&key, &input)).await {
                        Ok(s) => break s.task_id,
                        Err(e) if e.is_transient() && !stop.load(Ordering::Relaxed) => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(e) => panic!("submitting {key}: {e}"),
                    }
                };
                acknowledged.lock().unwrap().push(Acked { key, input, id });
                // Slower than the schedulers: submissions go on across the fault.
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    let primary_url = clusters.url(clusters.primary_port);
    let standby_url = clusters.url(clusters.standby_port);
    let processed = format!("SELECT count(*) FROM {SCHEMA}.steps WHERE state = 'processed'");
    wait_for("steps done before the fault", Duration::from_secs(60), || async {
        query_i64(&primary_url, &processed).await.unwrap_or(0) >= 6
    })
    .await;

    if fault == Fault::AsyncCrash {
        // The primary stops sending to the standby (its WAL sender is stopped, so nothing more
        // reaches the socket either) and goes on acknowledging without it.
        let sender: Vec<i32> = cluster_pids(&clusters.primary())
            .into_iter()
            .filter(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("walsender")))
            .collect();
        assert_eq!(sender.len(), 1, "the primary's WAL sender");
        signal_all(&sender, "STOP");
        let cut = query_i64(&primary_url, &processed).await.unwrap();
        let submitted = acknowledged.lock().unwrap().len();
        wait_for("work the standby does not have", Duration::from_secs(60), || async {
            query_i64(&primary_url, &processed).await.unwrap_or(0) >= cut + 10
                && acknowledged.lock().unwrap().len() >= submitted + 5
        })
        .await;
        // A burst the standby never sees: more ids than a sequence's WAL record reserves ahead
        // (32), so that a promoted standby whose sequences were not raised would hand these ids
        // to other tasks.
        for n in 0..BURST {
            let key = format!("burst-{n}");
            let input = json!({"burst": n});
            let id = store.submit_task(order(&key, &input)).await.unwrap().task_id;
            acknowledged.lock().unwrap().push(Acked { key, input, id });
        }
    }
    // The last ids the old primary handed out, lost to the standby or not.
    let old_max = max_ids(&primary_url).await;
    let pids = cluster_pids(&clusters.primary());
    assert!(pids.len() > 2, "the primary's processes: {pids:?}");
    match fault {
        Fault::Crash | Fault::AsyncCrash => signal_all(&pids, "KILL"),
        Fault::Freeze => signal_all(&pids, "STOP"),
    }
    // A serve process stopped while the store does not answer ends within its grace plus the bound.
    let mut stopped = serves.pop().unwrap();
    let t = Instant::now();
    stopped.signal("TERM");
    let exited = stopped.wait_exit(Duration::from_secs(30)).await;
    let grace = Duration::from_secs(10);
    assert!(exited.is_some(), "serve did not end within 30 s of SIGTERM while the store was away");
    assert!(t.elapsed() < grace + PROGRESS_BOUND, "serve ended {:?} after SIGTERM", t.elapsed());
    eprintln!("serve ended {:?} after SIGTERM with the primary {fault:?}", t.elapsed());

    let before = query_i64(&standby_url, &processed).await.expect("the standby answers reads");
    clusters.pg_ctl(&clusters.standby(), "promote");
    let promoted = Instant::now();
    let mut first_step = None;
    while promoted.elapsed() < Duration::from_secs(60) {
        if query_i64(&standby_url, &processed).await.unwrap_or(before) > before {
            first_step = Some(promoted.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_step = first_step.expect("a step completed after the promotion");
    assert!(first_step < PROGRESS_BOUND, "the first step completed {first_step:?} after the promotion");

    submitter.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let acked = acknowledged.lock().unwrap().clone();
    let extra = if fault == Fault::AsyncCrash { BURST } else { 0 };
    assert_eq!(acked.len(), ORDERS + extra);
    let keys: Vec<String> = acked.iter().map(|a| a.key.clone()).collect();
    // What an application does after a failover that may have lost commits: submit again what it
    // was told of, under the same keys. Under synchronous replication each finds its task.
    let mut lost = 0;
    let mut lost_ids = Vec::new();
    for a in &acked {
        let s = store.submit_task(order(&a.key, &a.input)).await.unwrap();
        if s.created {
            lost += 1;
            lost_ids.push(s.task_id.0);
        } else {
            assert_eq!(s.task_id, a.id, "{} names the task it was acknowledged with", a.key);
        }
    }
    // Item 4: an id a client was given never names another task, even one the promoted standby
    // lost; every id handed out after the promotion is above every id of the old primary's.
    for a in &acked {
        let sql = format!("SELECT count(*) FROM {SCHEMA}.tasks WHERE id = {} AND task_key <> '{}'", a.id.0, a.key);
        assert_eq!(query_i64(&standby_url, &sql).await, Some(0), "task id {} of {} names another task", a.id, a.key);
    }
    if !lost_ids.is_empty() {
        let list = lost_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let mins = [
            format!("SELECT min(id) FROM {SCHEMA}.tasks WHERE id IN ({list})"),
            format!("SELECT min(id) FROM {SCHEMA}.steps WHERE task_id IN ({list})"),
            format!("SELECT min(id) FROM {SCHEMA}.events WHERE task_id IN ({list})"),
        ];
        for (sql, old) in mins.iter().zip(old_max) {
            let new = query_i64(&standby_url, sql).await.unwrap();
            assert!(
                new > old,
                "an id drawn after the promotion ({new}) is not above the old primary's last ({old}): {sql}"
            );
        }
    }
    eprintln!("{fault:?}: {lost} acknowledged tasks were missing after the promotion and were submitted again");
    if fault == Fault::AsyncCrash {
        assert!(lost >= 5, "the standby was cut off while 5 submissions were acknowledged; {lost} were lost");
    } else {
        assert_eq!(lost, 0, "synchronous replication lost acknowledged tasks");
    }
    let completed = format!("SELECT count(*) FROM {SCHEMA}.tasks WHERE state = 'completed'");
    wait_for("every acknowledged order completed", Duration::from_secs(90), || async {
        query_i64(&standby_url, &completed).await.unwrap_or(0) == acked.len() as i64
    })
    .await;

    // The service's ledger: one key per step of work, each the one made from the work.
    let seen = service.keys();
    let expected: std::collections::HashSet<String> =
        keys.iter().flat_map(|k| ["a", "b", "c"].map(|s| step_key(k, s, 0))).collect();
    let unknown: Vec<&String> = seen.keys().filter(|k| !expected.contains(*k)).collect();
    assert!(unknown.is_empty(), "keys that name no step of work: {unknown:?}");
    assert_eq!(seen.len(), expected.len(), "every step of work called its service under one key");
    assert!(service.overlapping_keys().is_empty(), "a step ran twice at once");
    let again = seen.values().filter(|k| k.requests > 1).count();
    eprintln!("{fault:?}: {again} steps called their service more than once, each time under its one key");
    for s in &mut serves {
        assert!(s.is_running(), "serve {} exited:\n{}", s.instance, s.log());
    }
    drop(serves);
    drop(store);
    Outcome { first_step, lost }
}

/// The demo through a failover that loses commits, as a user meets one: `shiftboss demo` with a
/// `serve` child on an asynchronous standby's primary, the standby cut off while the demo runs on,
/// the primary crashed, the standby promoted. The demo rides out the outage, finds that the store
/// lacks orders it acknowledged, submits them again under their keys, and ends with every order
/// done and no effect applied twice (its services' ledger counts effects per order, whatever the
/// key). Before, it waited for the lost orders for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_rides_out_a_failover_that_lost_orders() {
    let Some(bin) = pg_bin() else {
        assert!(!under_ci(), "the failover test needs PostgreSQL's server binaries under CI");
        eprintln!("SKIPPED: no /usr/lib/postgresql/*/bin/initdb");
        return;
    };
    const DEMO_ORDERS: i64 = 1000;
    let clusters = Clusters::start(bin, false);
    // The standby streams before the demo starts: the cut below stops its one WAL sender.
    let streaming = Instant::now();
    while wal_senders(&clusters).is_empty() {
        assert!(streaming.elapsed() < Duration::from_secs(60), "the standby did not stream within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = format!("{}&schema=demo", clusters.multi_url());
    let demo = common::bin()
        .args([
            "--db",
            &db,
            "--store-wait",
            "60s",
            "--store-timeout",
            STORE_TIMEOUT,
            "--store-connect",
            CONNECT_TIMEOUT,
        ])
        .args(["demo", "--orders", &DEMO_ORDERS.to_string(), "--schedulers", "2", "--no-faults", "--concurrency", "8"])
        .current_dir(dir.path())
        .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let mut demo = KillOnDrop(demo);
    let primary_url = clusters.url(clusters.primary_port);
    let standby_url = clusters.url(clusters.standby_port);
    // The standby is cut off while the demo still submits its orders, so that the promoted
    // standby lacks orders the demo was told were submitted, and steps that ran.
    wait_for("the demo's first orders", Duration::from_secs(120), || async {
        query_i64(&primary_url, "SELECT count(*) FROM demo.tasks").await.unwrap_or(0) >= 20
    })
    .await;
    let sender = wal_senders(&clusters);
    assert_eq!(sender.len(), 1, "the primary's WAL sender");
    signal_all(&sender, "STOP");
    let processed = "SELECT count(*) FROM demo.steps WHERE state = 'processed'";
    let tasks_at_cut = query_i64(&primary_url, "SELECT count(*) FROM demo.tasks").await.unwrap();
    wait_for("orders and steps the standby does not have", Duration::from_secs(60), || async {
        query_i64(&primary_url, processed).await.unwrap_or(0) >= 60
            && query_i64(&primary_url, "SELECT count(*) FROM demo.tasks").await.unwrap_or(0) >= tasks_at_cut + 20
    })
    .await;
    let on_primary = query_i64(&primary_url, "SELECT count(*) FROM demo.tasks").await.unwrap();
    signal_all(&cluster_pids(&clusters.primary()), "KILL");
    // Read before the promotion: once promoted, the standby takes the demo's next orders.
    let on_standby = query_i64(&standby_url, "SELECT count(*) FROM demo.tasks").await.unwrap();
    clusters.pg_ctl(&clusters.standby(), "promote");

    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = demo.0.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stdout = std::fs::read_to_string(dir.path().join("stdout")).unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    let status = status.unwrap_or_else(|| panic!("the demo did not end within 300 s:\n{stdout}\n{stderr}"));
    assert!(status.success(), "the demo failed ({status}):\n{stdout}\n{stderr}");
    eprintln!("the demo: {on_primary} orders on the primary just before the crash, {on_standby} on the standby");
    assert!(on_standby < on_primary, "the promoted standby lacks orders ({on_standby} of {on_primary})");
    assert!(
        stderr.contains("submitted again under their keys"),
        "the demo says it submitted the lost orders again:\n{stderr}"
    );
    assert!(stdout.contains("effects applied twice 0;"), "no effect applied twice:\n{stdout}");
    assert!(
        stdout.contains(&format!("orders                {DEMO_ORDERS} (")),
        "every order is in the store:\n{stdout}"
    );
    let done = "SELECT count(*) FROM demo.tasks WHERE state IN ('completed', 'compensated', 'failed')";
    assert_eq!(query_i64(&standby_url, done).await, Some(DEMO_ORDERS), "every order done");
}

/// A child process killed when the test ends, also when it fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The primary's WAL sender processes (one per streaming standby).
fn wal_senders(clusters: &Clusters) -> Vec<i32> {
    cluster_pids(&clusters.primary())
        .into_iter()
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("walsender")))
        .collect()
}
