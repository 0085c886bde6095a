//! Properties of leases under random interleavings of what schedulers and a supervisor do (claim,
//! reply, time passing, the sweep, a restart's release), against a real SQLite file on a manual
//! clock, checked against a model of each step's claims:
//! - a step is never claimed while a claim of it is live, nor after it completed (a task never has
//!   two live claims of one step; a completed step is never scheduled again);
//! - a reply is applied exactly when it carries the step's live claim, whatever its timing;
//! - a sweep takes back only leases whose complete-by has passed;
//! - every lapse is counted once: FailureCount equals the step's expiries and releases, and no two
//!   of them name the same lease.

use proptest::prelude::*;
use serde_json::json;
use shiftboss_core::retry::RetryPolicies;
use shiftboss_core::{StepId, StepState};
use shiftboss_sqlite::{Durability, OpenOptions, SqliteStore};
use shiftboss_store::{ClaimedStep, Clock, ReplyOutcome, ReplyResult, event_kind as ev};
use shiftboss_store_conformance::Fixture;
use shiftboss_store_conformance::support::*;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

struct File(tempfile::TempDir);

impl Fixture for File {
    type Store = SqliteStore;
    async fn open(&self, clock: Clock) -> SqliteStore {
        let opts = OpenOptions { durability: Durability::Normal, ..OpenOptions::default() };
        SqliteStore::open_with_clock(self.0.path().join("state.db"), &opts, clock).expect("open the store")
    }
}

const SCHEDULERS: [&str; 3] = ["sched-1", "sched-2", "sched-3"];

#[derive(Debug, Clone)]
enum Op {
    Claim { by: usize, limit: u32 },
    Reply { pick: usize, ok: bool },
    Advance { ms: u64 },
    Sweep,
    Restart { by: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 1..4u32).prop_map(|(by, limit)| Op::Claim { by, limit }),
        3 => (any::<usize>(), prop::bool::weighted(0.85)).prop_map(|(pick, ok)| Op::Reply { pick, ok }),
        2 => (0..2500u64).prop_map(|ms| Op::Advance { ms }),
        2 => Just(Op::Sweep),
        1 => (0..3usize).prop_map(|by| Op::Restart { by }),
    ]
}

/// What the model knows of one step.
#[derive(Debug, Default)]
struct Model {
    /// The live claim: its holder, token and complete-by.
    live: Option<(usize, i64, i64)>,
    finished: bool,
}

async fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let h = Harness::open(&File(tempfile::tempdir().unwrap())).await;
    h.register_standard().await;
    let leader = h.supervisor().await;
    let mut tasks = Vec::new();
    for k in 0..3 {
        tasks.push(h.submit(&format!("three-{k}"), "three", 0).await);
    }
    tasks.push(h.submit("retrying-0", "retrying", 0).await);
    let mut model: HashMap<StepId, Model> = HashMap::new();
    // Claims still in some scheduler's hands (live or not: a slow holder still replies).
    let mut held: Vec<(usize, ClaimedStep)> = Vec::new();
    for op in ops {
        match op {
            Op::Claim { by, limit } => {
                for c in h.claim(SCHEDULERS[by], &[WORKER], limit).await {
                    let m = model.entry(c.id).or_default();
                    prop_assert!(m.live.is_none(), "step {} claimed by {by} while {:?} holds it", c.id, m.live);
                    prop_assert!(!m.finished, "step {} claimed after it finished", c.id);
                    m.live = Some((by, c.lease_token.0, c.complete_by.0));
                    held.push((by, c));
                }
            }
            Op::Reply { pick, ok } if !held.is_empty() => {
                let (by, c) = held.remove(pick % held.len());
                let result = if ok {
                    ReplyResult::Completed(json!({"by": by}))
                } else {
                    ReplyResult::PermanentError("no".into())
                };
                let outcome = h.reply(SCHEDULERS[by], c.id, c.lease_token, result).await;
                let m = model.entry(c.id).or_default();
                let live = m.live.is_some_and(|(_, token, _)| token == c.lease_token.0);
                prop_assert_eq!(
                    matches!(outcome, ReplyOutcome::Applied { .. }),
                    live,
                    "reply of step {} with lease {}: {:?}, model {:?}",
                    c.id,
                    c.lease_token.0,
                    outcome,
                    m
                );
                if live {
                    m.live = None;
                    m.finished = true;
                }
            }
            Op::Reply { .. } => {}
            Op::Advance { ms } => h.advance(Duration::from_millis(ms)),
            Op::Sweep => {
                h.expire(&leader, RetryPolicies::default()).await.expect("the sweep");
                lapse(&h, &tasks, &mut model, true).await?;
            }
            Op::Restart { by } => {
                h.release(SCHEDULERS[by], RetryPolicies::default()).await;
                lapse(&h, &tasks, &mut model, false).await?;
                for m in model.values() {
                    prop_assert!(m.live.is_none_or(|(holder, ..)| holder != by), "a release left {by}'s claim live");
                }
            }
        }
    }
    // Every lapse counted once.
    for t in &tasks {
        let d = h.task(*t).await;
        for s in &d.steps {
            let lapses: Vec<i64> = d
                .events
                .iter()
                .filter(|e| e.step_id == Some(s.id) && (e.kind == ev::STEP_EXPIRED || e.kind == ev::STEP_RELEASED))
                .filter_map(|e| e.detail.get("lease_token").and_then(|v| v.as_i64()))
                .collect();
            let distinct: HashSet<i64> = lapses.iter().copied().collect();
            prop_assert_eq!(distinct.len(), lapses.len(), "step {} lapsed twice under one lease", s.id);
            prop_assert_eq!(s.failure_count as usize, lapses.len(), "step {}'s FailureCount", s.id);
        }
    }
    Ok(())
}

/// Reads back the steps the model thinks live: those the store took back are no longer live. A
/// sweep may take back only leases whose complete-by has passed by the store's clock.
async fn lapse(
    h: &Harness<SqliteStore>,
    tasks: &[shiftboss_core::TaskId],
    model: &mut HashMap<StepId, Model>,
    sweep: bool,
) -> Result<(), TestCaseError> {
    let now = h.now().0;
    for t in tasks {
        for s in h.task(*t).await.steps {
            let Some(m) = model.get_mut(&s.id) else { continue };
            let Some((_, token, complete_by)) = m.live else { continue };
            let still = s.state == StepState::Processing && s.lease_token.0 == token;
            if !still {
                prop_assert!(!sweep || complete_by < now + 1, "step {} taken back before its complete-by", s.id);
                m.live = None;
                m.finished = s.state == StepState::Error;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn leases_fence_every_interleaving(ops in prop::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(check(ops))?;
    }
}
