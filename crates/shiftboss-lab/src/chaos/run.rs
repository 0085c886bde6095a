//! One chaos run, from setting up the store and the services to the closing report.

use super::ChaosArgs;
use super::audit::Audit;
use super::drive::{Driving, drive, tend};
use super::faults::Menu;
use super::notify::{self, NotifyFigures, Receiver};
use super::process_submit::ProcessSubmitter;
use super::report::{Injected, Report};
use super::setup::setup;
use super::submit::submit_all;
use super::workers::{Death, Recipe, Worker};
use anyhow::{Context, bail};
use shiftboss::demo::workflow;
use shiftboss::fake_services::{self as services, FaultRates, Ledger, ledger};
use shiftboss::target::DbTarget;
use shiftboss_core::TaskId;
use shiftboss_store::{Store, TaskDetail};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn run(db_flag: Option<&str>, args: ChaosArgs) -> anyhow::Result<bool> {
    if !shiftboss_store::fault::ENABLED {
        bail!(
            "this shiftboss-lab was built without its feature fault-injection, so its workers cannot die at the \
             injected points: build it with its default features"
        );
    }
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let workdir = args
        .workdir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("shiftboss-chaos-{}-{seed}", std::process::id())));
    std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
    let mut s = setup(db_flag, &workdir, &args, seed)?;
    let store = s.target.open(true).await?;
    let counts = store.task_counts().await?;
    if counts.iter().any(|(_, n)| *n > 0) {
        bail!("{} already holds tasks: chaos needs an empty store", s.target);
    }
    let faketime = match (args.skew_clocks, &s.pg) {
        (false, _) => None,
        (true, None) => bail!("--skew-clocks needs PostgreSQL: a SQLite store's clock is its host's, shared by design"),
        (true, Some(_)) if !args.faketime_lib.exists() => {
            bail!("--skew-clocks: {} is missing (install Debian's package faketime)", args.faketime_lib.display())
        }
        (true, Some(_)) => Some(args.faketime_lib.clone()),
    };
    let def = workflow::order_workflow();
    store.register_workflow(&def).await?;

    // The services live in this process, so they and their ledger outlive every worker's death.
    // The ledger is the demo's, named after this run's store, in the work directory; the store
    // holds no task (checked above), so whatever a reused work directory's ledger holds is not
    // this store's and is forgotten.
    let ledger = Arc::new(Ledger::open(&workdir.join(ledger::file_name(&s.target)?))?);
    ledger.start_over()?;
    let rates = FaultRates { transient: 0.05, hang: 0.01, reject: 0.01, hang_for: Duration::from_secs(3) };
    let stock = services::start("stock", "out of stock", 0, rates, ledger.clone()).await?;
    let payment = services::start("payment", "card declined", 0, rates, ledger.clone()).await?;
    let shipping = services::start("shipping", "address not deliverable", 0, rates, ledger.clone()).await?;
    // Every order's messages go to a receiver in this process, through the workers' dispatchers.
    let receiver = Receiver::start().await?;
    receiver.subscribe(store.as_ref()).await?;
    let recipe = Recipe {
        exe: std::env::current_exe().context("finding the shiftboss-lab executable")?,
        db: s.worker_db.clone(),
        agents: vec![
            format!("stock={}", stock.base_url),
            format!("payment={}", payment.base_url),
            format!("shipping={}", shipping.base_url),
        ],
        concurrency: args.concurrency,
        logs: workdir.clone(),
        faketime,
        config: notify::write_config(&workdir)?,
    };
    let processes = args.processes.unwrap_or(if s.pg.is_some() { 3 } else { 1 }) as usize;
    let mut workers: Vec<Worker> = (1..=processes).map(|n| Worker::new(format!("chaos-{n}"))).collect();
    for w in &mut workers {
        w.start(&recipe, None)?;
    }
    let menu = Menu {
        postgres: s.pg.is_some(),
        restart_postgres: args.restart_postgres,
        failover: s.replicas.is_some(),
        workers: processes,
    };
    eprintln!(
        "shiftboss-lab chaos: {} orders, {processes} worker(s){}{} on {}, seed {seed}, work directory {}",
        args.tasks,
        if recipe.faketime.is_some() { " with wall clocks 10 minutes ahead or behind" } else { "" },
        if s.replicas.is_some() { ", failing over between a primary and its synchronous standby" } else { "" },
        s.target,
        workdir.display()
    );

    let started = Instant::now();
    let deadline = started + args.timeout;
    let submitters = if s.pg.is_some() { 4 } else { 1 };
    let submitter = ProcessSubmitter { exe: recipe.exe.clone(), db: s.worker_db.clone(), seed };
    let submitting = tokio::spawn(submit_all(store.clone(), args.tasks, submitters, def.version, deadline, submitter));
    let mut injected = Injected::default();
    let mut driving = Driving {
        workers: &mut workers,
        recipe: &recipe,
        menu,
        rng: &mut rng,
        pg: s.pg.clone(),
        replicas: s.replicas.clone(),
        store: store.as_ref(),
        submitting: &submitting,
        injected: &mut injected,
        args: &args,
        started,
    };
    let faults_for = drive(&mut driving).await?;

    // The workers still run: the outbox drains. They are tended meanwhile: a worker restarted
    // while faults ran may still be armed, and die at its point now; started again (unarmed), it
    // delivers what is left, where the drain would otherwise wait on a dead dispatcher.
    let mut notifications = NotifyFigures::default();
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(30));
    {
        let draining = notify::drain(store.as_ref(), left.min(Duration::from_secs(120)), &mut notifications);
        tokio::pin!(draining);
        loop {
            tokio::select! {
                () = &mut draining => break,
                () = tokio::time::sleep(Duration::from_millis(50)) => tend(&mut driving, false)?,
            }
        }
    }
    drop(driving);

    let mut unclean_stops = Vec::new();
    for w in &mut workers {
        match w.stop() {
            Ok(()) => {}
            Err(Death::AtPoint(p)) => injected.died_at(p),
            Err(d) => unclean_stops.push(format!("{}: {d:?}", w.instance)),
        }
    }
    let submissions = submitting.await.context("the submitter stopped")??;
    injected.submit_retries = submissions.retries;
    injected.by_process = submissions.by_process;
    let acks = submissions.acks;

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
    receiver.audit(&details, &mut notifications);
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
        notifications,
        faults_for,
        elapsed: started.elapsed(),
    };
    report.print();
    let passed = report.failures().is_empty();
    drop(store);
    // The harness's own clusters are stopped and removed whatever the result.
    let store_kept =
        if s.replicas.take().is_some() { "(the clusters of --failover are removed)" } else { "and the store" };
    if passed && !args.keep {
        if let (Some(pg), true) = (&s.pg, s.created_schema) {
            pg.drop_schema()?;
        }
        std::fs::remove_dir_all(&workdir).with_context(|| format!("removing {}", workdir.display()))?;
    } else {
        eprintln!(
            "shiftboss-lab chaos: kept the work directory {} (workers' logs, ledger) {store_kept}",
            workdir.display()
        );
    }
    Ok(passed)
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
