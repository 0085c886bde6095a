//! The fault loop: injects faults while tasks run, tends the workers (deaths noticed, pauses
//! ended, the dead restarted), and ends when every task is terminal.

use super::ChaosArgs;
use super::faults::{Fault, Menu, Postgres};
use super::replicas::{Outage, Replicas};
use super::report::Injected;
use super::submit::Submissions;
use super::workers::{Death, Life, Recipe, Worker};
use anyhow::Context;
use shiftboss_store::Store;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fault loop works on.
pub struct Driving<'a> {
    pub workers: &'a mut [Worker],
    pub recipe: &'a Recipe,
    pub menu: Menu,
    pub rng: &'a mut fastrand::Rng,
    pub pg: Option<Arc<Postgres>>,
    pub replicas: Option<Arc<Mutex<Replicas>>>,
    pub store: &'a dyn Store,
    pub submitting: &'a tokio::task::JoinHandle<anyhow::Result<Submissions>>,
    pub injected: &'a mut Injected,
    pub args: &'a ChaosArgs,
    pub started: Instant,
}

/// Injects faults until every task is terminal or `--duration` passes, then lets the workers
/// finish undisturbed until every task is terminal or `--timeout` passes. Returns how long faults
/// were injected.
pub async fn drive(d: &mut Driving<'_>) -> anyhow::Result<Duration> {
    let fault_until = d.started + d.args.duration;
    let deadline = d.started + d.args.timeout;
    let mut next_fault = d.started + jittered(d.rng, d.args.fault_every);
    let mut faults_stopped: Option<Instant> = None;
    let mut last_restart_of_postgres: Option<Instant> = None;
    let mut last_failover: Option<Instant> = None;
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
            // Between failovers the workers get time to work on the promoted server; and a
            // failover is timed to the first step completed after it, so it needs work to do.
            if fault == Fault::Failover
                && (last_failover.is_some_and(|t| t.elapsed() < FAILOVER_SPACING) || !work_left(d.store).await)
            {
                fault = Fault::Kill;
            }
            inject(d, fault).await?;
            if fault == Fault::Failover {
                last_failover = Some(Instant::now());
            }
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
            eprintln!("shiftboss-lab chaos: --timeout {:?} passed with tasks still live", d.args.timeout);
            return Ok(faults_stopped.unwrap_or(now) - d.started);
        }
    }
}

/// The least time from the end of one failover (its new standby streaming) to the next.
const FAILOVER_SPACING: Duration = Duration::from_secs(5);

/// The longest a failover waits for the first step completed after the promotion before the run
/// fails: far past the store's bounds (a call given up after 10 s, a host's connect after 5 s).
const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// Between 0.5 and 1.5 times `mean`.
fn jittered(rng: &mut fastrand::Rng, mean: Duration) -> Duration {
    mean.mul_f64(0.5 + rng.f64())
}

/// Notices deaths, resumes paused workers whose time is up, restarts dead ones (armed with an
/// injected point while faults run).
pub fn tend(d: &mut Driving<'_>, faults_on: bool) -> anyhow::Result<()> {
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
                Err(e) => eprintln!("shiftboss-lab chaos: pg_terminate_backend failed: {e:#}"),
            }
        }
        Fault::RestartPostgres => {
            let pg = d.pg.clone().context("restarting PostgreSQL needs PostgreSQL")?;
            eprintln!("shiftboss-lab chaos: restarting PostgreSQL");
            tended_while(d, tokio::task::spawn_blocking(move || pg.restart())).await?;
            d.injected.postgres_restarts += 1;
        }
        Fault::Failover => {
            let replicas = d.replicas.clone().context("a failover needs --failover's clusters")?;
            let outage = if d.rng.bool() { Outage::Crash } else { Outage::Freeze };
            eprintln!("shiftboss-lab chaos: failing over ({outage:?} primary)");
            let failing_over = tokio::task::spawn_blocking(move || {
                replicas.lock().map_err(|_| anyhow::anyhow!("a failover panicked"))?.fail_over(outage, FAILOVER_WAIT)
            });
            let f = tended_while(d, failing_over).await?;
            eprintln!("shiftboss-lab chaos: promoted; first step completed {:?} after", f.first_step);
            d.injected.failovers.push(f);
        }
    }
    Ok(())
}

/// Whether enough steps are due or running that some will still be, once a failover is through
/// (a store out of reach counts as no).
async fn work_left(store: &dyn Store) -> bool {
    const ENOUGH: u64 = 100;
    store.queue_stats().await.is_ok_and(|q| q.agents.iter().map(|a| a.due + a.processing).sum::<u64>() >= ENOUGH)
}

/// Waits for a fault that takes a while (a server restarted, a failover) while tending the
/// workers: one that died at its armed point, or was killed or paused just before, must come back
/// to do the work the fault's end is measured by.
async fn tended_while<T>(
    d: &mut Driving<'_>,
    mut job: tokio::task::JoinHandle<anyhow::Result<T>>,
) -> anyhow::Result<T> {
    loop {
        tokio::select! {
            done = &mut job => return done?,
            () = tokio::time::sleep(Duration::from_millis(50)) => tend(d, true)?,
        }
    }
}

async fn all_terminal(store: &dyn Store) -> anyhow::Result<bool> {
    Ok(store.task_counts().await?.iter().all(|(s, n)| s.is_terminal() || *n == 0))
}
