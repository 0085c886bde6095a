//! Connections that die under the store: every failure is `Unavailable` (worth a retry), and the
//! pool replaces dead connections by itself.

mod common;

use common::{TestSchema, admin, test_db};
use shiftboss_postgres::PostgresStore;
use shiftboss_store::{Store, StoreError};

/// Kills every server process of connections named `app`; returns how many.
async fn terminate(url: &str, app: &str) -> i64 {
    let c = admin(url).await;
    let sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1";
    c.query_one(sql, &[&app]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_are_unavailable_then_replaced() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    // A name of this test's own, so that only this store's connections are killed.
    let app = s.name.clone();
    let sep = if url.contains('?') { '&' } else { '?' };
    let store_url = format!("{url}{sep}application_name={app}");
    let store = PostgresStore::connect(&store_url, &s.options(false)).await.unwrap();

    // Whether a call meets the dead connection or the pool notices first depends on timing: both
    // must end well, and ten rounds see both most runs.
    for round in 0..10 {
        // Several calls at once, so that the pool holds more than one connection to lose.
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.summarize().await })
            })
            .collect();
        for c in calls {
            c.await.unwrap().expect("calls before the kill work");
        }
        assert!(terminate(&url, &app).await >= 1, "round {round}: the store's connections were found");

        let mut failures = Vec::new();
        let recovered = loop {
            match store.task_counts().await {
                Ok(counts) => break counts,
                Err(e) => failures.push(e),
            }
            assert!(failures.len() <= 8, "round {round}: still failing after {} tries: {failures:?}", failures.len());
        };
        assert_eq!(recovered, vec![], "round {round}");
        assert!(
            failures.iter().all(|e| matches!(e, StoreError::Unavailable(_))),
            "round {round}: every failure is worth a retry: {failures:?}"
        );
    }
}
