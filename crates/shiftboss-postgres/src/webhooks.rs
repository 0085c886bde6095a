//! Subscriptions and deliveries (issue 18): the same rules as the SQLite store's `webhooks.rs`.
//! The deliveries themselves are written by the `events_outbox` trigger (migration 11), in the
//! transaction of each message's event.

use crate::error::bad_column;
use crate::rows::get;
use crate::tx::{Conn, Tx};
use serde_json::json;
use shiftboss_core::model::EventLevel;
use shiftboss_core::time::duration_ms;
use shiftboss_core::{TaskId, Timestamp};
use shiftboss_store::webhooks::{kinds_column, kinds_from_column};
use shiftboss_store::*;
use tokio_postgres::Row;

/// A batch of a dispatcher's outcomes, each fenced by its claim's token (see `record`), written
/// so that its rows are found by id whatever the statistics say (see `fence`).
pub(crate) const RECORD: &str = "
WITH u AS MATERIALIZED (
    SELECT o.*, 'pending'::text AS held
      FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::int[], $6::int[], $7::text[],
                  $8::bigint[])
        AS o(id, token, state, due, undo, status, error, delivered)
)
UPDATE deliveries d SET state = u.state, due_at = u.due, attempts = d.attempts - u.undo,
       last_status = u.status, last_error = coalesce(u.error, d.last_error),
       delivered_at = u.delivered, updated_at = $9
  FROM u
 WHERE d.id = ANY($1) AND d.id = u.id AND d.lock_token = u.token AND d.state = u.held
RETURNING d.id, d.subscription_id, d.task_id";

const SUBSCRIPTION_COLUMNS: &str =
    "id, url, task_id, workflow, kinds, state, disabled_reason, paused_until, description, created_at, updated_at";

fn subscription(r: &Row) -> Result<SubscriptionRecord, StoreError> {
    let state: String = get(r, 5)?;
    let paused: i64 = get(r, 7)?;
    Ok(SubscriptionRecord {
        id: get(r, 0)?,
        url: get(r, 1)?,
        task_id: get::<Option<i64>>(r, 2)?.map(TaskId),
        workflow: get(r, 3)?,
        kinds: kinds_from_column(get(r, 4)?),
        state: SubscriptionState::parse(&state).ok_or_else(|| bad_column("subscriptions.state", state))?,
        disabled_reason: get(r, 6)?,
        paused_until: (paused > 0).then_some(Timestamp(paused)),
        description: get(r, 8)?,
        created_at: Timestamp(get(r, 9)?),
        updated_at: Timestamp(get(r, 10)?),
    })
}

const DELIVERY_COLUMNS: &str = "id, subscription_id, task_id, seq, event_id, kind, at, task_key, workflow, version, \
     task_state, step, output, error, state, attempts, due_at, last_status, last_error, delivered_at, created_at, \
     updated_at";

fn delivery(r: &Row) -> Result<DeliveryRecord, StoreError> {
    let kind: String = get(r, 5)?;
    let state: String = get(r, 14)?;
    let version: i32 = get(r, 9)?;
    let attempts: i32 = get(r, 15)?;
    let status: Option<i32> = get(r, 17)?;
    Ok(DeliveryRecord {
        id: get(r, 0)?,
        subscription_id: get(r, 1)?,
        task_id: TaskId(get(r, 2)?),
        seq: get(r, 3)?,
        event_id: get(r, 4)?,
        kind: MessageKind::parse(&kind).ok_or_else(|| bad_column("deliveries.kind", kind))?,
        at: Timestamp(get(r, 6)?),
        task_key: get(r, 7)?,
        workflow: get(r, 8)?,
        version: u32::try_from(version).map_err(|e| bad_column("deliveries.version", e))?,
        task_state: get(r, 10)?,
        step: get(r, 11)?,
        output: get(r, 12)?,
        error: get(r, 13)?,
        state: DeliveryState::parse(&state).ok_or_else(|| bad_column("deliveries.state", state))?,
        attempts: u32::try_from(attempts).map_err(|e| bad_column("deliveries.attempts", e))?,
        due_at: Timestamp(get(r, 16)?),
        last_status: status
            .map(|s| u16::try_from(s).map_err(|e| bad_column("deliveries.last_status", e)))
            .transpose()?,
        last_error: get(r, 18)?,
        delivered_at: get::<Option<i64>>(r, 19)?.map(Timestamp),
        created_at: Timestamp(get(r, 20)?),
        updated_at: Timestamp(get(r, 21)?),
    })
}

