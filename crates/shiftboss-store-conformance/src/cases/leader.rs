//! elect_leader and resign_leader (P10): one holder per lease name; the term grows whenever the
//! lease changes hands, and leader-only writes of an old term are refused.

use crate::Fixture;
use crate::support::*;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_store::{LeaderTerm, Store, StoreError};

const TTL: std::time::Duration = std::time::Duration::from_secs(10);

async fn assert_refused<S: Store>(h: &Harness<S>, term: &LeaderTerm) {
    match h.expire(term, RetryPolicies::default()).await {
        Err(StoreError::NotLeader(_)) => {}
        other => panic!("term {} of {}: want NotLeader, got {other:?}", term.term, term.holder),
    }
}

pub async fn first_caller_gets_term_one_and_renewal_keeps_it<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let a = h.elect("supervisor", "sup-a", TTL).await.expect("first caller");
    assert_eq!((a.name.as_str(), a.holder.as_str(), a.term), ("supervisor", "sup-a", 1));
    assert_eq!(a.expires_at, T0.plus(TTL));
    assert_eq!(h.elect("supervisor", "sup-b", TTL).await, None, "the lease is live");

    h.advance(secs(5));
    let renewed = h.elect("supervisor", "sup-a", TTL).await.expect("renewal");
    assert_eq!(renewed.term, 1, "renewal keeps the term");
    assert_eq!(renewed.expires_at, h.now().plus(TTL), "renewal extends the lease");
    // Past the first expiry, but within the renewed one.
    h.advance(secs(9));
    assert_eq!(h.elect("supervisor", "sup-b", TTL).await, None);
    h.expire(&renewed, RetryPolicies::default()).await.expect("the renewed term is live");

    let other = h.elect("archiver", "sup-b", TTL).await.expect("another lease name is independent");
    assert_eq!(other.term, 1);
}

pub async fn another_holder_takes_over_after_the_ttl<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let a = h.elect("supervisor", "sup-a", TTL).await.expect("first caller");
    h.advance(TTL + ms(1));
    let b = h.elect("supervisor", "sup-b", TTL).await.expect("the lease lapsed");
    assert_eq!((b.holder.as_str(), b.term), ("sup-b", a.term + 1));
    assert_eq!(h.elect("supervisor", "sup-a", TTL).await, None, "the old holder cannot take it back");
    assert_refused(&h, &a).await;
    h.expire(&b, RetryPolicies::default()).await.expect("the new term is live");
}

pub async fn resign_hands_over_at_once_and_the_old_term_is_refused<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let a = h.elect("supervisor", "sup-a", TTL).await.expect("first caller");
    h.store.resign_leader(&a).await.expect("resign");
    // No waiting for the TTL: the clock has not moved.
    let b = h.elect("supervisor", "sup-b", TTL).await.expect("taken at once after a resignation");
    assert_eq!(b.term, a.term + 1);
    assert_refused(&h, &a).await;

    // Resigning a term that no longer holds does nothing.
    h.store.resign_leader(&a).await.expect("stale resign");
    assert_eq!(h.elect("supervisor", "sup-a", TTL).await, None, "sup-b still holds it");
    h.expire(&b, RetryPolicies::default()).await.expect("sup-b's term is live");

    h.store.resign_leader(&b).await.expect("resign");
    assert_eq!(h.elect("supervisor", "sup-a", TTL).await.expect("back to sup-a").term, b.term + 1);
}
