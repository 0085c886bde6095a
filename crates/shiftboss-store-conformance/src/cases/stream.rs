//! The event log read as a stream (issue 18): every event after a cursor, in id order, with
//! filters, from the hot tables and history, a bounded page at a time; a reader that goes on from
//! the last id it saw misses nothing and repeats nothing.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_core::TaskId;
use shiftboss_core::model::EventRecord;
use shiftboss_store::*;

/// Reads from `from` until the store has nothing more to give, `limit` events per read; the
/// events and the cursor then.
async fn read_through<S: Store>(
    h: &Harness<S>,
    filter: EventFilter,
    from: i64,
    limit: u32,
) -> (Vec<StreamEvent>, EventCursor) {
    let mut cursor = EventCursor::after(from);
    let mut got = Vec::new();
    for _ in 0..10_000 {
        let p = ReadEvents { cursor, filter: filter.clone(), limit };
        let read = h.store.read_events(p).await.expect("read_events");
        assert!(read.events.len() <= limit as usize, "a read holds at most its limit");
        assert!(read.cursor.after >= cursor.after, "the cursor never goes back");
        cursor = read.cursor;
        let idle = read.events.is_empty();
        got.extend(read.events);
        if !read.again {
            return (got, cursor);
        }
        if idle {
            // Events not settled yet: a transaction that may hold an earlier id still runs
            // (on PostgreSQL, any transaction of the cluster). Nothing announces its end.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    panic!("reading the log does not end");
}

async fn read_all<S: Store>(h: &Harness<S>, filter: EventFilter, from: i64, limit: u32) -> Vec<StreamEvent> {
    read_through(h, filter, from, limit).await.0
}

fn ids(events: &[StreamEvent]) -> Vec<i64> {
    events.iter().map(|e| e.event.id).collect()
}

/// Every event of these tasks, from `get_task`, in id order.
async fn log_of<S: Store>(h: &Harness<S>, tasks: &[TaskId]) -> Vec<EventRecord> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(h.task(*t).await.events);
    }
    all.sort_by_key(|e| e.id);
    all
}

pub async fn every_event_once_in_id_order_with_filters<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let a = h.submit("order-1", "three", 0).await;
    let b = h.submit("order-2", "one", 0).await;
    let c = h.submit("invoice-1", "one", 0).await;
    for _ in 0..3 {
        let s = h.claim_one("s").await;
        h.complete("s", &s, json!({"ok": true})).await;
    }
    let all = log_of(&h, &[a, b, c]).await;
    assert!(all.len() >= 10, "enough events to page: {}", all.len());
    let want: Vec<i64> = all.iter().map(|e| e.id).collect();

    for limit in [1, 3, 1000] {
        let got = read_all(&h, EventFilter::default(), 0, limit).await;
        assert_eq!(ids(&got), want, "pages of {limit}: every event once, in id order");
    }
    let got = read_all(&h, EventFilter::default(), 0, 1000).await;
    let first = got.iter().find(|e| e.event.task_id == a).expect("a's events");
    assert_eq!(
        (first.task_key.as_str(), first.workflow.as_str()),
        ("order-1", "three"),
        "with its task's key and workflow"
    );
    let about_steps: Vec<&StreamEvent> = got.iter().filter(|e| e.event.step_id.is_some()).collect();
    assert!(!about_steps.is_empty());
    for e in &about_steps {
        let d = h.task(e.event.task_id).await;
        let step = d.steps.iter().find(|s| Some(s.id) == e.event.step_id).expect("the event's step");
        assert_eq!(e.step.as_deref(), Some(step.name.as_str()), "an event about a step names it");
    }
    assert!(got.iter().filter(|e| e.event.step_id.is_none()).all(|e| e.step.is_none()));
    assert_eq!(got.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), all, "the same records the task's log holds");

    // Resuming after any id gives exactly the rest.
    let mid = want[want.len() / 2];
    assert_eq!(ids(&read_all(&h, EventFilter::default(), mid, 2).await), want[want.len() / 2 + 1..].to_vec());

    let only = |f: EventFilter, pred: &dyn Fn(&EventRecord) -> bool| {
        let want: Vec<i64> = all.iter().filter(|e| pred(e)).map(|e| e.id).collect();
        (f, want)
    };
    let cases = [
        only(EventFilter { task_id: Some(a), ..EventFilter::default() }, &|e| e.task_id == a),
        only(EventFilter { workflow: Some("one".into()), ..EventFilter::default() }, &|e| e.task_id != a),
        only(EventFilter { key_prefix: Some("order-".into()), ..EventFilter::default() }, &|e| e.task_id != c),
        only(EventFilter { kinds: vec![event_kind::TASK_COMPLETED.into()], ..EventFilter::default() }, &|e| {
            e.kind == event_kind::TASK_COMPLETED
        }),
        only(
            EventFilter {
                workflow: Some("one".into()),
                key_prefix: Some("order".into()),
                kinds: vec![event_kind::TASK_RECEIVED.into(), event_kind::STEP_CLAIMED.into()],
                ..EventFilter::default()
            },
            &|e| e.task_id == b && (e.kind == event_kind::TASK_RECEIVED || e.kind == event_kind::STEP_CLAIMED),
        ),
    ];
    for (filter, want) in cases {
        assert!(!want.is_empty(), "{filter:?} matches something");
        for limit in [1, 1000] {
            assert_eq!(ids(&read_all(&h, filter.clone(), 0, limit).await), want, "{filter:?}, pages of {limit}");
        }
    }
    let none = EventFilter { workflow: Some("nothing".into()), ..EventFilter::default() };
    let (got, cursor) = read_through(&h, none, 0, 10).await;
    assert!(got.is_empty());
    assert_eq!(cursor.after, *want.last().unwrap(), "a filter that matches nothing still moves the cursor on");

    let bad = EventFilter { key_prefix: Some("a\0".into()), ..EventFilter::default() };
    let r = h.store.read_events(ReadEvents { cursor: EventCursor::after(0), filter: bad, limit: 10 }).await;
    assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{r:?}");
    let r = h.store.read_events(ReadEvents { cursor: EventCursor::after(0), filter: EventFilter::default(), limit: 0 });
    assert!(matches!(r.await, Err(StoreError::InvalidInput(_))));
}

