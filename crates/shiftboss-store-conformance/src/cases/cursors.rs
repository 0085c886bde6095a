//! Named cursors (issue 18): a reader of the event log keeps where it stands across restarts; a
//! cursor only moves forward, and bad names and positions are refused without a change.

use crate::Fixture;
use crate::support::*;
use shiftboss_store::*;

pub async fn a_cursor_is_kept_and_only_moves_forward<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let s = &h.store;
    assert_eq!(s.read_cursor("alerter").await.expect("read"), Some(0), "a new store's alerter reads from the start");
    assert_eq!(s.read_cursor("reader").await.expect("read"), None, "never moved: none");
    s.advance_cursor("reader", 40).await.expect("advance");
    assert_eq!(s.read_cursor("reader").await.expect("read"), Some(40));
    s.advance_cursor("reader", 12).await.expect("a position behind is no error");
    assert_eq!(s.read_cursor("reader").await.expect("read"), Some(40), "it does not move back");
    s.advance_cursor("reader", 41).await.expect("advance");
    assert_eq!(s.read_cursor("reader").await.expect("read"), Some(41));
    assert_eq!(s.read_cursor("other").await.expect("read"), None, "each name is its own cursor");

    let long = "x".repeat(cursors::MAX_CURSOR_NAME_LEN + 1);
    for bad in ["", "a\nb", long.as_str()] {
        assert!(matches!(s.advance_cursor(bad, 5).await, Err(StoreError::InvalidInput(_))), "{bad:?} refused");
        assert!(matches!(s.read_cursor(bad).await, Err(StoreError::InvalidInput(_))), "{bad:?} refused");
    }
    assert!(matches!(s.advance_cursor("reader", -1).await, Err(StoreError::InvalidInput(_))));
    assert_eq!(s.read_cursor("reader").await.expect("read"), Some(41), "refusals changed nothing");
}
