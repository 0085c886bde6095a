//! The harness's worker processes (`shiftboss-lab worker`: the product's `serve`, in this build
//! that can die at the injected points): started, killed with SIGKILL, stopped with SIGSTOP
//! and continued, restarted under the same instance id (so that a restarted scheduler takes back
//! what it held), and stopped cleanly at the end.
//!
//! Each worker's standard input is a pipe from the harness and it runs with
//! `--stop-when-stdin-closes`, so no worker outlives the harness, however the harness ends.

use anyhow::Context;
use rustix::process::Signal;
use shiftboss_store::fault::{FAULT_ENV, FaultPoint};
use std::fs::OpenOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const SIGKILL: i32 = Signal::KILL.as_raw();

/// What a worker process is doing now, as far as the harness knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    Running,
    /// Stopped with SIGSTOP until this instant.
    Paused {
        until: Instant,
    },
    /// Dead (killed, or died at an injected point) until this instant, then restarted.
    Dead {
        restart_at: Instant,
    },
}

/// How a worker died, as the harness saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// The worker killed itself at the injected point it was armed with.
    AtPoint(FaultPoint),
    /// It exited with an error soon after it started: it could not open the store (PostgreSQL
    /// restarting). A real deployment's supervisor restarts it (P8); so does the harness.
    StartFailed,
    /// Anything else: an exit of its own (a crash, a panic). Counted as a failed check.
    Unexpected(i32),
}

/// What every worker is started with.
pub struct Recipe {
    pub exe: PathBuf,
    /// The store's URL or path, for SHIFTBOSS_DB.
    pub db: String,
    /// `--agent NAME=URL` for each service.
    pub agents: Vec<String>,
    pub concurrency: u32,
    pub logs: PathBuf,
    /// libfaketime, when the workers' wall clocks are skewed.
    pub faketime: Option<PathBuf>,
    /// The workers' config file (SHIFTBOSS_CONFIG): the dispatcher's quick retries.
    pub config: PathBuf,
}

pub struct Worker {
    pub instance: String,
    child: Option<Child>,
    pub life: Life,
    /// The injected point this incarnation was armed with, if any.
    armed: Option<FaultPoint>,
    pub starts: u32,
    started_at: Instant,
}

impl Worker {
    pub fn new(instance: String) -> Worker {
        Worker {
            instance,
            child: None,
            life: Life::Dead { restart_at: Instant::now() },
            armed: None,
            starts: 0,
            started_at: Instant::now(),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts (or restarts) the process; `fault` arms it to die at the N-th time it reaches a point.
    pub fn start(&mut self, r: &Recipe, fault: Option<(FaultPoint, u64)>) -> anyhow::Result<()> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(r.logs.join(format!("{}.log", self.instance)))
            .context("opening a worker's log")?;
        let mut cmd = Command::new(&r.exe);
        cmd.env("SHIFTBOSS_DB", &r.db)
            .env("SHIFTBOSS_CONFIG", &r.config)
            .env_remove(FAULT_ENV)
            .args(["worker", "--listen", "off", "--stop-when-stdin-closes", "--instance-id", &self.instance])
            .args(["--concurrency", &r.concurrency.to_string(), "--poll-interval", "100ms"])
            // A short sweep period and leader lease, so that lapsed leases and lost leaders are
            // found within a second or two of the fault.
            .args(["--supervisor-interval", "250ms", "--leader-ttl", "2s"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log);
        for a in &r.agents {
            cmd.args(["--agent", a]);
        }
        // The fake services listen on loopback, which the SSRF guard refuses unless allowed.
        cmd.args(["--allow-outbound", "127.0.0.1"]);
        if let Some((point, n)) = fault {
            cmd.env(FAULT_ENV, format!("{}@{n}", point.as_str()));
        }
        if let Some(lib) = &r.faketime {
            // Odd-numbered workers run 10 minutes ahead, even ones 10 minutes behind. Only the wall
            // clock moves: the monotonic clock, which measures the engine's own deadlines, does not.
            let odd = self.instance.chars().last().and_then(|c| c.to_digit(10)).is_some_and(|d| d % 2 == 1);
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME", if odd { "+10m" } else { "-10m" })
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        self.child = Some(cmd.spawn().context("starting a shiftboss-lab worker")?);
        self.armed = fault.map(|(p, _)| p);
        self.life = Life::Running;
        self.starts += 1;
        self.started_at = Instant::now();
        Ok(())
    }

    fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            // The child may have died meanwhile: a signal to nobody changes nothing.
            let _ = rustix::process::kill_process(pid, sig);
        }
    }

    /// SIGKILL, then reaps it.
    pub fn kill(&mut self, restart_at: Instant) {
        if let Some(mut c) = self.child.take() {
            // A stopped process dies of SIGKILL too.
            let _ = c.kill();
            let _ = c.wait();
        }
        self.life = Life::Dead { restart_at };
    }

    pub fn pause(&mut self, until: Instant) {
        self.signal(Signal::STOP);
        self.life = Life::Paused { until };
    }

    pub fn resume(&mut self) {
        self.signal(Signal::CONT);
        self.life = Life::Running;
    }

    /// Whether a running worker died by itself since the last look; reaps it.
    pub fn poll_death(&mut self, restart_at: Instant) -> Option<Death> {
        let c = self.child.as_mut()?;
        let status = c.try_wait().ok()??;
        self.child = None;
        self.life = Life::Dead { restart_at };
        Some(self.death(status))
    }

    fn death(&self, status: ExitStatus) -> Death {
        match (status.signal(), self.armed) {
            (Some(SIGKILL), Some(point)) => Death::AtPoint(point),
            (Some(sig), _) => Death::Unexpected(128 + sig),
            // `shiftboss-lab` (as `shiftboss`) exits 2 after printing an error; a panic exits 101.
            (None, _) if status.code() == Some(2) && self.started_at.elapsed() < Duration::from_secs(15) => {
                Death::StartFailed
            }
            (None, _) => Death::Unexpected(status.code().unwrap_or(-1)),
        }
    }

    /// Closes its standard input, so it stops claiming, finishes or hands back what it runs, and
    /// exits; waits for it. A clean stop exits 0; an armed worker may still die at its point on
    /// the way out (shutdown commits too).
    pub fn stop(&mut self) -> Result<(), Death> {
        if let Life::Paused { .. } = self.life {
            self.resume();
        }
        let Some(mut c) = self.child.take() else { return Ok(()) };
        drop(c.stdin.take());
        let status = c.wait().map_err(|_| Death::Unexpected(-1))?;
        self.life = Life::Dead { restart_at: Instant::now() };
        if status.success() { Ok(()) } else { Err(self.death(status)) }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Reached on an early return: none is left behind.
        if let Some(mut c) = self.child.take() {
            self.signal(Signal::CONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
