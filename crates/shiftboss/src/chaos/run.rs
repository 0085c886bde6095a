//! One chaos run, from setting up the store and the services to the closing report.

use super::ChaosArgs;
use super::audit::Audit;
use super::faults::{Fault, Menu, Postgres};
use super::report::{Injected, Report};
use super::workers::{Death, Life, Recipe, Worker};
use crate::demo::services::{self, FaultRates, Ledger};
use crate::demo::workflow;
use crate::target::DbTarget;
use anyhow::{Context, bail};
use shiftboss_core::TaskId;
use shiftboss_store::{Store, SubmitTask, TaskDetail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the run keeps its state, and what it must clean up after a pass.
struct Setup {
    /// What the harness itself opens (PostgreSQL: the schema, without the workers' application name).
    target: DbTarget,
    /// What the workers get as SHIFTBOSS_DB.
    worker_db: String,
    pg: Option<Arc<Postgres>>,
    /// The harness made the schema, so it drops it after a pass.
    created_schema: bool,
}

fn setup(db_flag: Option<&str>, workdir: &Path, args: &ChaosArgs, seed: u64) -> anyhow::Result<Setup> {
    let target = match db_flag {
        None => DbTarget::Sqlite(workdir.join("chaos.db")),
        Some(s) => DbTarget::parse(s)?,
    };
    match target {
        DbTarget::Sqlite(path) => {
            if path.exists() {
                bail!(
                    "{} exists: chaos needs a new store (it checks that every task it submitted is there)",
                    path.display()
                );
            }
            let worker_db = DbTarget::Sqlite(path.clone()).raw();
            Ok(Setup { target: DbTarget::Sqlite(path), worker_db, pg: None, created_schema: false })
        }
        DbTarget::Postgres(url) => {
            let (base, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
            let mut params: Vec<String> = query.split('&').filter(|p| !p.is_empty()).map(str::to_owned).collect();
            let given = params.iter().find_map(|p| p.strip_prefix("schema=").map(str::to_owned));
            let created_schema = given.is_none();
            let schema = given.unwrap_or_else(|| format!("chaos_{}_{}", std::process::id(), seed % 1_000_000));
            if created_schema {
                params.push(format!("schema={schema}"));
            }
            let app_name = format!("shiftboss_{schema}");
            let harness_url = format!("{base}?{}", params.join("&"));
            let worker_db = format!("{harness_url}&application_name={app_name}");
            let pg = Postgres {
                base_url: base.to_owned(),
                schema,
                app_name,
                restart_command: args.postgres_restart_command.clone(),
            };
            Ok(Setup { target: DbTarget::Postgres(harness_url), worker_db, pg: Some(Arc::new(pg)), created_schema })
        }
    }
}

pub async fn run(db_flag: Option<&str>, args: ChaosArgs) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let workdir = args
        .workdir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("shiftboss-chaos-{}-{seed}", std::process::id())));
    std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
    let s = setup(db_flag, &workdir, &args, seed)?;
    let store = s.target.open(true).await?;
    let counts = store.task_counts().await?;
    if counts.iter().any(|(_, n)| *n > 0) {
        bail!("{} already holds tasks: chaos needs an empty store", s.target);
    }
    let def = workflow::order_workflow();
    store.register_workflow(&def).await?;

    // The services live in this process, so they and their ledger outlive every worker's death.
    let ledger = Arc::new(Ledger::open(&workdir.join("services.db"))?);
    let rates = FaultRates { transient: 0.05, hang: 0.01, reject: 0.01, hang_for: Duration::from_secs(3) };
    let stock = services::start("stock", "out of stock", 0, rates, ledger.clone()).await?;
    let payment = services::start("payment", "card declined", 0, rates, ledger.clone()).await?;
    let shipping = services::start("shipping", "address not deliverable", 0, rates, ledger.clone()).await?;
    let recipe = Recipe {
        exe: std::env::current_exe().context("finding the shiftboss executable")?,
        db: s.worker_db.clone(),
        agents: vec![
            format!("stock={}", stock.base_url),
            format!("payment={}", payment.base_url),
            format!("shipping={}", shipping.base_url),
        ],
        concurrency: args.concurrency,
        logs: workdir.clone(),
    };
    let processes = args.processes.unwrap_or(if s.pg.is_some() { 3 } else { 1 }) as usize;
    let mut workers: Vec<Worker> = (1..=processes).map(|n| Worker::new(format!("chaos-{n}"))).collect();
    for w in &mut workers {
        w.start(&recipe, None)?;
    }
    let menu = Menu { postgres: s.pg.is_some(), restart_postgres: args.restart_postgres, workers: processes };
    eprintln!(
        "shiftboss chaos: {} orders, {processes} worker(s) on {}, seed {seed}, work directory {}",
        args.tasks,
        s.target,
        workdir.display()
    );

    let started = Instant::now();
    let deadline = started + args.timeout;
    let submitters = if s.pg.is_some() { 4 } else { 1 };
    let submitting = tokio::spawn(submit_all(store.clone(), args.tasks, submitters, def.version, deadline));
    let mut injected = Injected::default();
    let faults_for = drive(&mut Driving {
        workers: &mut workers,
        recipe: &recipe,
        menu,
        rng: &mut rng,
        pg: s.pg.clone(),
        store: store.as_ref(),
        submitting: &submitting,
        injected: &mut injected,
        args: &args,
        started,
    })
    .await?;

    let mut unclean_stops = Vec::new();
    for w in &mut workers {
        match w.stop() {
            Ok(()) => {}
            Err(Death::AtPoint(p)) => injected.died_at(p),
            Err(d) => unclean_stops.push(format!("{}: {d:?}", w.instance)),
        }
    }
    let (acks, retries) = submitting.await.context("the submitter stopped")??;
    injected.submit_retries = retries;

    let details = read_all(store.clone(), &acks).await?;
    let mut audit = Audit::default();
    let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
    let (mut terminal, mut lost) = (0, 0);
    for d in &details {
        match d {
            Some(d) => {
                audit.add(d);
                terminal += u64::from(d.task.state.is_terminal());
                *by_state.entry(d.task.state.to_string()).or_default() += 1;
            }
            None => lost += 1,
        }
    }
    let in_store = store.task_counts().await?.iter().map(|(_, n)| n).sum();
    let leader_term = match &s.pg {
        Some(pg) => pg.leader().ok().flatten().map(|(_, term)| term),
        None => None,
    };
    let integrity = match &s.target {
        DbTarget::Sqlite(path) => Some(integrity_check(path)?),
        DbTarget::Postgres(_) => None,
    };
    let report = Report {
        store: s.target.to_string(),
        seed,
        workers: processes,
        submitted: u64::from(args.tasks),
        acknowledged: acks.len() as u64,
        in_store,
        terminal,
        by_state: by_state.into_iter().collect(),
        lost,
        applied_twice: ledger.applied_twice()?.iter().map(|(_, n)| n).sum(),
        duplicates_dropped: ledger.duplicates_dropped()?,
        injected,
        audit,
        leader_term,
        integrity,
        unclean_stops,
        faults_for,
        elapsed: started.elapsed(),
    };
    report.print();
    let passed = report.failures().is_empty();
    drop(store);
    if passed && !args.keep {
        if let (Some(pg), true) = (&s.pg, s.created_schema) {
            pg.drop_schema()?;
        }
        std::fs::remove_dir_all(&workdir).with_context(|| format!("removing {}", workdir.display()))?;
    } else {
        eprintln!(
            "shiftboss chaos: kept the work directory {} (workers' logs, ledger) and the store",
            workdir.display()
        );
    }
    Ok(passed)
}

