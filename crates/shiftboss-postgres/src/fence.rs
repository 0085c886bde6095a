//! How a fenced write finds its row.
//!
//! A reply, a heartbeat, a lapse or a dispatcher's outcome finds its row by id and then checks
//! that the row is still in the state its claim left it in (`id = $1 AND lease_token = $2 AND
//! state = 'processing'`). Written that way, PostgreSQL may answer it through a partial index on
//! that state (`steps_processing`, `steps_deadline`, `deliveries_due`) instead of the primary key:
//! when the statistics say the state is rare, the partial index looks smaller and as selective.
//! They say so after any ANALYZE taken before a drain (nothing processing yet), which is the
//! store's own analyze after a bulk enqueue (`planner`). The write then walks every processing
//! step to find its one. Seen with auto_explain on this machine: a reply batch of 1,000 took
//! 840 ms instead of a few, and a 20,000-job drain ran at 3,400-4,600 jobs/s instead of
//! 12,000 in about half of the runs, depending on when the analyze had sampled.
//!
//! So a fence that finds one row writes its state test as `(state = 'processing') IS TRUE`. It
//! means the same (the column is NOT NULL), but no partial index's predicate can be proved from
//! it, and the planner keeps to the key.
//!
//! A batch's statement joins its rows (an `unnest` of the batch's arrays) to the table, and there
//! a filter on the state estimated at nearly no rows does worse than pick an index: the planner
//! takes the table's side for one row and loops over the whole batch for each of the rows it
//! really finds, a batch of 1,000 costing a million comparisons. So the batch names its ids
//! (`id = ANY($1)`, estimated from the array, not from the statistics) and compares the state
//! with a column of the batch's own rows (`s.state = r.held`, a join condition, which no
//! statistics of the table's can shrink and no partial index can answer). The planner then knows
//! both sides for the batch's size and joins them by hash or by key.
//!
//! `tests/planner.rs` reads the plans of these statements under such statistics.

/// The fenced statements whose plans the tests read, by name.
#[doc(hidden)]
pub fn fenced_statements() -> [(&'static str, &'static str); 3] {
    [
        ("reply set", crate::reply_set::APPLY),
        ("one reply", crate::replies::APPLY_ONE),
        ("delivery outcomes", crate::webhooks::RECORD),
    ]
}
