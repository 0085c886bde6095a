//! The engine's side of the jq workers: a few long-lived child processes, each running one filter
//! at a time (`worker.rs`). A filter that runs past its time gets its worker killed (a new one
//! starts for the next filter); a worker that dies (a filter that allocated past the worker's
//! memory limit) is replaced the same way. So a filter can cost a step, never the engine.
//!
//! Why processes: jaq has no interrupt and no allocation bound, so a thread running `last(repeat(1))`
//! could not be stopped, and `[range(1e10)]` would take the engine's memory with it.

use super::worker::worker_args;
use crate::ScriptError;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// How to start a worker: a program and its arguments, to which the worker's own are added. The
/// `shiftboss` binary is its own worker (`shiftboss __jq-worker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// This executable, run with `args` first (the subcommand that calls `worker_main`).
    pub fn current_exe(args: &[&str]) -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand { program: std::env::current_exe()?, args: args.iter().map(|a| (*a).to_owned()).collect() })
    }
}

/// The bounds of jq filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JqLimits {
    /// The longest one filter may run before its worker is killed.
    pub time: Duration,
    /// The data segment limit of each worker process (RLIMIT_DATA), in bytes.
    pub memory: u64,
    /// The most JSON one filter may give, all results together, in bytes.
    pub output: usize,
    /// Workers at most: filters running at once.
    pub workers: usize,
}

impl Default for JqLimits {
    fn default() -> Self {
        JqLimits { time: Duration::from_secs(1), memory: 512 << 20, output: 1 << 20, workers: 2 }
    }
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The pool of jq worker processes.
pub struct JqPool {
    command: WorkerCommand,
    limits: JqLimits,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
}

impl JqPool {
    pub fn new(command: WorkerCommand, limits: JqLimits) -> JqPool {
        JqPool { command, limits, idle: Mutex::new(Vec::new()), slots: Semaphore::new(limits.workers.max(1)) }
    }

    pub fn limits(&self) -> &JqLimits {
        &self.limits
    }

    fn spawn(&self) -> Result<Worker, ScriptError> {
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .args(worker_args(self.limits.memory, self.limits.output))
            // A filter has no business with the engine's environment (secrets live there).
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // `debug` and `stderr` write there; nothing reads it, so it must not be a pipe that fills.
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ScriptError::Engine(format!("cannot start a jq worker ({:?}): {e}", self.command.program)))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ScriptError::Engine("a jq worker has no pipes".into()));
        };
        Ok(Worker { child, stdin, stdout: BufReader::new(stdout) })
    }

    /// Runs `filter` over `input` in a worker; the results in order.
    pub async fn run(&self, filter: &str, input: &Value) -> Result<Vec<Value>, ScriptError> {
        let _slot = self.slots.acquire().await.map_err(|_| ScriptError::Engine("the jq pool is closed".into()))?;
        let idle = self.idle.lock().ok().and_then(|mut l| l.pop());
        let mut w = match idle {
            Some(w) => w,
            None => self.spawn()?,
        };
        let request = format!(
            "{}\n{}\n",
            serde_json::to_string(filter).map_err(|e| ScriptError::Input(e.to_string()))?,
            serde_json::to_string(input).map_err(|e| ScriptError::Input(e.to_string()))?
        );
        // The answer's size is bounded by the worker's output limit; the margin covers the envelope.
        let cap = (self.limits.output as u64).saturating_mul(2).saturating_add(64 << 10);
        let exchange = async {
            w.stdin.write_all(request.as_bytes()).await?;
            w.stdin.flush().await?;
            let mut line = String::new();
            (&mut w.stdout).take(cap).read_line(&mut line).await?;
            Ok::<String, std::io::Error>(line)
        };
        let line = match tokio::time::timeout(self.limits.time, exchange).await {
            Err(_) => {
                // Killed and reaped here; the next filter gets a fresh worker.
                let _ = w.child.kill().await;
                return Err(ScriptError::TimedOut(self.limits.time));
            }
            Ok(Ok(line)) if line.ends_with('\n') => line,
            Ok(_) => return Err(self.died(w).await),
        };
        let answer: Value =
            serde_json::from_str(&line).map_err(|e| ScriptError::Engine(format!("a jq worker answered badly: {e}")))?;
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(w);
        }
        match answer {
            Value::Object(mut m) => match (m.remove("ok"), m.remove("error")) {
                (Some(Value::Array(results)), _) => Ok(results),
                (_, Some(Value::String(e))) => Err(ScriptError::Jq(e)),
                _ => Err(ScriptError::Engine("a jq worker answered badly".into())),
            },
            _ => Err(ScriptError::Engine("a jq worker answered badly".into())),
        }
    }

    /// Why a worker stopped answering: its memory limit, most often (Rust aborts a process whose
    /// allocation fails, so SIGABRT means that).
    async fn died(&self, mut w: Worker) -> ScriptError {
        use std::os::unix::process::ExitStatusExt;
        let status = match tokio::time::timeout(Duration::from_secs(2), w.child.wait()).await {
            Ok(Ok(s)) => s,
            _ => {
                let _ = w.child.kill().await;
                return ScriptError::Engine("the jq worker stopped answering".into());
            }
        };
        if status.signal() == Some(rustix::process::Signal::ABORT.as_raw()) {
            return ScriptError::OutOfMemory(self.limits.memory as usize);
        }
        ScriptError::Engine(format!("the jq worker ended ({status})"))
    }
}
