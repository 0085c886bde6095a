//! Wiring: an engine is a store, the agents this process can run, and the roles it plays.
//!
//! ```ignore
//! let engine = Engine::builder(store, InstanceId::new("orders-1")?)
//!     .agent("http", HttpAgent::new())
//!     .build()?;
//! engine.register_workflow(&definition).await?;
//! engine.submit(task).await?;
//! let running = engine.start();
//! // ...
//! running.shutdown().await;
//! ```

use crate::agent::{Agent, AgentRegistry};
use crate::config::EngineConfig;
use crate::exception::ExceptionStrategy;
use crate::follow::EventFollower;
use crate::group_commit::GroupCommit;
use crate::group_commit::handoff::{Handoff, Offered};
use crate::group_commit::replies::Replies;
use crate::group_commit::submissions::Submissions;
use crate::jobs::{ClientConfig, JobClient};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::runtime::Breakers;
use crate::scheduler::Scheduler;
use crate::supervisor::Supervisor;
use shiftboss_core::InstanceId;
use shiftboss_core::TaskId;
use shiftboss_core::model::{EventRecord, TaskRecord};
use shiftboss_core::retry::{RetryPolicies, RetryPolicy};
use shiftboss_core::workflow::{StepKind, WorkflowDef};
use shiftboss_store::event_kind as ev;
use shiftboss_store::{
    ClaimDueSteps, EventFilter, RecordReplies, RegisterOutcome, Reply, ReplyOutcome, Store, StoreError, SubmitTask,
    Submitted, Subscription,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A definition names an agent this engine does not have, or gives it a config it refuses.
    #[error("workflow {workflow}, step {step}: {problem}")]
    Agent { workflow: String, step: String, problem: String },
    #[error("invalid definition: {0}")]
    Definition(#[from] shiftboss_core::workflow::DefinitionError),
    #[error("invalid configuration: {0}")]
    Config(String),
    /// No task, live or archived, has this id.
    #[error("no task {0}")]
    NoTask(shiftboss_core::TaskId),
    /// A wait ended at its bound before what it waited for.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
}

/// How often an event reader reads again when nothing rang its bell: the bound on how late it
/// sees a write of another process that queued no work (a task's end).
pub const FOLLOW_POLL: Duration = Duration::from_secs(1);
/// Events per read for [`Engine::follow`].
const FOLLOW_PAGE: u32 = 500;
/// The events that move a task (one of them leads every change of its state).
const TASK_MOVES: [&str; 12] = [
    ev::TASK_COMPLETED,
    ev::TASK_FAILED,
    ev::TASK_CANCELLED,
    ev::TASK_COMPENSATED,
    ev::TASK_TERMINATED,
    ev::TASK_COMPENSATION_FAILED,
    ev::TASK_TIMED_OUT,
    ev::TASK_COMPENSATING,
    ev::TASK_PAUSED,
    ev::TASK_RESUMED,
    ev::TASK_OPERATED,
    ev::TASK_RESTORED,
];

pub struct EngineBuilder {
    store: Arc<dyn Store>,
    instance: InstanceId,
    agents: AgentRegistry,
    policies: RetryPolicies,
    config: EngineConfig,
    client: ClientConfig,
    remote: Vec<String>,
    outbound: Option<crate::outbound::Outbound>,
}

impl EngineBuilder {
    /// The client the dispatcher sends webhooks with (its SSRF guard and allow-list, TLS). By
    /// default one that refuses every private, loopback and link-local address.
    pub fn outbound(mut self, outbound: crate::outbound::Outbound) -> Self {
        self.outbound = Some(outbound);
        self
    }

    /// An agent type served by remote workers over the API (issue 17), not in this process:
    /// definitions may name it, and this process's scheduler never claims its steps.
    pub fn remote_agent(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.remote.contains(&name) {
            self.remote.push(name);
        }
        self
    }

    /// What an agent's (a job handler's) errors and panics count as (M5).
    pub fn exception_strategy(mut self, agent: impl Into<String>, strategy: impl ExceptionStrategy) -> Self {
        self.agents.set_strategy(agent, Arc::new(strategy));
        self
    }

    /// The client side of retry jobs: the balance strategy and handler defaults of [`Engine::jobs`].
    pub fn client(mut self, client: ClientConfig) -> Self {
        self.client = client;
        self
    }

    pub fn agent(mut self, name: impl Into<String>, agent: impl Agent) -> Self {
        self.agents.insert(name, Arc::new(agent));
        self
    }

    /// The retry policy of an agent's steps that name none of their own.
    pub fn agent_retry(mut self, agent: impl Into<String>, policy: RetryPolicy) -> Self {
        self.policies.per_agent.insert(agent.into(), policy);
        self
    }

    /// The retry policy of every step that no other policy covers (M6's interval list by default).
    pub fn default_retry(mut self, policy: RetryPolicy) -> Self {
        self.policies.default = policy;
        self
    }

    pub fn config(mut self, config: EngineConfig) -> Self {
        self.config = config;
        self
    }

    pub fn build(self) -> Result<Engine, EngineError> {
        self.config.validate().map_err(EngineError::Config)?;
        for a in self.config.scheduler.agents.iter().flatten() {
            if self.agents.get(a).is_none() {
                return Err(EngineError::Config(format!(
                    "the scheduler is set to serve agent {a:?}, which this engine does not have (it has: {})",
                    self.agents.names().join(", ")
                )));
            }
        }
        for a in &self.remote {
            shiftboss_core::workflow::check_name("remote agent", a).map_err(|e| EngineError::Config(e.to_string()))?;
            if self.agents.get(a).is_some() {
                return Err(EngineError::Config(format!(
                    "agent {a:?} is both in this process and remote: a type is served one way"
                )));
            }
        }
        let policies = std::iter::once(("default", &self.policies.default))
            .chain(self.policies.per_agent.iter().map(|(k, v)| (k.as_str(), v)));
        for (who, p) in policies {
            p.validate().map_err(|e| EngineError::Config(format!("retry policy of {who}: {e}")))?;
        }
        let wake: Arc<Notify> = Arc::default();
        let jobs = JobClient::new(self.store.clone(), self.client, self.instance.as_str())?.waking(wake.clone());
        Ok(Engine {
            inner: Arc::new(Inner {
                jobs,
                store: self.store,
                instance: self.instance,
                agents: self.agents,
                policies: Arc::new(self.policies),
                breakers: Arc::new(Breakers::new(self.config.scheduler.breaker)),
                config: self.config,
                metrics: Arc::default(),
                wake,
                woken_by_store: AtomicBool::new(false),
                supervisor_bell: Arc::default(),
                submitter: OnceLock::new(),
                handoff: Arc::default(),
                replier: OnceLock::new(),
                remote: self.remote,
                outbound: self.outbound,
                webhook_counters: Arc::default(),
                alert_counters: Arc::default(),
                events: watch::Sender::new(()),
                events_channel: OnceLock::new(),
            }),
        })
    }
}

#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    jobs: JobClient,
    instance: InstanceId,
    agents: AgentRegistry,
    policies: Arc<RetryPolicies>,
    breakers: Arc<Breakers>,
    config: EngineConfig,
    metrics: Arc<Metrics>,
    wake: Arc<Notify>,
    /// True once the running roles' due-work subscription rings them at the commit of this
    /// process's own writes (PostgreSQL): a second wake after a submission would only send the
    /// scheduler to claim again, for nothing.
    woken_by_store: AtomicBool,
    /// Rung by this process's scheduler after a claim, and by the due-work channel: the supervisor's bell.
    supervisor_bell: Arc<Notify>,
    /// The group commit's writers, started by the first submission, and by a remote reply.
    submitter: OnceLock<GroupCommit<Submissions>>,
    /// Waiting polls' claims, run by the submissions' writers (see `group_commit::handoff`).
    handoff: Arc<Handoff>,
    replier: OnceLock<GroupCommit<Replies>>,
    /// The agent types remote workers serve (see [`EngineBuilder::remote_agent`]).
    remote: Vec<String>,
    /// What the dispatcher sends with.
    outbound: Option<crate::outbound::Outbound>,
    webhook_counters: Arc<crate::dispatcher::DispatchCounters>,
    /// What the alert sinks sent.
    alert_counters: Arc<crate::alerts::AlertCounters>,
    /// Rung after this process's writes and by the store's due-work channel: event readers'
    /// bell (see [`crate::follow`]).
    events: watch::Sender<()>,
    /// The due-work channel's subscription that rings `events`, made by the first reader.
    events_channel: OnceLock<Subscription>,
}

