//! Subscriptions and deliveries (issue 18). The deliveries themselves are written with each
//! message's event, in its transaction (see `outbox`).

use crate::error::{bad_column, map_err};
use crate::tx::Tx;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_store::webhooks::{kinds_column, kinds_from_column};
use shiftboss_store::*;

const SUBSCRIPTION_COLUMNS: &str =
    "id, url, task_id, workflow, kinds, state, disabled_reason, paused_until, description, created_at, updated_at";

fn subscription(r: &Row<'_>) -> rusqlite::Result<SubscriptionRecord> {
    let state: String = r.get(5)?;
    let paused: i64 = r.get(7)?;
    Ok(SubscriptionRecord {
        id: r.get(0)?,
        url: r.get(1)?,
        task_id: r.get::<_, Option<i64>>(2)?.map(TaskId),
        workflow: r.get(3)?,
        kinds: kinds_from_column(&r.get::<_, String>(4)?),
        state: SubscriptionState::parse(&state).ok_or_else(|| bad_column("subscriptions.state", state))?,
        disabled_reason: r.get(6)?,
        paused_until: (paused > 0).then_some(Timestamp(paused)),
        description: r.get(8)?,
        created_at: Timestamp(r.get(9)?),
        updated_at: Timestamp(r.get(10)?),
    })
}

pub const DELIVERY_COLUMNS: &str = "id, subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version, \
     task_state, step, output, error, state, attempts, due_at, last_status, last_error, delivered_at, created_at, \
     updated_at";

pub fn delivery(r: &Row<'_>) -> rusqlite::Result<DeliveryRecord> {
    let kind: String = r.get(5)?;
    let state: String = r.get(14)?;
    Ok(DeliveryRecord {
        id: r.get(0)?,
        subscription_id: r.get(1)?,
        task_id: TaskId(r.get(2)?),
        seq: r.get(3)?,
        event_id: r.get(4)?,
        kind: MessageKind::parse(&kind).ok_or_else(|| bad_column("deliveries.kind", kind))?,
        at: Timestamp(r.get(6)?),
        task_key: r.get(7)?,
        workflow: r.get(8)?,
        version: r.get(9)?,
        task_state: r.get(10)?,
        step: r.get(11)?,
        output: r.get(12)?,
        error: r.get(13)?,
        state: DeliveryState::parse(&state).ok_or_else(|| bad_column("deliveries.state", state))?,
        attempts: r.get(15)?,
        due_at: Timestamp(r.get(16)?),
        last_status: r.get(17)?,
        last_error: r.get(18)?,
        delivered_at: r.get::<_, Option<i64>>(19)?.map(Timestamp),
        created_at: Timestamp(r.get(20)?),
        updated_at: Timestamp(r.get(21)?),
    })
}

/// Inserts a subscription: a standing one, or (with `task`) a task's own, in its submission's
/// transaction.
pub fn insert(
    t: &Tx<'_>,
    target: &WebhookTarget,
    task: Option<TaskId>,
    workflow: Option<&str>,
    description: Option<&str>,
) -> Result<i64, StoreError> {
    t.tx.prepare_cached(
        "INSERT INTO subscriptions (url, secret, task_id, workflow, kinds, state, description, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'active', ?6, ?7, ?7) RETURNING id",
    )
    .and_then(|mut st| {
        st.query_row(
            params![
                target.url,
                target.secret,
                task.map(|t| t.0),
                workflow,
                kinds_column(&target.kinds),
                description,
                t.now.0
            ],
            |r| r.get(0),
        )
    })
    .map_err(map_err)
}

pub fn create(t: &Tx<'_>, p: &NewSubscription) -> Result<SubscriptionRecord, StoreError> {
    let id = insert(t, &p.target, None, p.workflow.as_deref(), p.description.as_deref())?;
    get(t.tx, id)?.ok_or_else(|| StoreError::Backend("a subscription just written is gone".into()))
}

pub fn list(c: &Connection) -> Result<Vec<SubscriptionRecord>, StoreError> {
    let sql = format!(
        "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions INDEXED BY subscriptions_standing WHERE task_id IS NULL ORDER BY id"
    );
    let mut st = c.prepare_cached(&sql).map_err(map_err)?;
    let rows = st.query_map([], subscription).map_err(map_err)?;
    rows.collect::<Result<_, _>>().map_err(map_err)
}

pub fn get(c: &Connection, id: i64) -> Result<Option<SubscriptionRecord>, StoreError> {
    let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE id = ?1");
    c.prepare_cached(&sql).map_err(map_err)?.query_row([id], subscription).optional().map_err(map_err)
}

pub fn set_state(t: &Tx<'_>, p: &SetSubscriptionState) -> Result<SubscriptionRecord, StoreError> {
    let reason = match p.state {
        SubscriptionState::Active => None,
        SubscriptionState::Disabled => Some(p.reason.clone().unwrap_or_else(|| "disabled by an operator".into())),
    };
    let n =
        t.tx.prepare_cached(
            "UPDATE subscriptions SET state = ?2, disabled_reason = ?3, paused_until = 0, updated_at = ?4 WHERE id = ?1",
        )
        .and_then(|mut st| st.execute(params![p.id, p.state.as_str(), reason, t.now.0]))
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::NotFound { what: "subscription", id: p.id.to_string() });
    }
    get(t.tx, p.id)?.ok_or_else(|| StoreError::Backend("a subscription just written is gone".into()))
}

