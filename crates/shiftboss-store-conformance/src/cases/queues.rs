//! Queues per agent type (metrics): due now, due later, running, in Error, and the oldest due
//! step's time; finished steps and control steps are not counted.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_store::{ReplyResult, Store};

pub async fn each_agent_types_queue_is_counted<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    assert!(h.store.queue_stats().await.expect("stats").agents.is_empty(), "an empty store has no queue");
    h.register(&one_step()).await;
    h.register(&retrying()).await;
    let t0 = h.now();
    for k in 0..3 {
        h.submit(&format!("due-{k}"), "one", 0).await;
    }
    h.advance(secs(5));
    // Three due since t0; one claimed (running); one that fails and waits 100 ms for its retry;
    // one that fails for good.
    let running = h.claim_one("s1").await;
    h.submit("flaky", "retrying", 0).await;
    let flaky = h.claim("s2", &[WORKER], 10).await;
    assert_eq!(flaky.len(), 3, "two due one-step tasks and the flaky one: {flaky:?}");
    let f = flaky.iter().find(|c| c.name == "flaky").expect("flaky claimed");
    h.reply("s2", f.id, f.lease_token, ReplyResult::Failed("busy".into())).await;
    let broken = flaky.iter().find(|c| c.name == "work").expect("a one-step claimed");
    h.reply("s2", broken.id, broken.lease_token, ReplyResult::PermanentError("no".into())).await;
    let done = flaky.iter().filter(|c| c.name == "work").nth(1).expect("the other one-step");
    h.complete("s2", done, json!({})).await;

    let stats = h.store.queue_stats().await.expect("stats");
    assert_eq!(stats.now, h.now());
    assert_eq!(stats.agents.len(), 1, "{stats:?}");
    let q = &stats.agents[0];
    assert_eq!(q.agent, WORKER);
    assert_eq!((q.due, q.later, q.processing, q.error), (0, 1, 1, 1), "{q:?}");
    assert_eq!(q.oldest_due_at, None, "nothing is due: the retry waits");
    // Once the retry falls due it is the oldest due step, by its due time.
    h.advance(secs(1));
    let q = h.store.queue_stats().await.expect("stats").agents.remove(0);
    assert_eq!((q.due, q.later), (1, 0), "{q:?}");
    assert!(q.oldest_due_at.is_some_and(|t| t > t0 && t <= h.now()), "{q:?}");
    drop(running);
}