/// Submits orders 1..=n from `lanes` concurrent submitters, each order tried again until the
/// store acknowledges it (a submission is idempotent by key). Returns the acknowledged tasks and
/// how many tries failed.
async fn submit_all(
    store: Arc<dyn Store>,
    n: u32,
    lanes: u32,
    version: u32,
    deadline: Instant,
) -> anyhow::Result<(Vec<TaskId>, u64)> {
    let mut lanes_running = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let store = store.clone();
        lanes_running.spawn(async move {
            let (mut acks, mut retries) = (Vec::new(), 0u64);
            for k in (1..=n).filter(|k| k % lanes == lane) {
                let (key, input) = workflow::order_input(k);
                loop {
                    let task = SubmitTask {
                        key: key.clone(),
                        workflow: "order".into(),
                        version: Some(version),
                        input: input.clone(),
                        priority: 0,
                        actor: "chaos".into(),
                    };
                    match store.submit_task(task).await {
                        Ok(s) => {
                            acks.push(s.task_id);
                            break;
                        }
                        Err(e) if Instant::now() < deadline => {
                            retries += 1;
                            tracing::debug!(error = %e, "submission failed; trying again");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => return Err(anyhow::Error::from(e).context(format!("submitting {key}"))),
                    }
                }
            }
            anyhow::Ok((acks, retries))
        });
    }
    let (mut acks, mut retries) = (Vec::new(), 0);
    while let Some(r) = lanes_running.join_next().await {
        let (a, r) = r.context("a submitter failed")??;
        acks.extend(a);
        retries += r;
    }
    Ok((acks, retries))
}

