//! Status channels (issue 18): how fast a message reaches its receiver, how many the dispatcher
//! sends per second, and what one subscription per task costs the drain. A receiver in this
//! process takes the webhooks (loopback, answers 204 at once); one engine in this process runs
//! the no-op step and the dispatcher, as `serve` does by default.
//!
//! - Idle: one task every `--every`, each with its own subscription to `task.received`; the
//!   latency is from `submit`'s return (the commit) to the message's arrival.
//! - Drain: `--tasks` one-step no-op tasks submitted (not timed), then drained by a fresh engine,
//!   each task of the drains with channels with its own subscription to every message (3 per
//!   task: received, step completed, completed):
//!   `--rounds` times, three drains in turns of order (the figures are the rounds' medians, and
//!   each ratio the median of the rounds' ratios to the drain without):
//!   1. without subscriptions;
//!   2. with them, the draining engine's dispatcher off, as when dispatchers run in other
//!      processes (`serve --roles dispatcher`): what writing the outbox in each change's
//!      transaction costs the drain. Then a dispatcher alone sends what it wrote: deliveries per
//!      second;
//!   3. with them, the draining engine also delivering, as `serve` does by default, on the same
//!      cores (and beside this process's receiver): tasks per second, and the latency of the
//!      messages written while the drain ran (step completed, completed), from the event's time
//!      in the message to its arrival, by the wall clock (one host: the store's clock is this one).

use super::{BenchError, noop, stats, store_name};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use clap::Args;
use serde_json::{Value, json};
use shiftboss::target::DbTarget;
use shiftboss_core::InstanceId;
use shiftboss_engine::config::Roles;
use shiftboss_engine::outbound::{Outbound, OutboundConfig};
use shiftboss_engine::{Engine, RunningEngine};
use shiftboss_store::{MessageKind, Store, SubmitTask, WebhookTarget};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, Args)]
pub struct NotifyArgs {
    /// Tasks of each drain.
    #[arg(long, default_value_t = 20_000)]
    tasks: u64,
    /// Tasks of the idle round.
    #[arg(long, default_value_t = 200)]
    idle: u64,
    /// The pause between two tasks of the idle round.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    every: Duration,
    /// Steps in flight; claims and reply batches take up to half of them.
    #[arg(long, default_value_t = 2048)]
    concurrency: u32,
    /// Rounds of the three drains (without channels, writing them, also delivering them; each
    /// round all three, in turns of order); the figures are their medians.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    rounds: u32,
    /// Give up a phase after this long.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Deliveries in flight at once (`[webhooks] concurrency`); the engine's default if not given.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    webhook_concurrency: Option<u32>,
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One message as it arrived.
struct Arrival {
    at: Instant,
}

#[derive(Default)]
struct Inbox {
    /// By (task key, message kind): the first arrival.
    first: Mutex<HashMap<(String, String), Arrival>>,
    /// The first arrivals in their order (key, kind, when, and milliseconds from the event's time in
    /// the message to the arrival by the wall clock), for [`arrivals`] to read
    /// from where it left off: scanning the whole map every 10 ms under its lock cost more CPU
    /// than the dispatcher it measured, and held up the receiver.
    order: Mutex<Vec<(String, String, Instant, f64)>>,
}

async fn receive(State(inbox): State<Arc<Inbox>>, body: String) -> StatusCode {
    let at = Instant::now();
    let wall = SystemTime::now();
    let Ok(msg) = serde_json::from_str::<Value>(&body) else { return StatusCode::BAD_REQUEST };
    let (Some(kind), Some(key), Some(stamp)) =
        (msg["type"].as_str(), msg["data"]["key"].as_str(), msg["timestamp"].as_str())
    else {
        return StatusCode::BAD_REQUEST;
    };
    let since_event_ms = humantime::parse_rfc3339(stamp)
        .ok()
        .and_then(|t| wall.duration_since(t).ok())
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let new = {
        let mut first = inbox.first.lock().unwrap_or_else(|p| p.into_inner());
        let entry = first.entry((key.to_owned(), kind.to_owned()));
        let new = matches!(entry, std::collections::hash_map::Entry::Vacant(_));
        entry.or_insert(Arrival { at });
        new
    };
    if new {
        inbox.order.lock().unwrap_or_else(|p| p.into_inner()).push((
            key.to_owned(),
            kind.to_owned(),
            at,
            since_event_ms,
        ));
    }
    StatusCode::NO_CONTENT
}

pub async fn run(db: &DbTarget, a: NotifyArgs) -> anyhow::Result<Value> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = db.open(true).await?;
    store.register_workflow(&noop::workflow()).await?;
    let inbox = Arc::new(Inbox::default());
    let app = Router::new().route("/hook", post(receive)).with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let target = |kinds: Vec<MessageKind>| WebhookTarget { url: url.clone(), secret: SECRET.into(), kinds };
    let run = noop::run_id();