/// Inserts a subscription: a standing one, or (with `task`) a task's own, in its submission's
/// transaction.
pub async fn insert(
    t: &Tx<'_>,
    target: &WebhookTarget,
    task: Option<TaskId>,
    workflow: Option<&str>,
    description: Option<&str>,
) -> Result<i64, StoreError> {
    let kinds = kinds_column(&target.kinds);
    let row = t
        .query_one(
            "INSERT INTO subscriptions (url, secret, task_id, workflow, kinds, state, description, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $7) RETURNING id",
            &[&target.url, &target.secret, &task.map(|t| t.0), &workflow, &kinds, &description, &t.now.0],
        )
        .await?;
    get(&row, 0)
}

pub async fn create(t: &Tx<'_>, p: &NewSubscription) -> Result<SubscriptionRecord, StoreError> {
    let id = insert(t, &p.target, None, p.workflow.as_deref(), p.description.as_deref()).await?;
    get_one(**t, id).await?.ok_or_else(|| StoreError::Backend("a subscription just written is gone".into()))
}

pub async fn list(c: Conn<'_>) -> Result<Vec<SubscriptionRecord>, StoreError> {
    let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE task_id IS NULL ORDER BY id");
    c.query(&sql, &[]).await?.iter().map(subscription).collect()
}

pub async fn get_one(c: Conn<'_>, id: i64) -> Result<Option<SubscriptionRecord>, StoreError> {
    let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE id = $1");
    c.query_opt(&sql, &[&id]).await?.as_ref().map(subscription).transpose()
}

pub async fn set_state(t: &Tx<'_>, p: &SetSubscriptionState) -> Result<SubscriptionRecord, StoreError> {
    let reason = match p.state {
        SubscriptionState::Active => None,
        SubscriptionState::Disabled => Some(p.reason.clone().unwrap_or_else(|| "disabled by an operator".into())),
    };
    let sql = format!(
        "UPDATE subscriptions SET state = $2, disabled_reason = $3, paused_until = 0, updated_at = $4 WHERE id = $1
         RETURNING {SUBSCRIPTION_COLUMNS}"
    );
    let row = t.query_opt(&sql, &[&p.id, &p.state.as_str(), &reason, &t.now.0]).await?;
    match row {
        Some(r) => subscription(&r),
        None => Err(StoreError::NotFound { what: "subscription", id: p.id.to_string() }),
    }
}

pub async fn delete(t: &Tx<'_>, id: i64) -> Result<bool, StoreError> {
    t.execute("DELETE FROM deliveries WHERE subscription_id = $1 AND state <> 'delivered'", &[&id]).await?;
    Ok(t.execute("DELETE FROM subscriptions WHERE id = $1", &[&id]).await? > 0)
}