/// What the fault loop works on.
struct Driving<'a> {
    workers: &'a mut [Worker],
    recipe: &'a Recipe,
    menu: Menu,
    rng: &'a mut fastrand::Rng,
    pg: Option<Arc<Postgres>>,
    store: &'a dyn Store,
    submitting: &'a tokio::task::JoinHandle<anyhow::Result<(Vec<TaskId>, u64)>>,
    injected: &'a mut Injected,
    args: &'a ChaosArgs,
    started: Instant,
}

/// Injects faults until every task is terminal or `--duration` passes, then lets the workers
/// finish undisturbed until every task is terminal or `--timeout` passes. Returns how long faults
/// were injected.
async fn drive(d: &mut Driving<'_>) -> anyhow::Result<Duration> {
    let fault_until = d.started + d.args.duration;
    let deadline = d.started + d.args.timeout;
    let mut next_fault = d.started + jittered(d.rng, d.args.fault_every);
    let mut faults_stopped: Option<Instant> = None;
    let mut last_restart_of_postgres: Option<Instant> = None;
    let mut next_look = d.started;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = Instant::now();
        if faults_stopped.is_none() && now >= fault_until {
            faults_stopped = Some(now);
        }
        tend(d, faults_stopped.is_none())?;
        if faults_stopped.is_none() && now >= next_fault {
            let mut fault = d.menu.pick(d.rng);
            if fault == Fault::RestartPostgres
                && last_restart_of_postgres.is_some_and(|t| t.elapsed() < Duration::from_secs(20))
            {
                fault = Fault::Kill;
            }
            if fault == Fault::RestartPostgres {
                last_restart_of_postgres = Some(now);
            }
            inject(d, fault).await?;
            next_fault = Instant::now() + jittered(d.rng, d.args.fault_every);
        }
        if now >= next_look {
            next_look = now + Duration::from_millis(500);
            // A count that fails (the store is away) just waits for the next look.
            if d.submitting.is_finished() && matches!(all_terminal(d.store).await, Ok(true)) {
                let stopped = faults_stopped.unwrap_or(now);
                // Leave no worker stopped: the end of the run stops them cleanly.
                tend(d, false)?;
                for w in d.workers.iter_mut() {
                    if let Life::Paused { .. } = w.life {
                        w.resume();
                    }
                }
                return Ok(stopped - d.started);
            }
        }
        if now >= deadline {
            eprintln!("shiftboss chaos: --timeout {:?} passed with tasks still live", d.args.timeout);
            return Ok(faults_stopped.unwrap_or(now) - d.started);
        }
    }
}

/// Between 0.5 and 1.5 times `mean`.
fn jittered(rng: &mut fastrand::Rng, mean: Duration) -> Duration {
    mean.mul_f64(0.5 + rng.f64())
}

