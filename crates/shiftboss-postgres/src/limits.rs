//! Limits per agent type, across every instance of the store: how many of its steps may be
//! Processing at once, and how many may be claimed per second.
//!
//! Counting and then claiming is a check-then-write, so claimers of one limited agent must take
//! turns: a claim locks the agent's row of `agent_rates` (FOR UPDATE, held until it commits) before
//! it counts. The next claimer waits for that commit, and its count (a new statement, so a new
//! snapshot at READ COMMITTED) then sees the steps just claimed. Rows of several agents are locked
//! in one statement in agent order, and a claim waits for nothing else (its step locks are SKIP
//! LOCKED), so claimers cannot deadlock.

use crate::rows::get;
use crate::tx::Tx;
use shiftboss_store::{AgentLimit, StoreError};
use std::collections::HashMap;

/// The width of a rate limit's window.
const RATE_WINDOW_MS: i64 = 1000;

/// The locked rate rows of one claim: per agent, its window's start and the claims in it.
pub struct Allowances {
    rates: HashMap<String, (i64, i64)>,
}

/// Locks the rate rows of these agents (creating the missing ones) until the transaction ends.
pub async fn lock_limited(t: &Tx<'_>, limits: &[&AgentLimit]) -> Result<Allowances, StoreError> {
    let mut agents: Vec<&str> = limits.iter().map(|l| l.agent.as_str()).collect();
    agents.sort_unstable();
    agents.dedup();
    // Inserted in agent order too: two first claims of the same new agents wait on each other's
    // inserts in one order.
    t.execute(
        "INSERT INTO agent_rates (agent, window_start, used)
         SELECT a, 0, 0 FROM unnest($1::text[]) AS a ORDER BY a
         ON CONFLICT (agent) DO NOTHING",
        &[&agents],
    )
    .await?;
    let rows = t
        .query(
            "SELECT agent, window_start, used FROM agent_rates WHERE agent = ANY($1) ORDER BY agent FOR UPDATE",
            &[&agents],
        )
        .await?;
    let rates = rows.iter().map(|r| Ok((get(r, 0)?, (get(r, 1)?, get(r, 2)?)))).collect::<Result<_, StoreError>>()?;
    Ok(Allowances { rates })
}

fn window_of(t: &Tx<'_>) -> i64 {
    t.now.0 - t.now.0.rem_euclid(RATE_WINDOW_MS)
}

impl Allowances {
    /// How many more steps of a limited agent may start now. Its row is locked (see [`lock_limited`]).
    pub async fn room(&self, t: &Tx<'_>, limit: &AgentLimit) -> Result<u32, StoreError> {
        let mut room = u32::MAX;
        if let Some(max) = limit.max_concurrent {
            let row = t
                .query_one("SELECT count(*) FROM steps WHERE state = 'processing' AND agent = $1", &[&limit.agent])
                .await?;
            let running = u32::try_from(get::<i64>(&row, 0)?).unwrap_or(u32::MAX);
            room = room.min(max.saturating_sub(running));
        }
        if let Some(per_second) = limit.per_second {
            let used = match self.rates.get(&limit.agent) {
                Some(&(start, used)) if start == window_of(t) => used,
                _ => 0,
            };
            room = room.min(u32::try_from((i64::from(per_second) - used).max(0)).unwrap_or(0));
        }
        Ok(room)
    }

    /// Counts `n` claims of a rate-limited agent in the current window.
    pub async fn used(&mut self, t: &Tx<'_>, limit: &AgentLimit, n: u32) -> Result<(), StoreError> {
        if limit.per_second.is_none() {
            return Ok(());
        }
        let window = window_of(t);
        let used = match self.rates.get(&limit.agent) {
            Some(&(start, used)) if start == window => used + i64::from(n),
            _ => i64::from(n),
        };
        t.execute(
            "UPDATE agent_rates SET window_start = $2, used = $3 WHERE agent = $1",
            &[&limit.agent, &window, &used],
        )
        .await?;
        self.rates.insert(limit.agent.clone(), (window, used));
        Ok(())
    }
}
