//! The decide-and-write path, written once for every store: run the core's decider on a task inside
//! the transaction that changed it, and turn what it decides into writes (steps created, moved and
//! cancelled, child tasks started and ended, parents told, the task's own move, events). Operator
//! actions, submission and the take-back of lapsed leases end in the same path.
//!
//! A store implements [`WriteTx`], the reads and writes of one open write transaction, with its
//! own SQL; everything else here is the same for every store, so that a new step kind, a new
//! message written beside a state change or a new operator action is written in one place.
//!
//! Why an async trait that SQLite answers at once: PostgreSQL's statements are network round trips
//! and must be awaited, while SQLite's run on the writer's blocking thread. Each SQLite method does
//! its work before it returns a future that is already complete, and the SQLite store polls the
//! whole operation once (`shiftboss_sqlite::tx::run_now`); PostgreSQL awaits it on its runtime.
//! The functions here are generic over the store (not `dyn`), so each store's futures keep their
//! own auto traits: PostgreSQL's are `Send`, SQLite's need not be.
//!
//! Why a work list rather than recursion: a decide may start a child task (which decides at once),
//! a child that ends moves its parent, a cancelled step ends its child's whole tree. Recursion in
//! async code needs a boxed future, and a boxed future must name its auto traits, which a generic
//! store cannot. So the tasks to decide and the trees to end wait in an agenda (`agenda.rs`) that one loop
//! drains, a task decided again until it waits on something outside the transaction.

mod agenda;
mod bulk;
mod children;
mod decide;
mod expire;
mod failure;
mod operator;
mod register;
mod replies;
mod submit;
mod tx;

pub use bulk::bulk_act;
pub use decide::{Advanced, advance_decided, advance_new_task, advance_task, end_tree, time_out};
pub use expire::{HeldStep, take_back, write_plan};
pub use operator::{operate_task, resubmit_step};
pub use register::{definition_text, registered_again};
pub use replies::{RepliedStep, refuse_reply};
pub use submit::{submit_task, submit_tasks};
pub use tx::{KeyOwner, Keyed, NewTask, TaskRow, WriteTx, domains_of, domains_text};

/// How deep sub-workflows may nest: a workflow that starts itself stops here, with an error.
pub const MAX_CHILD_DEPTH: i64 = 16;

/// How many times one task may be decided within one transaction: a decide that keeps moving its
/// own task (a child that ends at once, again and again) is a bug, not work.
pub const MAX_ROUNDS: usize = 64;

/// The `due_at` of a step nobody may claim: the pending steps of a paused task wait here until it
/// resumes, and an `alert_only` step past its complete-by keeps its holder with no deadline.
pub const HELD: i64 = i64::MAX;

/// The longest error text kept on a step; a longer one is cut at a character boundary.
pub const MAX_ERROR_LEN: usize = 2000;

/// An agent's or a lapse's error text as a step keeps it: at most [`MAX_ERROR_LEN`] bytes, and no
/// NUL (PostgreSQL's text refuses it; SQLite would keep it, and the stores must agree).
pub fn error_text(s: &str) -> String {
    let clean: std::borrow::Cow<'_, str> = if s.contains('\0') { s.replace('\0', "\u{FFFD}").into() } else { s.into() };
    if clean.len() <= MAX_ERROR_LEN {
        return clean.into_owned();
    }
    let mut end = MAX_ERROR_LEN;
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &clean[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_is_cut_at_a_boundary_and_loses_nul() {
        assert_eq!(error_text("short"), "short");
        assert_eq!(error_text("a\0b"), "a\u{FFFD}b");
        let long = "é".repeat(MAX_ERROR_LEN);
        let cut = error_text(&long);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= MAX_ERROR_LEN + '…'.len_utf8());
        assert!(cut.trim_end_matches('…').chars().all(|c| c == 'é'));
    }
}