pub async fn claim(t: &Tx<'_>, p: &ClaimDeliveries) -> Result<ClaimedDeliveries, StoreError> {
    let now = t.now.0;
    let lease_end = now.saturating_add(duration_ms(p.lease));
    let limit = i64::from(p.limit);
    let from = p.due_from.map_or(i64::MIN, |f| f.0);
    // MATERIALIZED with SKIP LOCKED: two dispatchers never take one row, and the picked set is
    // read once (a plain IN (subquery) may run it again and take more than the limit). The lower
    // bound ($4) starts the due index's scan past the dead entries of what earlier claims took.
    let sql = format!(
        "WITH picked AS MATERIALIZED (
             SELECT d.id, d.due_at FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
              WHERE d.state = 'pending' AND d.due_at <= $1 AND d.due_at >= $4
                AND s.state = 'active' AND s.paused_until <= $1
              ORDER BY d.due_at, d.id LIMIT $3
                FOR UPDATE OF d SKIP LOCKED
         ), claimed AS (
             UPDATE deliveries d SET due_at = $2, lock_token = d.lock_token + 1, attempts = d.attempts + 1, updated_at = $1
               FROM picked WHERE d.id = picked.id
             RETURNING d.*
         )
         SELECT {}, c.lock_token, s.url, s.secret, p.due_at
           FROM claimed c JOIN picked p ON p.id = c.id JOIN subscriptions s ON s.id = c.subscription_id
          ORDER BY c.id",
        DELIVERY_COLUMNS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ")
    );
    let rows = t.query(&sql, &[&now, &lease_end, &limit, &from]).await?;
    let mut deliveries = Vec::with_capacity(rows.len());
    let mut latest_due = i64::MIN;
    for r in &rows {
        deliveries.push(ClaimedDelivery {
            delivery: delivery(r)?,
            token: get(r, 22)?,
            url: get(r, 23)?,
            secret: get(r, 24)?,
        });
        latest_due = latest_due.max(get(r, 25)?);
    }
    let full = deliveries.len() >= p.limit as usize;
    let next_due = if !full {
        // The next one to fall due: one step down the due index, however many wait (a pause's
        // end is not looked for: the dispatcher's idle poll finds it).
        let row =
            t.query_one("SELECT min(due_at) FROM deliveries WHERE state = 'pending' AND due_at > $1", &[&now]).await?;
        get::<Option<i64>>(&row, 0)?
    } else {
        None
    };
    let next_due = next_due.map(|t| Timestamp(t).since(Timestamp(now)));
    let taken_through = Timestamp(if full { latest_due } else { now });
    Ok(ClaimedDeliveries { deliveries, now: Timestamp(now), next_due, taken_through })
}

/// Writes a dispatcher's outcomes, each fenced by its claim's token: one statement for all of
/// them (a round trip per delivery was the dispatcher's bound), then the few follow-ups that some
/// outcomes need (410 disables, 429 pauses, dead raises an alert), row by row.
pub async fn record(t: &Tx<'_>, outcomes: &[DeliveryOutcome]) -> Result<Vec<bool>, StoreError> {
    // One statement updates a row once, so a batch that names a delivery twice (a lapsed claim's
    // late outcome beside the new claim's) is written in rounds, each naming a delivery once.
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut seen: std::collections::HashMap<i64, usize> = std::collections::HashMap::with_capacity(outcomes.len());
    for (i, o) in outcomes.iter().enumerate() {
        let round = seen.entry(o.id).and_modify(|r| *r += 1).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(i);
    }
    let mut out = vec![false; outcomes.len()];
    for round in rounds {
        let batch: Vec<&DeliveryOutcome> = round.iter().map(|&i| &outcomes[i]).collect();
        for (i, applied) in round.into_iter().zip(record_round(t, &batch).await?) {
            out[i] = applied;
        }
    }
    Ok(out)
}

async fn record_round(t: &Tx<'_>, outcomes: &[&DeliveryOutcome]) -> Result<Vec<bool>, StoreError> {
    let now = t.now.0;
    let n = outcomes.len();
    let (mut ids, mut tokens, mut states, mut dues, mut undos, mut statuses, mut errors, mut delivered) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let writes: Vec<DeliveryWrite<'_>> = outcomes.iter().map(|o| o.result.write(now)).collect();
    for (o, w) in outcomes.iter().zip(&writes) {
        ids.push(o.id);
        tokens.push(o.token);
        states.push(w.state.as_str());
        dues.push(w.due_at);
        undos.push(w.undo_attempt);
        statuses.push(w.status.map(i32::from));
        errors.push(w.error);
        delivered.push(w.delivered_at);
    }
    let rows = t.query(RECORD, &[&ids, &tokens, &states, &dues, &undos, &statuses, &errors, &delivered, &now]).await?;
    let mut applied = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        applied.insert(get::<i64>(r, 0)?, (get::<i64>(r, 1)?, get::<i64>(r, 2)?));
    }
    let mut out = Vec::with_capacity(n);
    for (o, w) in outcomes.iter().zip(&writes) {
        let Some(&(subscription, task)) = applied.get(&o.id) else {
            out.push(false);
            continue;
        };
        match &o.result {
            DeliveryResult::Gone { .. } => {
                t.execute(
                    "UPDATE subscriptions SET state = 'disabled', disabled_reason = $2, updated_at = $3
                      WHERE id = $1 AND state = 'active'",
                    &[&subscription, &"the receiver answered 410 Gone", &now],
                )
                .await?;
            }
            DeliveryResult::Throttled { .. } => {
                // The receiver's pause ends when this delivery falls due again.
                t.execute(
                    "UPDATE subscriptions SET paused_until = greatest(paused_until, $2) WHERE id = $1",
                    &[&subscription, &w.due_at],
                )
                .await?;
            }
            DeliveryResult::Dead { status, error } => {
                let detail = json!({"delivery": o.id, "subscription": subscription, "status": status, "error": error});
                t.event(TaskId(task), None, event_kind::DELIVERY_DEAD, EventLevel::Alert, "dispatcher", detail).await?;
            }
            _ => {}
        }
        out.push(true);
    }
    Ok(out)
}

