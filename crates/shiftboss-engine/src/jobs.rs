//! The client side of retry jobs (M1, M3, M8): one call enqueues "run this handler with these
//! params until it succeeds". It needs only a store: a deployment that only enqueues runs no
//! scheduler or supervisor. The server side is the ordinary engine: the handler is an agent.

use serde::Deserialize;
use shiftboss_core::Timestamp;
use shiftboss_core::jobs::Balance;
use shiftboss_core::retry::RetryPolicy;
use shiftboss_store::{EnqueueJob, EnqueueJobs, Store, StoreError, Submitted};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// Client settings (M8): how jobs are spread over servers, and each handler's defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// How a job's load-balance number is picked when the caller gives none.
    #[serde(default)]
    pub balance: Balance,
    /// Defaults per handler, for jobs that do not set them.
    #[serde(default)]
    pub handlers: BTreeMap<String, HandlerDefaults>,
}

/// What a handler's jobs get unless the caller says otherwise.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandlerDefaults {
    /// The complete-by window of each try.
    #[serde(default, with = "shiftboss_core::time::serde_duration::option")]
    pub timeout: Option<Duration>,
    /// The retry schedule (otherwise the server's policy for the handler applies).
    #[serde(default)]
    pub retry: Option<RetryPolicy>,
}

/// The options of one job (M1); every one may be left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobOptions {
    /// Not before this time, by the store's clock.
    pub due_at: Option<Timestamp>,
    /// Not before this long from now, by the store's clock.
    pub delay: Option<Duration>,
    /// Retry intervals or a maximum count.
    pub retry: Option<RetryPolicy>,
    pub timeout: Option<Duration>,
    pub priority: i32,
    /// The load-balance number; the client's strategy picks one when none.
    pub bucket: Option<u16>,
    /// Enqueueing the same key again gives back the same job.
    pub unique_key: Option<String>,
}

impl JobOptions {
    /// Retries after each of these intervals, then gives up (M6).
    pub fn intervals(mut self, intervals: impl IntoIterator<Item = Duration>) -> Self {
        self.retry = Some(RetryPolicy::Intervals { intervals: intervals.into_iter().collect(), max_failures: None });
        self
    }

    /// At most `tries` tries in all, `delay` apart (M6's maximum count).
    pub fn max_tries(mut self, tries: u32, delay: Duration) -> Self {
        self.retry = Some(RetryPolicy::Fixed { delay, max_failures: tries });
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    pub fn bucket(mut self, bucket: u16) -> Self {
        self.bucket = Some(bucket);
        self
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
}

/// Enqueues retry jobs. Cheap to clone; clones share the round-robin counter.
#[derive(Clone)]
pub struct JobClient {
    store: Arc<dyn Store>,
    config: Arc<ClientConfig>,
    /// How many jobs this client has placed, for the round-robin and weighted strategies.
    placed: Arc<AtomicU64>,
    actor: String,
    /// This process's scheduler, if it has one, to start due jobs at once.
    wake: Option<Arc<Notify>>,
}

impl JobClient {
    /// A client over `store`; `actor` names it in the event log.
    pub fn new(store: Arc<dyn Store>, config: ClientConfig, actor: impl Into<String>) -> Result<Self, StoreError> {
        config.balance.validate().map_err(|e| StoreError::InvalidInput(format!("client balance: {e}")))?;
        for (name, h) in &config.handlers {
            if let Some(Err(e)) = h.retry.as_ref().map(RetryPolicy::validate) {
                return Err(StoreError::InvalidInput(format!("handler {name}: retry policy: {e}")));
            }
        }
        Ok(JobClient { store, config: Arc::new(config), placed: Arc::default(), actor: actor.into(), wake: None })
    }

    pub(crate) fn waking(mut self, wake: Arc<Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// The job as the store takes it: the handler's defaults filled in and its bucket picked.
    /// For [`shiftboss_sqlite::enqueue_jobs_in`]-style calls inside the caller's transaction.
    pub fn job(&self, handler: &str, params: serde_json::Value, o: JobOptions) -> EnqueueJob {
        let defaults = self.config.handlers.get(handler);
        let bucket = match (o.bucket, &self.config.balance, &o.unique_key) {
            (Some(b), _, _) => Some(b),
            // The store hashes the key it makes up.
            (None, Balance::Hash, None) => None,
            (None, balance, key) => {
                let n = self.placed.fetch_add(1, Ordering::Relaxed);
                Some(balance.bucket(n, key.as_deref().unwrap_or_default()))
            }
        };
        EnqueueJob {
            handler: handler.to_owned(),
            params,
            key: o.unique_key,
            due_at: o.due_at,
            delay: o.delay,
            retry: o.retry.or_else(|| defaults.and_then(|d| d.retry.clone())),
            timeout: o.timeout.or_else(|| defaults.and_then(|d| d.timeout)),
            priority: o.priority,
            bucket,
        }
    }

    /// Enqueues one job (M1): it runs on the first server that claims it once due.
    pub async fn enqueue(
        &self,
        handler: &str,
        params: serde_json::Value,
        o: JobOptions,
    ) -> Result<Submitted, StoreError> {
        let job = self.job(handler, params, o);
        let mut out = self.enqueue_all(vec![job]).await?;
        out.pop().ok_or_else(|| StoreError::Backend("the store returned no outcome for the job".into()))
    }

    /// Enqueues jobs made by [`JobClient::job`] in one transaction: all or none.
    pub async fn enqueue_all(&self, jobs: Vec<EnqueueJob>) -> Result<Vec<Submitted>, StoreError> {
        let out = self.store.enqueue_jobs(EnqueueJobs { jobs, actor: self.actor.clone() }).await?;
        if let Some(w) = &self.wake {
            w.notify_one();
        }
        Ok(out)
    }
}
