//! A primary that stops answering (its processes frozen, its sockets open) is given up within the
//! store's bounds, and the next host of a multi-host URL is used (issue 26, item 1). Two proxies of
//! the test's own stand for the two hosts in front of the one shared server: the first goes silent,
//! as a frozen primary does, while the second answers, as a promoted standby would.

mod common;

use common::proxy::{Mode, Proxy, upstream_of};
use common::*;
use shiftboss_postgres::{PgOptions, PostgresStore};
use shiftboss_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const STORE_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// What the machine's load may add to a bound (the suite runs beside two other builds).
const SLACK: Duration = Duration::from_secs(3);

/// The test database's URL with its `host:port` replaced by `a,b`.
fn two_hosts(url: &str, a: &Proxy, b: &Proxy) -> String {
    let upstream = upstream_of(url);
    url.replacen(&upstream, &format!("{},{}", a.addr, b.addr), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_first_host_is_given_up_and_the_second_used() {
    let Some(url) = test_db() else { return };
    let (schema, _) = PgSchema::create(&url).await;
    let upstream = upstream_of(&url);
    let (first, second) = (Proxy::start(upstream.clone()).await, Proxy::start(upstream).await);
    let opts = PgOptions {
        schema: schema.name.clone(),
        pool_size: 2,
        store_timeout: STORE_TIMEOUT,
        connect_timeout: CONNECT_TIMEOUT,
        ..PgOptions::default()
    };
    let multi = two_hosts(&url, &first, &second);
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&multi, &opts).await.unwrap());
    store.task_counts().await.expect("both hosts answer");

    // The first host freezes: its connections stay open and nothing comes back.
    first.set(Mode::Silent);
    let t = Instant::now();
    let frozen = store.task_counts().await;
    let waited = t.elapsed();
    let e = frozen.expect_err("a call on the silent host's connection cannot succeed");
    assert!(e.is_transient(), "a silent server is a store out of reach: {e}");
    assert!(waited < STORE_TIMEOUT + SLACK, "the call was given up after {waited:?}, not within {STORE_TIMEOUT:?}");

    // The next call connects afresh, and tries the second host first: the silent one did not
    // answer, and trying it first would cost every new connection its whole connect bound.
    let t = Instant::now();
    store.task_counts().await.expect("the second host answers");
    let waited = t.elapsed();
    assert!(waited < CONNECT_TIMEOUT, "the second host was reached after {waited:?}: the silent one was tried first");
    // And calls go on at once: the silent host's connections left the pool with the first timeout.
    let t = Instant::now();
    for _ in 0..5 {
        store.task_counts().await.expect("the second host answers");
    }
    assert!(t.elapsed() < SLACK, "five calls took {:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_a_store_skips_a_silent_first_host() {
    let Some(url) = test_db() else { return };
    let (schema, _) = PgSchema::create(&url).await;
    let upstream = upstream_of(&url);
    let (first, second) = (Proxy::start(upstream.clone()).await, Proxy::start(upstream).await);
    first.set(Mode::Silent);
    let opts = PgOptions {
        schema: schema.name.clone(),
        pool_size: 2,
        store_timeout: STORE_TIMEOUT,
        connect_timeout: CONNECT_TIMEOUT,
        ..PgOptions::default()
    };
    let t = Instant::now();
    let store = PostgresStore::connect(&two_hosts(&url, &first, &second), &opts).await;
    store.expect("the second host answers").task_counts().await.unwrap();
    assert!(t.elapsed() < CONNECT_TIMEOUT + SLACK, "connected after {:?}", t.elapsed());
}