pub async fn backlog(c: Conn<'_>, cap: u32, now: Timestamp) -> Result<DeliveryBacklog, StoreError> {
    // Each count stops at the cap; the earliest due one is the first entry of the due index.
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE state = 'pending' LIMIT $1) p),
                    (SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE state = 'dead' LIMIT $1) d),
                    (SELECT min(due_at) FROM deliveries WHERE state = 'pending')",
            &[&i64::from(cap)],
        )
        .await?;
    Ok(DeliveryBacklog {
        pending: get::<i64>(&row, 0)? as u64,
        dead: get::<i64>(&row, 1)? as u64,
        oldest_due: get::<Option<i64>>(&row, 2)?.map(Timestamp),
        now,
    })
}

pub async fn list_deliveries(c: Conn<'_>, q: &DeliveryQuery) -> Result<Vec<DeliveryRecord>, StoreError> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries
          WHERE id < $1 AND ($2::text IS NULL OR state = $2) AND ($3::bigint IS NULL OR subscription_id = $3)
            AND ($4::bigint IS NULL OR task_id = $4)
          ORDER BY id DESC LIMIT $5"
    );
    let before = q.before.unwrap_or(i64::MAX);
    let state = q.state.map(|s| s.as_str());
    let task = q.task.map(|t| t.0);
    let limit = i64::from(q.limit.min(MAX_DELIVERIES));
    c.query(&sql, &[&before, &state, &q.subscription, &task, &limit]).await?.iter().map(delivery).collect()
}

pub async fn get_delivery(c: Conn<'_>, id: i64) -> Result<Option<DeliveryRecord>, StoreError> {
    let sql = format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id = $1
         UNION ALL SELECT {DELIVERY_COLUMNS} FROM deliveries_history WHERE id = $1 LIMIT 1"
    );
    c.query_opt(&sql, &[&id]).await?.as_ref().map(delivery).transpose()
}

pub async fn redeliver(t: &Tx<'_>, p: &Redeliver) -> Result<RedeliverReport, StoreError> {
    let limit = i64::from(MAX_DELIVERIES);
    let rows = match p.subscription {
        Some(sub) => {
            t.query(
                "SELECT id FROM deliveries WHERE subscription_id = $1 AND state = 'dead' ORDER BY id LIMIT $2 FOR UPDATE",
                &[&sub, &limit],
            )
            .await?
        }
        None => {
            t.query(
                "SELECT id FROM deliveries WHERE id = ANY($1) AND state <> 'pending' ORDER BY id FOR UPDATE",
                &[&p.ids],
            )
            .await?
        }
    };
    let ids: Vec<i64> = rows.iter().map(|r| get(r, 0)).collect::<Result<_, _>>()?;
    if !p.dry_run && !ids.is_empty() {
        t.execute(
            "UPDATE deliveries SET state = 'pending', due_at = $2, attempts = 0, lock_token = lock_token + 1,
                    delivered_at = NULL, updated_at = $2
              WHERE id = ANY($1)",
            &[&ids, &t.now.0],
        )
        .await?;
    }
    Ok(RedeliverReport { ids })
}

/// The channel the outbox trigger rings: `left('shiftboss_outbox_' || current_schema(), 63)`
/// (PostgreSQL refuses a longer channel name; `left` counts characters).
pub fn channel(schema: &str) -> String {
    format!("shiftboss_outbox_{schema}").chars().take(63).collect()
}