pub fn delete(t: &Tx<'_>, id: i64) -> Result<bool, StoreError> {
    t.tx.execute("DELETE FROM deliveries WHERE subscription_id = ?1 AND state <> 'delivered'", [id])
        .map_err(map_err)?;
    let n = t.tx.execute("DELETE FROM subscriptions WHERE id = ?1", [id]).map_err(map_err)?;
    Ok(n > 0)
}

pub fn claim(t: &Tx<'_>, p: &ClaimDeliveries) -> Result<ClaimedDeliveries, StoreError> {
    let now = t.now.0;
    let lease_end = now.saturating_add(duration_ms(p.lease));
    let from = p.due_from.map_or(i64::MIN, |f| f.0);
    // Picked, then updated by id: the picked rows' due times (before the claim moves them to the
    // lease's end) tell how far this claim took the queue (`taken_through`).
    let picked: Vec<(i64, i64)> = {
        let mut st =
            t.tx.prepare_cached(
                "SELECT d.id, d.due_at FROM deliveries d INDEXED BY deliveries_due
                   JOIN subscriptions s ON s.id = d.subscription_id
                  WHERE d.state = 'pending' AND d.due_at <= ?1 AND d.due_at >= ?2
                    AND s.state = 'active' AND s.paused_until <= ?1
                  ORDER BY d.due_at, d.id LIMIT ?3",
            )
            .map_err(map_err)?;
        let rows = st.query_map(params![now, from, p.limit], |r| Ok((r.get(0)?, r.get(1)?))).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    let full = picked.len() >= p.limit as usize;
    let latest_due = picked.iter().map(|&(_, due)| due).max().unwrap_or(now);
    let ids = serde_json::Value::from(picked.iter().map(|&(id, _)| id).collect::<Vec<i64>>()).to_string();
    let sql = format!(
        "UPDATE deliveries SET due_at = ?2, lock_token = lock_token + 1, attempts = attempts + 1, updated_at = ?1
          WHERE id IN (SELECT value FROM json_each(?3))
          RETURNING {DELIVERY_COLUMNS}, lock_token"
    );
    let mut claimed: Vec<(DeliveryRecord, i64)> = if picked.is_empty() {
        Vec::new()
    } else {
        let mut st = t.tx.prepare_cached(&sql).map_err(map_err)?;
        let rows = st.query_map(params![now, lease_end, ids], |r| Ok((delivery(r)?, r.get(22)?))).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    claimed.sort_by_key(|(d, _)| d.id);
    let mut deliveries = Vec::with_capacity(claimed.len());
    let mut target = t.tx.prepare_cached("SELECT url, secret FROM subscriptions WHERE id = ?1").map_err(map_err)?;
    for (delivery, token) in claimed {
        let (url, secret): (String, String) =
            target.query_row([delivery.subscription_id], |r| Ok((r.get(0)?, r.get(1)?))).map_err(map_err)?;
        deliveries.push(ClaimedDelivery { delivery, url, secret, token });
    }
    let next_due = if !full {
        // The next one to fall due: one step down the due index, however many wait (a pause's
        // end is not looked for: the dispatcher's idle poll finds it).
        t.tx.prepare_cached(
            "SELECT min(due_at) FROM deliveries INDEXED BY deliveries_due WHERE state = 'pending' AND due_at > ?1",
        )
        .and_then(|mut st| st.query_row([now], |r| r.get::<_, Option<i64>>(0)))
        .map_err(map_err)?
    } else {
        None
    };
    let next_due = next_due.map(|t| Timestamp(t).since(Timestamp(now)));
    let taken_through = Timestamp(if full { latest_due } else { now });
    Ok(ClaimedDeliveries { deliveries, now: Timestamp(now), next_due, taken_through })
}

pub fn record(t: &Tx<'_>, outcomes: &[DeliveryOutcome]) -> Result<Vec<bool>, StoreError> {
    let now = t.now.0;
    let mut out = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        let w = o.result.write(now);
        let (state, due, undo_attempt, error, delivered) =
            (w.state.as_str(), w.due_at, w.undo_attempt, w.error, w.delivered_at);
        let status = w.status;
        let row: Option<(i64, i64)> =
            t.tx.prepare_cached(
                "UPDATE deliveries SET state = ?3, due_at = ?4, attempts = attempts - ?5, last_status = ?6,
                        last_error = coalesce(?7, last_error), delivered_at = ?8, updated_at = ?9
                  WHERE id = ?1 AND lock_token = ?2 AND state = 'pending'
                 RETURNING subscription_id, task_id",
            )
            .and_then(|mut st| {
                st.query_row(params![o.id, o.token, state, due, undo_attempt, status, error, delivered, now], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(map_err)?;
        let Some((subscription, task)) = row else {
            out.push(false);
            continue;
        };
        match &o.result {
            DeliveryResult::Gone { .. } => {
                t.tx.execute(
                    "UPDATE subscriptions SET state = 'disabled', disabled_reason = ?2, updated_at = ?3
                      WHERE id = ?1 AND state = 'active'",
                    params![subscription, "the receiver answered 410 Gone", now],
                )
                .map_err(map_err)?;
            }
            DeliveryResult::Throttled { .. } => {
                // The receiver's pause ends when this delivery falls due again.
                let until = w.due_at;
                t.tx.execute(
                    "UPDATE subscriptions SET paused_until = max(paused_until, ?2) WHERE id = ?1",
                    params![subscription, until],
                )
                .map_err(map_err)?;
            }
            DeliveryResult::Dead { status, error } => {
                let detail = json!({"delivery": o.id, "subscription": subscription, "status": status, "error": error});
                t.event(TaskId(task), None, event_kind::DELIVERY_DEAD, EventLevel::Alert, "dispatcher", detail)?;
            }
            _ => {}
        }
        out.push(true);
    }
    Ok(out)
}

pub fn backlog(c: &Connection, cap: u32, now: Timestamp) -> Result<DeliveryBacklog, StoreError> {
    // Each count stops at the cap; the earliest due one is the first entry of the due index.
    let mut st = c
        .prepare_cached(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE state = 'pending' LIMIT ?1)),
                    (SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE state = 'dead' LIMIT ?1)),
                    (SELECT min(due_at) FROM deliveries WHERE state = 'pending')",
        )
        .map_err(map_err)?;
    st.query_row([cap], |r| {
        Ok(DeliveryBacklog {
            pending: r.get::<_, i64>(0)? as u64,
            dead: r.get::<_, i64>(1)? as u64,
            oldest_due: r.get::<_, Option<i64>>(2)?.map(Timestamp),
            now,
        })
    })
    .map_err(map_err)
}

pub fn list_deliveries(c: &Connection, q: &DeliveryQuery) -> Result<Vec<DeliveryRecord>, StoreError> {
    let mut sql = format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id < ?1");
    if q.state.is_some() {
        sql.push_str(" AND state = ?2");
    }
    if q.subscription.is_some() {
        sql.push_str(" AND subscription_id = ?3");
    }
    if q.task.is_some() {
        sql.push_str(" AND task_id = ?4");
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?5");
    let mut st = c.prepare_cached(&sql).map_err(map_err)?;
    let before = q.before.unwrap_or(i64::MAX);
    let state = q.state.map(|s| s.as_str());
    let mut bind = |i: usize, v: &dyn rusqlite::ToSql| st.raw_bind_parameter(i, v);
    bind(1, &before).map_err(map_err)?;
    if let Some(s) = state {
        bind(2, &s).map_err(map_err)?;
    }
    if let Some(s) = q.subscription {
        bind(3, &s).map_err(map_err)?;
    }
    if let Some(task) = q.task {
        bind(4, &task.0).map_err(map_err)?;
    }
    bind(5, &q.limit.min(MAX_DELIVERIES)).map_err(map_err)?;
    let mut rows = st.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(map_err)? {
        out.push(delivery(r).map_err(map_err)?);
    }
    Ok(out)
}

pub fn get_delivery(c: &Connection, id: i64) -> Result<Option<DeliveryRecord>, StoreError> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id = ?1
         UNION ALL SELECT {DELIVERY_COLUMNS} FROM deliveries_history WHERE id = ?1 LIMIT 1"
    );
    c.prepare_cached(&sql).map_err(map_err)?.query_row([id], delivery).optional().map_err(map_err)
}

pub fn redeliver(t: &Tx<'_>, p: &Redeliver) -> Result<RedeliverReport, StoreError> {
    let ids: Vec<i64> = if let Some(sub) = p.subscription {
        let mut st =
            t.tx.prepare_cached(
                "SELECT id FROM deliveries WHERE subscription_id = ?1 AND state = 'dead' ORDER BY id LIMIT ?2",
            )
            .map_err(map_err)?;
        let rows = st.query_map(params![sub, MAX_DELIVERIES], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    } else {
        let mut st = t
            .tx
            .prepare_cached("SELECT id FROM deliveries WHERE id IN (SELECT value FROM json_each(?1)) AND state <> 'pending' ORDER BY id")
            .map_err(map_err)?;
        let rows = st.query_map([json!(p.ids).to_string()], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)?
    };
    if !p.dry_run && !ids.is_empty() {
        t.tx.prepare_cached(
            "UPDATE deliveries SET state = 'pending', due_at = ?2, attempts = 0, lock_token = lock_token + 1,
                    delivered_at = NULL, updated_at = ?2
              WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .and_then(|mut st| st.execute(params![json!(ids).to_string(), t.now.0]))
        .map_err(map_err)?;
    }
    Ok(RedeliverReport { ids })
}