pub async fn new_events_follow_and_archived_ones_stay_readable<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    let a = h.submit("a", "one", 0).await;
    let first = read_all(&h, EventFilter::default(), 0, 100).await;
    let seen = *ids(&first).last().expect("a's first events");
    // Nothing new: nothing read again.
    assert!(read_all(&h, EventFilter::default(), seen, 100).await.is_empty());
    // From now on: the first read moves the cursor after the newest event.
    let p = ReadEvents { cursor: EventCursor::latest(), filter: EventFilter::default(), limit: 10 };
    let now = h.store.read_events(p).await.expect("read");
    assert!(now.events.is_empty() && !now.again);
    assert_eq!(now.cursor.after, seen, "after the newest event");
    let s = h.claim_one("s").await;
    h.complete("s", &s, json!({})).await;
    let next = read_all(&h, EventFilter::default(), seen, 100).await;
    let mut union = ids(&first);
    union.extend(ids(&next));
    let want: Vec<i64> = log_of(&h, &[a]).await.iter().map(|e| e.id).collect();
    assert_eq!(union, want, "what came before and after the cursor make the log, once each");

    // The archiver moves the task and its events to history: a reader from the start still
    // finds them, and a new task's events come after.
    h.advance(secs(60));
    let leader = h.elect("archiver", "a1", secs(3600)).await.expect("leader");
    h.store.archive(Archive { leader, after: secs(30), keep: None, limit: 100 }).await.expect("archive");
    assert!(h.store.get_task(a).await.expect("get").is_none(), "moved to history");
    let b = h.submit("b", "one", 0).await;
    let archived = h.store.get_archived_task(a).await.expect("get").expect("in history").events;
    let mut want: Vec<i64> = archived.iter().map(|e| e.id).collect();
    want.extend(h.task(b).await.events.iter().map(|e| e.id));
    want.sort_unstable();
    for limit in [1, 100] {
        assert_eq!(ids(&read_all(&h, EventFilter::default(), 0, limit).await), want, "pages of {limit}");
    }
    let only_a = EventFilter { task_id: Some(a), ..EventFilter::default() };
    let got = read_all(&h, only_a, 0, 100).await;
    assert_eq!(got.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), archived);
    assert!(got.iter().all(|e| e.task_key == "a"), "history's task row names the key");
}
