//! The console's deployment-wide rates (issue 20): events of some kinds counted between reads.

use crate::Fixture;
use crate::support::*;
use serde_json::json;
use shiftboss_store::*;

pub async fn events_are_counted_by_kind_between_reads<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    h.register_standard().await;
    h.submit("before", "one", 0).await;
    let kinds = || vec![event_kind::STEP_PROCESSED.to_owned(), event_kind::STEP_ERROR.to_owned()];
    let first = h.store.count_events(CountEvents { after: None, kinds: kinds() }).await.expect("count");
    assert!(first.upto > 0 && first.counts.is_empty(), "the first read only marks where the log ends: {first:?}");

    let c = h.claim_one("s1").await;
    h.complete("s1", &c, json!({})).await;
    for key in ["a", "b"] {
        h.submit(key, "one", 0).await;
    }
    let a = h.claim_one("s1").await;
    h.complete("s1", &a, json!({})).await;
    let b = h.claim_one("s1").await;
    h.reply("s1", b.id, b.lease_token, ReplyResult::PermanentError("declined".into())).await;
    let second = h.store.count_events(CountEvents { after: Some(first.upto), kinds: kinds() }).await.expect("count");
    assert_eq!((second.of(event_kind::STEP_PROCESSED), second.of(event_kind::STEP_ERROR)), (2, 1), "{second:?}");
    assert!(second.upto > first.upto);
    let third = h.store.count_events(CountEvents { after: Some(second.upto), kinds: kinds() }).await.expect("count");
    assert_eq!((third.upto, third.counts.clone()), (second.upto, vec![]), "nothing new");

    let none = h.store.count_events(CountEvents { after: None, kinds: vec![] }).await;
    assert!(matches!(none, Err(StoreError::InvalidInput(_))));
}
