//! The remote worker registry (issue 17): workers seen per agent type, their first and last time
//! by the store's clock, forgotten when unseen for long; and the task keys a worker's claim carries.

use crate::Fixture;
use crate::support::*;
use shiftboss_store::{AgentWorker, Store, StoreError, WorkerSeen, WorkersSeen};
use std::time::Duration;

fn seen(pairs: &[(&str, &str)], forget_after: Duration) -> WorkersSeen {
    WorkersSeen {
        seen: pairs.iter().map(|(a, w)| WorkerSeen { agent: a.to_string(), worker: w.to_string() }).collect(),
        forget_after,
    }
}

fn row(agent: &str, worker: &str, first: Duration, last: Duration) -> AgentWorker {
    AgentWorker {
        agent: agent.into(),
        worker: worker.into(),
        first_seen_at: T0.plus(first),
        last_seen_at: T0.plus(last),
    }
}

pub async fn workers_are_recorded_per_agent_type_and_forgotten_when_unseen<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let day = secs(86_400);
    assert!(h.store.list_agent_workers().await.expect("list").is_empty());
    // One worker polling two types, the same pair twice in one report (counted once).
    h.store
        .record_workers_seen(seen(&[("ship", "py-1"), ("pay", "py-1"), ("ship", "py-1")], day))
        .await
        .expect("record");
    h.advance(secs(5));
    h.store.record_workers_seen(seen(&[("ship", "py-2"), ("ship", "py-1")], day)).await.expect("record again");
    let list = h.store.list_agent_workers().await.expect("list");
    assert_eq!(
        list,
        vec![
            row("pay", "py-1", secs(0), secs(0)),
            row("ship", "py-1", secs(0), secs(5)),
            row("ship", "py-2", secs(5), secs(5)),
        ],
        "by agent then worker, first seen kept, last seen moved on"
    );

    // Unseen for longer than forget_after: gone at the next report; the others stay.
    h.advance(secs(60));
    h.store.record_workers_seen(seen(&[("ship", "py-2")], secs(30))).await.expect("record");
    let list = h.store.list_agent_workers().await.expect("list");
    assert_eq!(list, vec![row("ship", "py-2", secs(5), secs(65))]);

    // Bad ids change nothing.
    for bad in [seen(&[("ship", "has space")], day), seen(&[("bad agent", "w")], day), seen(&[("ship", "")], day)] {
        let r = h.store.record_workers_seen(bad.clone()).await;
        assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{bad:?}: {r:?}");
    }
    assert_eq!(h.store.list_agent_workers().await.expect("list").len(), 1);
}