impl Engine {
    pub fn builder(store: Arc<dyn Store>, instance: InstanceId) -> EngineBuilder {
        EngineBuilder {
            store,
            instance,
            agents: AgentRegistry::default(),
            policies: RetryPolicies::default(),
            config: EngineConfig::default(),
            client: ClientConfig::default(),
            remote: Vec::new(),
            outbound: None,
        }
    }

    /// Enqueues retry jobs (M1) and wakes this process's scheduler for those due now.
    pub fn jobs(&self) -> &JobClient {
        &self.inner.jobs
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn instance(&self) -> &InstanceId {
        &self.inner.instance
    }

    /// Checks a definition, including that this engine has every agent it names and that each
    /// agent accepts its step's config, then registers it.
    pub async fn register_workflow(&self, def: &WorkflowDef) -> Result<RegisterOutcome, EngineError> {
        self.check_workflow(def)?;
        Ok(self.inner.store.register_workflow(def).await?)
    }

    /// The agent types this process's scheduler serves (its in-process agents).
    pub fn agent_names(&self) -> Vec<String> {
        self.inner.agents.names()
    }

    /// Whether this process runs a scheduler that claims its agents' steps.
    pub fn runs_scheduler(&self) -> bool {
        self.inner.config.roles.scheduler
    }

    /// The agent types remote workers serve: a remote worker may poll for these alone.
    pub fn remote_agents(&self) -> &[String] {
        &self.inner.remote
    }

    /// The retry policies that set a failed attempt's next try, remote workers' included.
    pub fn policies(&self) -> &Arc<RetryPolicies> {
        &self.inner.policies
    }

    /// Whether a step of `agent` with this `config` would wait on its service's open circuit in
    /// this process now (circuits are kept per process, in memory).
    pub fn circuit(&self, agent: &str, config: &serde_json::Value) -> Option<crate::runtime::CircuitView> {
        self.inner.breakers.view(&self.inner.agents.service_key(agent, config))
    }

    /// The concurrency and rate limits per agent type that every claim obeys, remote ones too.
    pub fn agent_limits(&self) -> &[shiftboss_store::AgentLimit] {
        &self.inner.config.scheduler.limits
    }

    /// Checks a definition as [`Engine::register_workflow`] does, and registers nothing: a dry run.
    pub fn check_workflow(&self, def: &WorkflowDef) -> Result<(), EngineError> {
        def.validate()?;
        for step in def.all_steps().into_iter().filter(|s| s.kind == StepKind::Agent) {
            if self.inner.remote.iter().any(|r| r == step.agent_name()) {
                // A remote worker checks its own config: nothing here knows what it takes.
                continue;
            }
            if shiftboss_core::workflow::step::is_dynamic(step.agent_name()) {
                // Chosen when the step starts: an agent that no one serves leaves the step pending,
                // where "why is this step not running?" says so.
                continue;
            }
            let problem = match self.inner.agents.get(step.agent_name()) {
                None => Some(format!(
                    "unknown agent {:?} (this engine has: {}{})",
                    step.agent_name(),
                    self.inner.agents.names().join(", "),
                    if self.inner.remote.is_empty() {
                        String::new()
                    } else {
                        format!("; remote: {}", self.inner.remote.join(", "))
                    }
                )),
                Some(a) => a.check_config(step).err(),
            };
            if let Some(problem) = problem {
                return Err(EngineError::Agent { workflow: def.name.clone(), step: step.name.clone(), problem });
            }
        }
        Ok(())
    }

    /// Submits a task and wakes this process's scheduler.
    ///
    /// Concurrent submissions are written together, a few transactions at a time (group commit,
    /// see [`crate::SubmitConfig`]); each keeps its own outcome, as if written alone.
    pub async fn submit(&self, task: SubmitTask) -> Result<Submitted, EngineError> {
        // Checked here so that a bad task is refused alone and never sends its batch the slow way.
        task.validate()?;
        let i = &self.inner;
        let written = match self.writers() {
            0 => i.store.submit_task(task).await,
            writers => {
                let queue = i.submitter.get_or_init(|| {
                    let how = Submissions {
                        handoff: i.handoff.clone(),
                        metrics: i.metrics.clone(),
                        instance: i.instance.clone(),
                    };
                    GroupCommit::start(&i.store, writers, i.config.submit.max_batch, i.metrics.clone(), how)
                });
                match queue.send(task).await {
                    Ok(written) => written,
                    Err(task) => i.store.submit_task(task).await,
                }
            }
        };
        let s = written?;
        self.wake_after_write();
        self.ring_events();
        Ok(s)
    }

    /// Offers a remote worker's waiting poll's claim to the next submissions' transaction, which
    /// runs it after them and hands the claimed steps over after its commit (see
    /// `group_commit::handoff`). `None` when submissions are not grouped, when the store does not
    /// hand claims off (`Store::hands_off_claims`), or when an agent type of the claim has a
    /// concurrency or rate limit: the poll then claims on its own.
    pub fn offer_claim(&self, claim: &ClaimDueSteps) -> Option<Offered> {
        let limited = claim
            .limits
            .iter()
            .any(|l| (l.max_concurrent.is_some() || l.per_second.is_some()) && claim.agents.contains(&l.agent));
        if limited || self.writers() == 0 || !self.inner.store.hands_off_claims() {
            return None;
        }
        Some(self.inner.handoff.offer(claim.clone()))
    }

    /// Submits many tasks in one transaction (see `Store::submit_tasks`: each idempotent by its
    /// key, results in their order, all or none) and wakes this process's scheduler.
    pub async fn submit_many(&self, tasks: Vec<SubmitTask>) -> Result<Vec<Submitted>, EngineError> {
        let s = self.inner.store.submit_tasks(tasks).await?;
        self.wake_after_write();
        self.ring_events();
        Ok(s)
    }

    /// Records a remote worker's reply for a step (fenced by its lease token; see
    /// `Store::record_replies`) and wakes this process's scheduler for what it queued.
    /// Concurrent replies are written together, like submissions (group commit).
    pub async fn record_reply(&self, worker: InstanceId, reply: Reply) -> Result<ReplyOutcome, EngineError> {
        let i = &self.inner;
        let alone = |worker: InstanceId, reply: Reply| async move {
            let p = RecordReplies { instance: worker, replies: vec![reply], policies: i.policies.clone() };
            let outcome = i.store.record_replies(p).await?.into_iter().next();
            outcome.ok_or_else(|| StoreError::Backend("the store answered no outcome".into()))
        };
        let written = match self.writers() {
            0 => alone(worker, reply).await,
            writers => {
                let queue = i.replier.get_or_init(|| {
                    let how = Replies { policies: i.policies.clone() };
                    GroupCommit::start(&i.store, writers, i.config.submit.max_batch, i.metrics.clone(), how)
                });
                match queue.send((worker, reply)).await {
                    Ok(written) => written,
                    Err((worker, reply)) => alone(worker, reply).await,
                }
            }
        };
        let outcome = written?;
        if matches!(outcome, ReplyOutcome::Applied { .. }) {
            self.wake_after_write();
        }
        self.ring_events();
        Ok(outcome)
    }

    /// The group commit's writers: as configured, else as many as the store can use.
    fn writers(&self) -> usize {
        let i = &self.inner;
        i.config.submit.writers.unwrap_or_else(|| i.store.concurrent_writes())
    }

    /// Tells the scheduler that work may be due (after a submission made outside the engine).
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// After a write of this engine's that may have queued work: wakes the scheduler, unless the
    /// store already rang it at the write's commit.
    fn wake_after_write(&self) {
        if !self.inner.woken_by_store.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    /// Tells this process's event readers (streams, [`Engine::wait_for`]) that events may have
    /// been written: after a write made outside the engine, such as an operator's action.
    pub fn ring_events(&self) {
        self.inner.events.send_replace(());
    }

    /// A reader of the settled events after `after` that match `filter`, `page` at most per read,
    /// woken by this engine's event bell (see [`crate::follow`]).
    pub fn events(&self, filter: EventFilter, after: i64, page: u32) -> EventFollower {
        let (bell, live) = self.event_bell();
        // Without a channel, other processes' writes are seen only by polling.
        let poll = if live { FOLLOW_POLL } else { FOLLOW_POLL / 5 };
        EventFollower::new(self.inner.store.clone(), bell, filter, after, page, poll)
    }

    /// The event bell, with the store's due-work channel ringing it too (subscribed once); and
    /// whether that channel is live.
    fn event_bell(&self) -> (watch::Receiver<()>, bool) {
        let i = &self.inner;
        let live = i
            .events_channel
            .get_or_init(|| {
                let bell = i.events.clone();
                i.store.subscribe_due_work(Arc::new(move || {
                    bell.send_replace(());
                }))
            })
            .is_live();
        (i.events.subscribe(), live)
    }

    /// A task's events after the event `after` (none: from its first), in id order, as they are
    /// written; the stream ends after the events that leave the task completed, failed,
    /// cancelled, compensated or terminated (states it leaves only if an operator acts). An
    /// unknown task gives one [`EngineError::NoTask`]. Woken by the engine's bell and the store's
    /// channel, not a polling loop (a safety poll bounds how late a write of another process that
    /// queues no work is seen).
    pub fn follow(
        &self,
        task: TaskId,
        after: Option<i64>,
    ) -> impl futures_util::Stream<Item = Result<EventRecord, EngineError>> + Send + 'static {
        let filter = EventFilter { task_id: Some(task), ..EventFilter::default() };
        crate::follow::follow_task(self.events(filter, after.unwrap_or(0), FOLLOW_PAGE), task)
    }

    /// Waits until the task has ended (completed, failed, cancelled, compensated or terminated),
    /// at most `timeout`, and returns its record then: its state, and its output when it
    /// completed. [`EngineError::TimedOut`] at the bound; [`EngineError::NoTask`] for an unknown task.
    pub async fn wait_for(&self, task: TaskId, timeout: Duration) -> Result<TaskRecord, EngineError> {
        use futures_util::StreamExt;
        let store = self.inner.store.clone();
        let wait = async {
            // Only the task's own moves matter here: its step events are left unread.
            let kinds = TASK_MOVES.iter().map(|k| (*k).to_owned()).collect();
            let filter = EventFilter { task_id: Some(task), kinds, ..EventFilter::default() };
            let events = crate::follow::follow_task(self.events(filter, 0, FOLLOW_PAGE), task);
            let mut events = std::pin::pin!(events);
            while let Some(e) = events.next().await {
                e?;
            }
            crate::follow::find_task(store.as_ref(), task).await?.ok_or(EngineError::NoTask(task))
        };
        tokio::time::timeout(timeout, wait).await.map_err(|_| EngineError::TimedOut(timeout))?
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        let g = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let (w, a) = (&self.inner.webhook_counters, &self.inner.alert_counters);
        MetricsSnapshot {
            deliveries: [
                ("delivered", g(&w.delivered)),
                ("failed", g(&w.failed)),
                ("dead", g(&w.dead)),
                ("throttled", g(&w.throttled)),
                ("gone", g(&w.gone)),
            ],
            alerts: [
                ("raised", g(&a.raised)),
                ("folded", g(&a.folded)),
                ("sent", g(&a.sent)),
                ("failed", g(&a.failed)),
                ("dropped", g(&a.dropped)),
            ],
            polls_waiting: self.inner.handoff.waiting() as u64,
            ..self.inner.metrics.snapshot()
        }
    }

    pub fn scheduler(&self) -> Scheduler {
        let i = &self.inner;
        Scheduler {
            store: i.store.clone(),
            agents: i.agents.clone(),
            config: i.config.scheduler.clone(),
            instance: i.instance.clone(),
            policies: i.policies.clone(),
            metrics: i.metrics.clone(),
            wake: i.wake.clone(),
            claimed: i.supervisor_bell.clone(),
            events: i.events.clone(),
            notified: false,
            breakers: i.breakers.clone(),
        }
    }

    pub fn supervisor(&self) -> Supervisor {
        let i = &self.inner;
        Supervisor::new(
            i.store.clone(),
            i.instance.clone(),
            i.config.supervisor.clone(),
            i.policies.clone(),
            i.metrics.clone(),
        )
        .with_events(i.events.clone())
    }

    /// The client the dispatcher and the alerter send with: the builder's, or the default one
    /// (every non-public address refused).
    fn outbound(&self) -> Result<crate::outbound::Outbound, crate::outbound::OutboundError> {
        match &self.inner.outbound {
            Some(o) => Ok(o.clone()),
            None => crate::outbound::Outbound::new(&crate::outbound::OutboundConfig::default()),
        }
    }

    /// The status channels' dispatcher of this engine (`start` runs it when the role is on).
    pub fn dispatcher(&self) -> Result<crate::dispatcher::Dispatcher, crate::outbound::OutboundError> {
        Ok(crate::dispatcher::Dispatcher {
            store: self.inner.store.clone(),
            outbound: self.outbound()?,
            config: self.inner.config.webhooks.clone(),
            counters: self.inner.webhook_counters.clone(),
        })
    }

    /// The operator's alerter of this engine (`start` runs it with the supervisor role).
    pub fn alerter(&self) -> Result<crate::alerts::Alerter, crate::outbound::OutboundError> {
        Ok(crate::alerts::Alerter {
            store: self.inner.store.clone(),
            outbound: self.outbound()?,
            config: self.inner.config.alerts.clone(),
            counters: self.inner.alert_counters.clone(),
            metrics: self.inner.metrics.clone(),
            bell: Some(self.event_bell().0),
        })
    }

    /// What this process's alert sinks have done since it started.
    pub fn alert_counters(&self) -> &crate::alerts::AlertCounters {
        &self.inner.alert_counters
    }

    /// What this process's dispatcher has done since it started.
    pub fn webhook_counters(&self) -> &crate::dispatcher::DispatchCounters {
        &self.inner.webhook_counters
    }

    /// Starts this process's roles in the background.
    pub fn start(&self) -> RunningEngine {
        let (tx, rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let roles = self.inner.config.roles;
        // One listening connection per process: other processes' queued work wakes both roles.
        let subscription = (roles.scheduler || roles.supervisor).then(|| {
            let (wake, claimed) = (self.inner.wake.clone(), self.inner.supervisor_bell.clone());
            self.inner.store.subscribe_due_work(Arc::new(move || {
                wake.notify_one();
                claimed.notify_one();
            }))
        });
        let notified = subscription.as_ref().is_some_and(Subscription::is_live);
        if subscription.as_ref().is_some_and(Subscription::rings_own_writes) {
            self.inner.woken_by_store.store(true, Ordering::Relaxed);
        }
        if roles.scheduler {
            let scheduler = Scheduler { notified, ..self.scheduler() };
            tasks.push(tokio::spawn(scheduler.run(rx.clone())));
        }
        if roles.supervisor {
            let supervisor = self.supervisor().with_bell(self.inner.supervisor_bell.clone(), notified);
            tasks.push(tokio::spawn(supervisor.run(rx.clone())));
        }
        if roles.supervisor {
            match self.alerter() {
                Ok(a) => tasks.push(tokio::spawn(a.run(rx.clone()))),
                Err(e) => tracing::error!(error = %e, "alerter not started: its HTTP client cannot be made"),
            }
        }
        if roles.dispatcher {
            match self.dispatcher() {
                Ok(d) => tasks.push(tokio::spawn(d.run(rx.clone()))),
                Err(e) => tracing::error!(error = %e, "webhook dispatcher not started: its HTTP client cannot be made"),
            }
        }
        let s = &self.inner.config.scheduler;
        // The scheduler's own bounds end within this; the margin lets them act first.
        let bound = s.shutdown_grace + s.shutdown_writes + 3 * crate::scheduler::WIND_UP;
        let bound = if roles.dispatcher {
            bound.max(self.inner.config.webhooks.call_timeout + crate::scheduler::WIND_UP)
        } else {
            bound
        };
        // The alerter lets its sinks drain for a call timeout and a second.
        let bound = if roles.supervisor {
            bound.max(self.inner.config.alerts.call_timeout + Duration::from_secs(1) + crate::scheduler::WIND_UP)
        } else {
            bound
        };
        RunningEngine { shutdown: tx, tasks, bound, _subscription: subscription }
    }
}

/// The roles of an engine, running. Dropping it without [`RunningEngine::shutdown`] leaves them
/// running until the runtime stops.
pub struct RunningEngine {
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The longest a shutdown takes: the scheduler's grace period, its time to write replies, and
    /// a margin to wind up.
    bound: Duration,
    /// The due-work channel's listener, dropped with the engine.
    _subscription: Option<Subscription>,
}

impl RunningEngine {
    /// Stops claiming, lets running steps finish within the grace period, writes their replies,
    /// and resigns leader leases. Returns within the grace period plus `shutdown_writes` (and
    /// under two seconds to wind up) whatever the store does: a role still waiting on the store
    /// then is stopped where it is (what it had not written is left for the supervisor, as after
    /// a crash).
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let deadline = Instant::now() + self.bound;
        for mut t in self.tasks {
            if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
                tracing::warn!("shutdown: a role did not stop in time (the store does not answer); stopping it");
                t.abort();
            }
        }
    }
}
