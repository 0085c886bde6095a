//! Submissions by processes that are themselves killed: every tenth order is submitted by its own
//! `shiftboss-lab tasks start` process (the product's `tasks start`), and about a third of those
//! processes get SIGKILL at a moment drawn across a typical process's life, so that some die
//! before their commit and some after. A submission counts as acknowledged only when the process
//! printed its task and exited 0; a killed one is submitted again under the same key (idempotent),
//! and the answer "already existed" then shows that the killed process had committed.

use anyhow::{Context, bail};
use shiftboss_core::TaskId;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the submitting processes are started.
pub struct ProcessSubmitter {
    pub exe: PathBuf,
    /// SHIFTBOSS_DB for them (the workers' URL: their connections are terminated too).
    pub db: String,
    pub seed: u64,
}

/// What the submitting processes went through.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessFigures {
    pub acknowledged: u64,
    /// Processes killed before they acknowledged.
    pub killed: u64,
    /// Of those, the ones whose task was committed all the same (the next try found it).
    pub committed_before_kill: u64,
    /// Tries that failed otherwise (the store was away) and were repeated.
    pub failed_tries: u64,
}

/// Orders whose submission goes through a process of its own.
pub fn by_process(order: u32) -> bool {
    order.is_multiple_of(10)
}

/// Submits each order (number, key, input as JSON) through `shiftboss-lab tasks start`; blocking.
pub fn submit(
    s: &ProcessSubmitter,
    orders: &[(String, String)],
    version: u32,
    deadline: Instant,
) -> anyhow::Result<(Vec<TaskId>, ProcessFigures)> {
    let mut rng = fastrand::Rng::with_seed(s.seed ^ 0x5eed);
    let (mut acks, mut f) = (Vec::new(), ProcessFigures::default());
    // How long a submitting process usually lives, learnt from those that finished.
    let mut typical = Duration::from_millis(50);
    for (key, input) in orders {
        let mut killed_before = false;
        loop {
            let started = Instant::now();
            let mut child = Command::new(&s.exe)
                .env("SHIFTBOSS_DB", &s.db)
                .env_remove("SHIFTBOSS_CONFIG")
                .args(["tasks", "start", "order", "--key", key, "--input", input, "--actor", "chaos-process"])
                .args(["--version", &version.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .context("starting a submitting process")?;
            if rng.f64() < 0.3 {
                std::thread::sleep(typical.mul_f64(rng.f64() * 1.2));
                // It may have exited already: then the signal finds nothing to kill.
                let _ = child.kill();
            }
            let out = child.wait_with_output().context("waiting for a submitting process")?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if out.status.success() {
                typical = (typical * 7 + started.elapsed()) / 8;
                let id = stdout.split_whitespace().nth(1).and_then(|w| w.parse::<i64>().ok());
                let id = id.with_context(|| format!("`tasks start` printed {stdout:?}"))?;
                f.committed_before_kill += u64::from(killed_before && stdout.contains("already existed"));
                f.acknowledged += 1;
                acks.push(TaskId(id));
                break;
            }
            if out.status.signal() == Some(rustix::process::Signal::KILL.as_raw()) {
                f.killed += u64::from(!killed_before);
                killed_before = true;
                continue;
            }
            f.failed_tries += 1;
            if Instant::now() > deadline {
                bail!("submitting {key} by a process kept failing ({})", out.status);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok((acks, f))
}
