//! The store reads its server's replication (issue 26). The shared test server has no standby;
//! the failover test (`crates/shiftboss/tests/pg_failover.rs`) reads one with standbys.

mod common;

use common::{TestSchema, admin, test_db};
use shiftboss_postgres::PostgresStore;
use shiftboss_store::Store;

#[tokio::test]
async fn a_server_without_standbys_says_so_and_warns_of_nothing() {
    let Some(url) = test_db() else { return };
    let s = TestSchema::migrated(&url).await;
    let store = PostgresStore::connect(&url, &s.options(false)).await.unwrap();
    let r = store.replication().await.unwrap().expect("PostgreSQL reports its replication");
    let c = admin(&url).await;
    let commit: String = c.query_one("SHOW synchronous_commit", &[]).await.unwrap().get(0);
    let streaming: i64 = c.query_one("SELECT count(*) FROM pg_stat_replication", &[]).await.unwrap().get(0);
    assert_eq!(r.synchronous_commit, commit);
    assert_eq!(i64::from(r.standbys), streaming);
    if streaming == 0 {
        assert_eq!(r.warning(), None, "{r:?}");
    }
}
