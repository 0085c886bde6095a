//! One call per route of the worker protocol, each bounded in time, with errors that say whether
//! the same call is worth sending again.

use crate::config::WorkerConfig;
use crate::protocol::{
    BatchAnswer, BatchResult, HeartbeatAnswer, HeartbeatRequest, PollAnswer, PollRequest, Problem, ReleaseAnswer,
    ReplyBatch, Step,
};
use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The worker could not be set up (a bad URL, no TLS roots).
    #[error("worker setup: {0}")]
    Setup(String),
    /// No answer: the server is down, unreachable, or too slow. The same call may be sent again.
    #[error("no answer from {url}: {why}")]
    Unreachable { url: String, why: String },
    /// The step's lease is not this worker's any more (409 `lease_lost`): drop the step.
    #[error("the lease of step {0} is lost: it lapsed, or the step ended")]
    LeaseLost(String),
    /// The server refused the request and will refuse it again (a 4xx).
    #[error("refused ({status} {code}): {detail}")]
    Refused { status: u16, code: String, detail: String },
    /// The server failed (a 5xx, such as its store being out of reach). The same call may be
    /// sent again later.
    #[error("server error ({status} {code}): {detail}")]
    Server { status: u16, code: String, detail: String },
}

impl ClientError {
    /// Whether the same call may succeed if sent again.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Unreachable { .. } | ClientError::Server { .. })
    }
}

/// A client of one server's worker routes.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    token: Arc<str>,
    request_timeout: Duration,
}

impl Client {
    pub fn new(config: &WorkerConfig) -> Result<Client, ClientError> {
        let base = config.server.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Setup(format!("server {base:?}: give an http:// or https:// URL")));
        }
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls()?)
            .connect_timeout(config.request_timeout.min(Duration::from_secs(5)))
            // The API never redirects; a redirect would carry the token elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        Ok(Client {
            http,
            base: base.into(),
            token: config.token.as_str().into(),
            request_timeout: config.request_timeout,
        })
    }

    /// Asks for up to `capacity` steps, waiting up to `wait` when none is due.
    pub(crate) async fn poll(
        &self,
        config: &WorkerConfig,
        capacity: u32,
        wait: Duration,
    ) -> Result<Vec<Step>, ClientError> {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let body = PollRequest {
            agents: &config.agents,
            worker: &config.worker_id,
            capacity,
            wait_ms,
            domains: &config.domains,
        };
        let answer: PollAnswer = self.post("/v1/agents/poll", &body, self.request_timeout + wait, None).await?;
        Ok(answer.steps)
    }

    /// Moves the step's complete-by on. `Some(seconds left)` while the lease is held, `None` when
    /// it is lost (stop working on the step).
    pub(crate) async fn heartbeat(&self, step: &Step) -> Result<Option<f64>, ClientError> {
        let path = format!("/v1/agents/steps/{}/heartbeat", step.step_id);
        let progress = step.take_progress();
        let body = HeartbeatRequest { lease_token: &step.lease_token, progress: progress.as_ref() };
        let answer: Result<HeartbeatAnswer, _> = self.post(&path, &body, self.request_timeout, Some(step)).await;
        if let (Err(_), Some(p)) = (&answer, progress) {
            step.keep_progress(p);
        }
        let answer = answer?;
        Ok(answer.held.then_some(answer.seconds_left.unwrap_or(0.0)))
    }

    /// Sends many replies in one request; one result per reply, in their order.
    pub(crate) async fn replies(&self, batch: &ReplyBatch<'_>) -> Result<Vec<BatchResult>, ClientError> {
        let answer: BatchAnswer = self.post("/v1/agents/replies", batch, self.request_timeout, None).await?;
        if answer.results.len() != batch.replies.len() {
            let detail = format!("{} replies got {} results", batch.replies.len(), answer.results.len());
            return Err(ClientError::Server { status: 200, code: "short_answer".into(), detail });
        }
        Ok(answer.results)
    }

    /// Takes back the steps held under this worker's id (by this worker before it restarted):
    /// each is pending again at once. How many were returned, and how many went to Error.
    pub(crate) async fn release(&self, worker_id: &str) -> Result<(u32, u32), ClientError> {
        let path = format!("/v1/agents/workers/{}/release", path_segment(worker_id));
        let answer: ReleaseAnswer = self.post(&path, &serde_json::json!({}), self.request_timeout, None).await?;
        Ok((answer.returned, answer.gave_up))
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        timeout: Duration,
        step: Option<&Step>,
    ) -> Result<T, ClientError> {
        let url = format!("{}{path}", self.base);
        let unreachable = |e: reqwest::Error| ClientError::Unreachable { url: url.clone(), why: cause(&e) };
        let res = self
            .http
            .post(&url)
            .bearer_auth(&*self.token)
            .timeout(timeout)
            .json(body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = res.status();
        if status.is_success() {
            return res.json().await.map_err(unreachable);
        }
        let problem: Problem = res.json().await.unwrap_or_default();
        if status == StatusCode::CONFLICT && problem.code == "lease_lost" {
            return Err(ClientError::LeaseLost(step.map(|s| s.step_id.clone()).unwrap_or_default()));
        }
        let (status, code, detail) = (status.as_u16(), problem.code, problem.detail);
        Err(if status >= 500 || status == 408 || status == 429 {
            ClientError::Server { status, code, detail }
        } else {
            ClientError::Refused { status, code, detail }
        })
    }
}

/// ring and the system's roots: reqwest is built here without a crypto provider of its own.
fn tls() -> Result<rustls::ClientConfig, ClientError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| ClientError::Setup(format!("TLS: {e}")))?
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A worker id as one segment of a URL's path: every byte but the unreserved ones
/// percent-encoded (an id may hold `/`, `?`, `#` or `%`).
fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The innermost cause: reqwest's own text is only "error sending request".
fn cause(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    if e.is_timeout() { "timed out".into() } else { source.to_string() }
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn a_worker_id_is_one_path_segment() {
        assert_eq!(path_segment("pay-1.a_b~c"), "pay-1.a_b~c");
        assert_eq!(path_segment("a/b?c#d%e f"), "a%2Fb%3Fc%23d%25e%20f");
    }
}
