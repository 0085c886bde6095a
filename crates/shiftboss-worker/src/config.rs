//! Who the worker is and how it behaves.

use std::time::Duration;

/// A worker's settings. `new` gives the defaults; set the fields to change them.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The API's base URL, such as `http://127.0.0.1:8080`.
    pub server: String,
    /// An API token with the `agent` scope.
    pub token: String,
    /// The worker's id, stable while it runs (1 to 100 visible ASCII characters).
    pub worker_id: String,
    /// The agent types it serves; each must be declared remote by the server (`--remote-agent`).
    pub agents: Vec<String>,
    /// Isolation domains it serves, besides steps with none.
    pub domains: Vec<String>,
    /// Steps run at once; a poll asks for the free ones.
    pub concurrency: usize,
    /// How long one poll waits for work when none is due (the server caps it at 20 s).
    pub poll_wait: Duration,
    /// The bound on each call but the poll (which gets its wait on top).
    pub request_timeout: Duration,
    /// The pause after a failed poll, doubled on each further failure up to 30 times this.
    pub poll_backoff: Duration,
    /// Before its first poll, take back the steps held under `worker_id` (by this worker before
    /// it restarted): they run again at once instead of after their complete-by. Set it only when
    /// the id is stable across restarts and no two workers running at once share it: a release
    /// takes the steps of whichever process holds them. Off by default.
    pub release_on_start: bool,
}

impl WorkerConfig {
    pub fn new(
        server: impl Into<String>,
        token: impl Into<String>,
        worker_id: impl Into<String>,
        agents: impl IntoIterator<Item = impl Into<String>>,
    ) -> WorkerConfig {
        WorkerConfig {
            server: server.into(),
            token: token.into(),
            worker_id: worker_id.into(),
            agents: agents.into_iter().map(Into::into).collect(),
            domains: Vec::new(),
            concurrency: 16,
            poll_wait: Duration::from_secs(20),
            request_timeout: Duration::from_secs(10),
            poll_backoff: Duration::from_millis(200),
            release_on_start: false,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.agents.is_empty() {
            return Err("a worker serves at least one agent type".into());
        }
        if self.concurrency == 0 {
            return Err("concurrency must be at least 1".into());
        }
        let id = &self.worker_id;
        if id.is_empty() || id.len() > 100 || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("worker id {id:?}: 1 to 100 visible ASCII characters"));
        }
        if self.request_timeout.is_zero() {
            return Err("request timeout must be more than 0".into());
        }
        Ok(())
    }
}