    // Idle: one task at a time.
    let first = engine(store.clone(), &a, None)?;
    let running = first.start();
    let mut idle = Vec::new();
    for i in 0..a.idle {
        let mut task = noop::job(&format!("{run}-idle"), i);
        task.notify = Some(target(vec![MessageKind::Received]));
        let key = task.key.clone();
        first.submit(task).await?;
        let committed = Instant::now();
        let arrived = wait_for(&inbox, &key, "task.received", Duration::from_secs(10)).await;
        let Some(arrived) = arrived else {
            running.shutdown().await;
            anyhow::bail!("bench notify: task {key}'s message did not arrive within 10 s");
        };
        idle.push(arrived.saturating_duration_since(committed).as_secs_f64() * 1000.0);
        tokio::time::sleep(a.every).await;
    }
    running.shutdown().await;
    eprintln!("bench notify: idle round done ({} tasks); the drains follow", a.idle);

    // Each round drains three times: without channels, writing them (then a dispatcher alone sends
    // what that drain wrote), and writing them while the draining engine delivers (then its
    // dispatcher sends the rest before anything else runs). The order turns from round to round
    // (a later drain runs beside the earlier ones' finished rows), so that each ratio is of
    // neighbours.
    let mut rounds = Vec::new();
    let mut sent = Vec::new();
    let mut load = Vec::new();
    for r in 0..a.rounds {
        let mut three = [0.0f64; 3];
        for k in 0..3 {
            let which = (k + r as usize) % 3;
            let label = format!("{}{r}", ["plain", "written", "delivering"][which]);
            let mine = format!("-{label}-");
            let notify = (which > 0).then(|| target(Vec::new()));
            let (d, running) = drain(&store, &run, &label, a.tasks, notify, which == 2, &a).await?;
            three[which] = d.per_s;
            match which {
                0 => running.shutdown().await,
                1 => {
                    running.shutdown().await;
                    let sender = engine(
                        store.clone(),
                        &a,
                        Some(Roles { scheduler: false, supervisor: false, dispatcher: true }),
                    )?;
                    let sending = Instant::now();
                    let running = sender.start();
                    let arrived = arrivals(&inbox, &mine, a.tasks * 3, a.timeout).await;
                    running.shutdown().await;
                    let (_, last) = arrived?;
                    sent.push(last.saturating_duration_since(sending).as_secs_f64());
                }
                _ => {
                    // The engine runs on after the drain: its dispatcher sends what is left.
                    let arrived = arrivals(&inbox, &mine, a.tasks * 3, a.timeout).await;
                    running.shutdown().await;
                    load.extend(arrived?.0);
                }
            }
        }
        eprintln!(
            "bench notify: round {}: {:.0} tasks/s without, {:.0} writing the outbox ({:.2}x), {:.0} also delivering ({:.2}x)",
            r + 1,
            three[0],
            three[1],
            three[1] / three[0],
            three[2],
            three[2] / three[0]
        );
        rounds.push(three);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let of = |i: usize| median(rounds.iter().map(|p| p[i]).collect());
    let ratio_of = |i: usize| median(rounds.iter().map(|p| p[i] / p[0]).collect());
    let deliveries_s = median(sent);
    Ok(json!({
        "workload": "notify", "store": store_name(db), "tasks": a.tasks, "concurrency": a.concurrency,
        "webhook_concurrency": a.webhook_concurrency.map_or(shiftboss_engine::DispatchConfig::default().concurrency, |n| n as usize),
        "idle": stats::summary(idle),
        "rounds": rounds.iter().map(|p| json!({"without_per_s": stats::round3(p[0]), "with_per_s": stats::round3(p[1]),
            "ratio": stats::round3(p[1] / p[0]), "delivering_per_s": stats::round3(p[2]),
            "ratio_delivering": stats::round3(p[2] / p[0])})).collect::<Vec<_>>(),
        "drain_without_per_s": stats::round3(of(0)),
        "drain_with_per_s": stats::round3(of(1)),
        "ratio": stats::round3(ratio_of(1)),
        "drain_delivering_per_s": stats::round3(of(2)),
        "ratio_delivering": stats::round3(ratio_of(2)),
        "deliveries": a.tasks * 3,
        "deliveries_per_s": stats::round3((a.tasks * 3) as f64 / deliveries_s.max(1e-9)),
        "under_load": stats::summary(load),
    }))
}

/// Waits for `expected` first arrivals of tasks whose key contains `label`: the latencies of
/// those written during a drain (all but `task.received`), and when the last one arrived.
async fn arrivals(inbox: &Inbox, label: &str, expected: u64, within: Duration) -> anyhow::Result<(Vec<f64>, Instant)> {
    let give_up = Instant::now() + within;
    let (mut read, mut n, mut last, mut load) = (0usize, 0u64, None::<Instant>, Vec::new());
    loop {
        {
            let order = inbox.order.lock().unwrap_or_else(|p| p.into_inner());
            for (key, kind, at, since_event_ms) in &order[read..] {
                if key.contains(label) {
                    n += 1;
                    last = Some(last.map_or(*at, |l: Instant| l.max(*at)));
                    if kind != "task.received" {
                        load.push(*since_event_ms);
                    }
                }
            }
            read = order.len();
        }
        if let Some(last) = last
            && n >= expected
        {
            return Ok((load, last));
        }
        if Instant::now() > give_up {
            return Err(BenchError::Timeout { what: "deliveries", after: within, done: n, total: expected }.into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An engine that runs the no-op step and sends webhooks to loopback.
fn engine(store: Arc<dyn Store>, a: &NotifyArgs, roles: Option<Roles>) -> anyhow::Result<Engine> {
    let outbound = Outbound::new(&OutboundConfig::allowing_loopback())?;
    let mut config = noop::config(a.concurrency);
    if let Some(n) = a.webhook_concurrency {
        config.webhooks.concurrency = n as usize;
    }
    if let Some(roles) = roles {
        config.roles = roles;
    }
    let b = Engine::builder(store, InstanceId::new("bench-notify")?)
        .config(config)
        .agent("noop", noop::Noop::default())
        .outbound(outbound);
    Ok(b.build()?)
}

struct Drained {
    per_s: f64,
}

/// Submits `n` tasks (not timed), then times a fresh engine's drain of them (its dispatcher on
/// if `dispatch`); the engine goes on running.
async fn drain(
    store: &Arc<dyn Store>,
    run: &str,
    label: &str,
    n: u64,
    notify: Option<WebhookTarget>,
    dispatch: bool,
    a: &NotifyArgs,
) -> anyhow::Result<(Drained, RunningEngine)> {
    let mut i = 0;
    while i < n {
        let batch: Vec<SubmitTask> = (i..n.min(i + 1000))
            .map(|k| SubmitTask { notify: notify.clone(), ..noop::job(&format!("{run}-{label}"), k) })
            .collect();
        store.submit_tasks(batch).await?;
        i = n.min(i + 1000);
    }
    let roles = Roles { dispatcher: dispatch, ..Roles::default() };
    let engine = engine(store.clone(), a, Some(roles))?;
    let started = Instant::now();
    let running = engine.start();
    let give_up = started + a.timeout;
    loop {
        let done = engine.metrics().completed;
        if done >= n {
            let per_s = n as f64 / started.elapsed().as_secs_f64();
            return Ok((Drained { per_s }, running));
        }
        if Instant::now() > give_up {
            running.shutdown().await;
            return Err(BenchError::Timeout { what: "drain", after: a.timeout, done, total: n }.into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// When the message of `kind` for task `key` arrived; none within `within`.
async fn wait_for(inbox: &Inbox, key: &str, kind: &str, within: Duration) -> Option<Instant> {
    let give_up = Instant::now() + within;
    let k = (key.to_owned(), kind.to_owned());
    loop {
        if let Some(a) = inbox.first.lock().unwrap_or_else(|p| p.into_inner()).get(&k) {
            return Some(a.at);
        }
        if Instant::now() > give_up {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}
