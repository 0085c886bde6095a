//! The outbox (issue 18): a message's deliveries, written in the transaction of its event.
//!
//! Every event of this store reaches its table through `Tx::flush_events`, which hands the message
//! events it inserted (their kinds are `MessageKind::of_event`'s) to [`write`]: one statement
//! writes a delivery for each of them and each active subscription of its task that wants it, and
//! another for the standing ones. A store without any subscription pays one lookup per flush and
//! nothing per event. Migration 14 did this with a row trigger on `events`, which ran for every
//! event, message or not, subscriber or not (about a tenth of a one-step job drain with no
//! subscription anywhere); migration 22 dropped it.
//!
//! What a delivery says is copied in when it is written, so that every attempt sends the same
//! body. `seq` numbers the task's messages 1, 2, 3... (its message events up to this one), the same
//! for every subscription; a task's messages are written under its decide lock, so in id order.

use crate::error::map_err;
use crate::tx::Tx;
use shiftboss_store::StoreError;
use std::sync::LazyLock;

/// The message a row `ev` of `events` is (`MessageKind::of_event`, as text).
const KIND: &str = "CASE ev.kind WHEN 'step.processed' THEN 'step.completed' \
                    WHEN 'task.compensation_failed' THEN 'task.failed' ELSE ev.kind END";

/// The deliveries of the message events whose ids `?1` lists (a JSON array, in event order), to
/// the subscriptions that `subscribers` joins as `s` (it may read the task, `t`). `CROSS JOIN`
/// keeps the written order of the loops, so rows are written in event order. Conditions on
/// `kind` are equalities joined by OR, not a list: SQLite builds a temporary b-tree for a list on
/// every run (see migration 7).
fn insert(subscribers: &str) -> String {
    format!(
        "INSERT INTO deliveries (subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version,
                                 task_state, step, output, error, state, due_at, created_at, updated_at)
         SELECT s.id, ev.task_id,
                (SELECT count(*) FROM events e WHERE e.task_id = ev.task_id AND e.id <= ev.id
                    AND (e.kind = 'task.received' OR e.kind = 'step.processed' OR e.kind = 'step.error'
                         OR e.kind = 'task.paused' OR e.kind = 'task.resumed' OR e.kind = 'task.compensating'
                         OR e.kind = 'task.completed' OR e.kind = 'task.failed' OR e.kind = 'task.compensation_failed'
                         OR e.kind = 'task.compensated' OR e.kind = 'task.cancelled' OR e.kind = 'task.terminated')),
                ev.id, {KIND}, ev.at, t.task_key, t.workflow, t.workflow_version, t.state,
                st.name,
                CASE WHEN ev.kind = 'step.processed' THEN st.output WHEN ev.kind = 'task.completed' THEN t.output END,
                CASE WHEN ev.kind = 'step.error' THEN coalesce(st.last_error, json_extract(ev.detail, '$.error'))
                     WHEN ev.kind = 'task.failed' OR ev.kind = 'task.compensation_failed'
                     THEN coalesce(json_extract(ev.detail, '$.reason'), 'a compensation failed')
                END,
                'pending', ev.at, ev.at, ev.at
           FROM json_each(?1) j
           CROSS JOIN events ev ON ev.id = j.value
           CROSS JOIN tasks t ON t.id = ev.task_id
           {subscribers}
           LEFT JOIN steps st ON st.id = ev.step_id
          WHERE s.kinds = '' OR instr(s.kinds, ',' || {KIND} || ',') > 0"
    )
}

/// To the tasks' own subscriptions.
static OWN: LazyLock<String> = LazyLock::new(|| {
    insert("CROSS JOIN subscriptions s INDEXED BY subscriptions_task ON s.task_id = ev.task_id AND s.state = 'active'")
});

/// To the standing subscriptions (every task, or every task of one workflow).
static STANDING: LazyLock<String> = LazyLock::new(|| {
    insert(
        "CROSS JOIN subscriptions s INDEXED BY subscriptions_standing ON s.task_id IS NULL AND s.state = 'active'
             AND (s.workflow IS NULL OR s.workflow = t.workflow)",
    )
});

/// Writes the deliveries of the message events `ids` (in event order). True if it wrote any.
pub fn write(t: &Tx<'_>, ids: &[i64]) -> Result<bool, StoreError> {
    if ids.is_empty() {
        return Ok(false);
    }
    run(t, ids).map_err(map_err)
}

fn run(t: &Tx<'_>, ids: &[i64]) -> rusqlite::Result<bool> {
    // Most stores have no subscription at all, or no standing one: a lookup each per flush.
    let (own, standing): (bool, bool) =
        t.tx.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM subscriptions INDEXED BY subscriptions_task WHERE task_id IS NOT NULL),
                    EXISTS (SELECT 1 FROM subscriptions INDEXED BY subscriptions_standing WHERE task_id IS NULL)",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if !own && !standing {
        return Ok(false);
    }
    // One statement per kind of subscription for the whole flush, not one per message: each
    // statement copies the pages it is the first to change into the statement journal.
    let list = serde_json::Value::from(ids).to_string();
    let mut wrote = 0;
    if own {
        wrote += t.tx.prepare_cached(&OWN)?.execute([&list])?;
    }
    if standing {
        wrote += t.tx.prepare_cached(&STANDING)?.execute([&list])?;
    }
    Ok(wrote > 0)
}