/// Notices deaths, resumes paused workers whose time is up, restarts dead ones (armed with an
/// injected point while faults run).
fn tend(d: &mut Driving<'_>, faults_on: bool) -> anyhow::Result<()> {
    let now = Instant::now();
    for w in d.workers.iter_mut() {
        match w.life {
            Life::Running => {
                let restart_at = now + Duration::from_millis(d.rng.u64(200..2000));
                match w.poll_death(restart_at) {
                    Some(Death::AtPoint(p)) => d.injected.died_at(p),
                    Some(Death::StartFailed) => d.injected.start_failures += 1,
                    Some(other) => d.injected.unexpected_deaths.push(format!("{}: {other:?}", w.instance)),
                    None => {}
                }
            }
            Life::Paused { until } if now >= until => w.resume(),
            Life::Dead { restart_at } if now >= restart_at || !faults_on => {
                let fault = if faults_on { d.menu.arm(d.rng) } else { None };
                w.start(d.recipe, fault)?;
                if w.starts > 1 {
                    d.injected.worker_restarts += 1;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

async fn inject(d: &mut Driving<'_>, fault: Fault) -> anyhow::Result<()> {
    let restart_at = Instant::now() + Duration::from_millis(d.rng.u64(200..2000));
    let running: Vec<usize> = (0..d.workers.len()).filter(|i| d.workers[*i].life == Life::Running).collect();
    let any_running = (!running.is_empty()).then(|| running[d.rng.usize(0..running.len())]);
    match fault {
        Fault::Kill => {
            if let Some(i) = any_running {
                d.workers[i].kill(restart_at);
                d.injected.kills += 1;
            }
        }
        Fault::KillLeader => {
            let pg = d.pg.clone().context("a leader kill needs PostgreSQL")?;
            let leader = tokio::task::spawn_blocking(move || pg.leader()).await?.ok().flatten();
            let holder =
                leader.and_then(|(h, _)| d.workers.iter().position(|w| w.instance == h && w.life == Life::Running));
            if let Some(i) = holder.or(any_running) {
                d.workers[i].kill(restart_at);
                d.injected.kills += 1;
                d.injected.leader_kills += u64::from(holder.is_some());
            }
        }
        Fault::Pause => {
            if let Some(i) = any_running {
                d.workers[i].pause(Instant::now() + d.args.pause_for);
                d.injected.pauses += 1;
            }
        }
        Fault::TerminateConnections => {
            let pg = d.pg.clone().context("terminating connections needs PostgreSQL")?;
            match tokio::task::spawn_blocking(move || pg.terminate_connections()).await? {
                Ok(n) => {
                    d.injected.connection_terminations += 1;
                    d.injected.connections_terminated += n;
                }
                Err(e) => eprintln!("shiftboss chaos: pg_terminate_backend failed: {e:#}"),
            }
        }
        Fault::RestartPostgres => {
            let pg = d.pg.clone().context("restarting PostgreSQL needs PostgreSQL")?;
            eprintln!("shiftboss chaos: restarting PostgreSQL");
            tokio::task::spawn_blocking(move || pg.restart()).await??;
            d.injected.postgres_restarts += 1;
        }
    }
    Ok(())
}

async fn all_terminal(store: &dyn Store) -> anyhow::Result<bool> {
    Ok(store.task_counts().await?.iter().all(|(s, n)| s.is_terminal() || *n == 0))
}

/// Every acknowledged task, with its steps and events (None: the store does not have it), read
/// by a few readers at once.
async fn read_all(store: Arc<dyn Store>, ids: &[TaskId]) -> anyhow::Result<Vec<Option<TaskDetail>>> {
    const READERS: usize = 8;
    let mut readers = tokio::task::JoinSet::new();
    for r in 0..READERS {
        let store = store.clone();
        let mine: Vec<TaskId> = ids.iter().skip(r).step_by(READERS).copied().collect();
        readers.spawn(async move {
            let mut out = Vec::with_capacity(mine.len());
            for id in mine {
                let mut tries = 0;
                loop {
                    match store.get_task(id).await {
                        Ok(d) => break out.push(d),
                        Err(e) if e.is_transient() && tries < 20 => {
                            tries += 1;
                            tokio::time::sleep(Duration::from_millis(250)).await;
                        }
                        Err(e) => return Err(anyhow::Error::from(e).context(format!("reading task {id}"))),
                    }
                }
            }
            anyhow::Ok(out)
        });
    }
    let mut all = Vec::with_capacity(ids.len());
    while let Some(r) = readers.join_next().await {
        all.extend(r.context("a reader failed")??);
    }
    Ok(all)
}

/// SQLite's own check of every page and index, after every worker stopped.
fn integrity_check(path: &PathBuf) -> anyhow::Result<String> {
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("opening {} for integrity_check", path.display()))?;
    let mut st = conn.prepare("PRAGMA integrity_check")?;
    let rows: Vec<String> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    Ok(rows.join("; "))
}
