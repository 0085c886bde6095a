//! Status channels (P18): subscriptions, and the outbox of deliveries the state store writes for
//! them.
//!
//! A **message** is a change an application follows (a task received, a step completed or in
//! Error, a task paused, completed, failed...). Every message is an event of the event log; the
//! store itself (a trigger on `events`, in each store's migrations) writes one **delivery** row per
//! message and matching subscription, in the transaction that wrote the event, so a state change
//! and the message it causes commit together or not at all, on every write path. The dispatcher
//! (in the engine) claims due deliveries, sends them, and records what became of each, fenced by
//! the claim's token.

use crate::StoreError;
use serde::{Deserialize, Serialize};
use shiftboss_core::{TaskId, Timestamp};
use std::time::Duration;

/// The kinds of messages a subscription can follow, with the event kinds they come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum MessageKind {
    /// The task was submitted (`task.received`).
    #[serde(rename = "task.received")]
    Received,
    /// A step finished (`step.processed`).
    #[serde(rename = "step.completed")]
    StepCompleted,
    /// A step went to Error and needs an operator (`step.error`).
    #[serde(rename = "step.error")]
    StepError,
    /// An operator paused the task.
    #[serde(rename = "task.paused")]
    Paused,
    /// The task was resumed.
    #[serde(rename = "task.resumed")]
    Resumed,
    /// The task failed and undoes its completed steps.
    #[serde(rename = "task.compensating")]
    Compensating,
    /// The task completed.
    #[serde(rename = "task.completed")]
    Completed,
    /// The task failed (`task.failed`, or `task.compensation_failed`).
    #[serde(rename = "task.failed")]
    Failed,
    /// Its compensations ran to the end.
    #[serde(rename = "task.compensated")]
    Compensated,
    /// An operator cancelled it.
    #[serde(rename = "task.cancelled")]
    Cancelled,
    /// An operator terminated it.
    #[serde(rename = "task.terminated")]
    Terminated,
}

impl MessageKind {
    /// Every kind, in the order of a task's life.
    pub const ALL: [MessageKind; 11] = [
        MessageKind::Received,
        MessageKind::StepCompleted,
        MessageKind::StepError,
        MessageKind::Paused,
        MessageKind::Resumed,
        MessageKind::Compensating,
        MessageKind::Completed,
        MessageKind::Failed,
        MessageKind::Compensated,
        MessageKind::Cancelled,
        MessageKind::Terminated,
    ];

    /// The name on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Received => "task.received",
            MessageKind::StepCompleted => "step.completed",
            MessageKind::StepError => "step.error",
            MessageKind::Paused => "task.paused",
            MessageKind::Resumed => "task.resumed",
            MessageKind::Compensating => "task.compensating",
            MessageKind::Completed => "task.completed",
            MessageKind::Failed => "task.failed",
            MessageKind::Compensated => "task.compensated",
            MessageKind::Cancelled => "task.cancelled",
            MessageKind::Terminated => "task.terminated",
        }
    }

    pub fn parse(s: &str) -> Option<MessageKind> {
        MessageKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The message an event of this kind is, if any. SQLite's store picks its message events by
    /// it; PostgreSQL's outbox trigger holds the same table in SQL, and a conformance case checks
    /// that the deliveries agree with it.
    pub fn of_event(kind: &str) -> Option<MessageKind> {
        use crate::event_kind as ev;
        Some(match kind {
            ev::TASK_RECEIVED => MessageKind::Received,
            ev::STEP_PROCESSED => MessageKind::StepCompleted,
            ev::STEP_ERROR => MessageKind::StepError,
            ev::TASK_PAUSED => MessageKind::Paused,
            ev::TASK_RESUMED => MessageKind::Resumed,
            ev::TASK_COMPENSATING => MessageKind::Compensating,
            ev::TASK_COMPLETED => MessageKind::Completed,
            ev::TASK_FAILED | ev::TASK_COMPENSATION_FAILED => MessageKind::Failed,
            ev::TASK_COMPENSATED => MessageKind::Compensated,
            ev::TASK_CANCELLED => MessageKind::Cancelled,
            ev::TASK_TERMINATED => MessageKind::Terminated,
            _ => return None,
        })
    }
}

impl std::fmt::Display for MessageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which kinds a subscription follows, as the store keeps it: `""` for every kind, else
/// `,a,b,` (commas around each name, so that the outbox tests membership with one `instr`).
pub fn kinds_column(kinds: &[MessageKind]) -> String {
    if kinds.is_empty() || MessageKind::ALL.iter().all(|k| kinds.contains(k)) {
        return String::new();
    }
    let mut sorted = kinds.to_vec();
    sorted.sort();
    sorted.dedup();
    let names: Vec<&str> = sorted.iter().map(|k| k.as_str()).collect();
    format!(",{},", names.join(","))
}

/// The kinds a stored kinds column names (every kind for `""`).
pub fn kinds_from_column(s: &str) -> Vec<MessageKind> {
    if s.is_empty() {
        return MessageKind::ALL.to_vec();
    }
    s.split(',').filter_map(MessageKind::parse).collect()
}

/// The longest subscription URL accepted.
pub const MAX_URL_LEN: usize = 2000;
/// The signing secret's prefix (Standard Webhooks): `whsec_` then base64 of 24 to 64 bytes.
pub const SECRET_PREFIX: &str = "whsec_";

/// Where and how a subscription sends: checked the same way for a standing subscription and for
/// a task's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTarget {
    /// An `http` or `https` URL. Whether its host may be reached is the dispatcher's guard's
    /// business at each delivery (the same SSRF rules as every outbound call).
    pub url: String,
    /// The signing secret, `whsec_` and base64.
    pub secret: String,
    /// The kinds it follows; empty for all.
    pub kinds: Vec<MessageKind>,
}

impl WebhookTarget {
    pub fn validate(&self) -> Result<(), StoreError> {
        let bad = |m: String| Err(StoreError::InvalidInput(m));
        if self.url.len() > MAX_URL_LEN || self.url.chars().any(char::is_control) {
            return bad(format!("a webhook url must be at most {MAX_URL_LEN} bytes with no control characters"));
        }
        // A user and password in the URL would be kept, listed and quoted in errors: refused, and
        // not echoed.
        let rest = self.url.split_once("://").map_or(self.url.as_str(), |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.contains('@') {
            return bad("a webhook url may not hold a user or password (the secret signs the messages)".into());
        }
        let scheme = self.url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https"))
            || self.url.split_once("://").is_some_and(|(_, r)| r.is_empty())
        {
            return bad(format!("a webhook url must be http:// or https:// with a host, not {:?}", self.url));
        }
        if !valid_secret(&self.secret) {
            return bad(format!(
                "a webhook secret is {SECRET_PREFIX} followed by the base64 of 24 to 64 bytes (Standard Webhooks)"
            ));
        }
        Ok(())
    }
}

/// True for `whsec_` followed by standard base64 of 24 to 64 bytes.
pub fn valid_secret(s: &str) -> bool {
    let Some(b64) = s.strip_prefix(SECRET_PREFIX) else { return false };
    let ok_chars = b64.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/' || c == b'=');
    // 24 bytes are 32 base64 characters, 64 bytes 88.
    ok_chars && b64.len().is_multiple_of(4) && (32..=88).contains(&b64.len())
}

/// A standing subscription, made over the API: every task of a workflow (or of all), these kinds.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    pub target: WebhookTarget,
    /// Only tasks of this workflow; every workflow when none.
    pub workflow: Option<String>,
    /// The operator's words for it.
    pub description: Option<String>,
}

impl NewSubscription {
    pub fn validate(&self) -> Result<(), StoreError> {
        self.target.validate()?;
        if self.workflow.as_deref().is_some_and(|w| w.is_empty() || w.len() > 200) {
            return Err(StoreError::InvalidInput("a subscription's workflow filter must be 1 to 200 bytes".into()));
        }
        if self.description.as_deref().is_some_and(|d| d.len() > 500) {
            return Err(StoreError::InvalidInput("a subscription's description is at most 500 bytes".into()));
        }
        Ok(())
    }
}

/// A subscription's state: active ones get deliveries; a disabled one keeps its undelivered
/// messages for when it is enabled again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionState {
    Active,
    Disabled,
}

impl SubscriptionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionState::Active => "active",
            SubscriptionState::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(SubscriptionState::Active),
            "disabled" => Some(SubscriptionState::Disabled),
            _ => None,
        }
    }
}

/// A subscription as the store holds it, without its secret (only the dispatcher's claim reads
/// that).
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionRecord {
    pub id: i64,
    pub url: String,
    /// A task's own subscription (given at submit); none for a standing one.
    pub task_id: Option<TaskId>,
    pub workflow: Option<String>,
    pub kinds: Vec<MessageKind>,
    pub state: SubscriptionState,
    /// Why it was disabled (an operator, or the receiver answered 410 Gone).
    pub disabled_reason: Option<String>,
    /// The receiver asked to be left alone until then (429 with Retry-After).
    pub paused_until: Option<Timestamp>,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Enable or disable a subscription.
#[derive(Debug, Clone)]
pub struct SetSubscriptionState {
    pub id: i64,
    pub state: SubscriptionState,
    /// Why (kept while disabled).
    pub reason: Option<String>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Not delivered yet: due at `due_at` (a claimed one is due again when its claim lapses).
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Given up: the retry schedule ran out, or the receiver refused it for good. An operator may
    /// redeliver it.
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(DeliveryState::Pending),
            "delivered" => Some(DeliveryState::Delivered),
            "dead" => Some(DeliveryState::Dead),
            _ => None,
        }
    }
}

/// One message for one subscription: what it says (fixed when it was written, so every attempt
/// sends the same body) and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    /// Also the message's id on the wire (`webhook-id: msg_<id>`), the same at every attempt.
    pub id: i64,
    pub subscription_id: i64,
    pub task_id: TaskId,
    /// The message's number among its task's messages: 1, 2, 3... in the order they happened,
    /// the same for every subscription (a subscription made late sees its first at, say, 4).
    pub seq: i64,
    /// The event it comes from.
    pub event_id: i64,
    pub kind: MessageKind,
    /// When the change happened (the event's time).
    pub at: Timestamp,
    pub task_key: String,
    pub workflow: String,
    pub version: u32,
    /// The task's state after the change.
    pub task_state: String,
    /// The step, for step messages.
    pub step: Option<String>,
    /// The step's output (step completed) or the task's (completed), as JSON text.
    pub output: Option<String>,
    /// The error, for a step in Error or a failed task.
    pub error: Option<String>,
    pub state: DeliveryState,
    /// Attempts made (a claim counts one, so a dispatcher that dies mid-send still counts).
    pub attempts: u32,
    pub due_at: Timestamp,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub delivered_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The dispatcher's claim: due deliveries of active subscriptions, oldest due first.
#[derive(Debug, Clone)]
pub struct ClaimDeliveries {
    /// At most this many.
    pub limit: u32,
    /// A claimed delivery is due again after this (a dispatcher that died mid-send).
    pub lease: Duration,
    /// Only deliveries due at or after this: the dispatcher passes back (less a margin) the
    /// `taken_through` of its last claim, so that a claim need not pass again over what the ones
    /// before it took. On PostgreSQL a sent delivery leaves a dead entry at the front of the due
    /// index until a vacuum, and a claim from the front walked them all: 2.8 ms a claim beside
    /// 360,000 of them, the largest part of the dispatcher's PostgreSQL time. `None`: from the
    /// front.
    pub due_from: Option<Timestamp>,
}

/// One claimed delivery, with what the dispatcher needs to send it.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub delivery: DeliveryRecord,
    pub url: String,
    pub secret: String,
    /// Fences what the dispatcher records for it.
    pub token: i64,
}

#[derive(Debug, Clone)]
pub struct ClaimedDeliveries {
    pub deliveries: Vec<ClaimedDelivery>,
    /// The store's time at the claim: the dispatcher's clock (the `webhook-timestamp` of an
    /// attempt is this plus the time since, on the monotonic clock), so that no decision of the
    /// dispatcher reads the host's wall clock.
    pub now: Timestamp,
    /// When the claim came up short: how long from `now` until a pending delivery falls due (for
    /// the dispatcher to sleep), if any.
    pub next_due: Option<Duration>,
    /// Every delivery this claim could take that was due before this time, it took (as of its
    /// snapshot: a transaction that commits later may still add one due earlier, and a paused or
    /// disabled subscription's, or one another claim holds, is passed over): the latest due time
    /// among the claimed when the claim took its limit, `now` when it came up short.
    pub taken_through: Timestamp,
}

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryResult {
    /// 2xx.
    Delivered { status: u16 },
    /// Failed; try again this long after the outcome is recorded (by the store's clock).
    Retry { after: Duration, status: Option<u16>, error: String },
    /// Given up (the schedule ran out, or a refusal that will not pass): an alert event on the task.
    Dead { status: Option<u16>, error: String },
    /// 410 Gone: the subscription is disabled, and this delivery waits for it to come back.
    Gone { status: u16 },
    /// 429 (or 503) with Retry-After: the subscription is left alone for `after`, and this
    /// delivery is due then; not counted as an attempt.
    Throttled { after: Duration, status: u16 },
}

/// What a recorded outcome writes on its delivery row, the same in every store.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryWrite<'a> {
    pub state: DeliveryState,
    /// When it is due next (ms, the store's clock).
    pub due_at: i64,
    /// 1 to take back the attempt the claim counted (a receiver's 410 or 429 is not a failure).
    pub undo_attempt: i32,
    pub status: Option<u16>,
    /// The error to keep; none leaves the last one.
    pub error: Option<&'a str>,
    pub delivered_at: Option<i64>,
}

impl DeliveryResult {
    /// The row change this outcome makes, at the store's time `now` (ms).
    pub fn write(&self, now: i64) -> DeliveryWrite<'_> {
        let later = |d: &Duration| now.saturating_add(shiftboss_core::time::duration_ms(*d));
        let w = |state, due_at, undo_attempt, status, error, delivered_at| DeliveryWrite {
            state,
            due_at,
            undo_attempt,
            status,
            error,
            delivered_at,
        };
        use DeliveryState::*;
        match self {
            DeliveryResult::Delivered { status } => w(Delivered, now, 0, Some(*status), None, Some(now)),
            DeliveryResult::Retry { after, status, error } => w(Pending, later(after), 0, *status, Some(error), None),
            DeliveryResult::Dead { status, error } => w(Dead, now, 0, *status, Some(error), None),
            DeliveryResult::Gone { status } => {
                w(Pending, now, 1, Some(*status), Some("the receiver answered 410 Gone"), None)
            }
            DeliveryResult::Throttled { after, status } => {
                w(Pending, later(after), 1, Some(*status), Some("the receiver asked to slow down"), None)
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct DeliveryOutcome {
    pub id: i64,
    pub token: i64,
    pub result: DeliveryResult,
}

/// How much the outbox holds, for operators: pending and dead deliveries counted up to a cap
/// (a backlog of millions is not counted row by row on every look), and how long the most overdue
/// pending one has been due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryBacklog {
    /// Pending deliveries, at most the cap asked for.
    pub pending: u64,
    /// Dead deliveries, at most the cap asked for.
    pub dead: u64,
    /// When the earliest due pending delivery fell due (in the past when the dispatcher is behind,
    /// or in the future when all of them wait for a retry).
    pub oldest_due: Option<Timestamp>,
    /// The store's time of the reading.
    pub now: Timestamp,
}

/// Which deliveries to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    pub state: Option<DeliveryState>,
    pub subscription: Option<i64>,
    pub task: Option<TaskId>,
    /// Ids below this (paging).
    pub before: Option<i64>,
    pub limit: u32,
}

/// The most deliveries one list or redeliver call touches.
pub const MAX_DELIVERIES: u32 = 1000;

/// The reason a task's own subscription rests once its task is archived and nothing is left to
/// send on it (the archiver disables it so that the outbox and the dispatcher pass over it; a
/// restore of the task wakes it again; the purge of the task deletes it).
pub const CHANNEL_ARCHIVED: &str = "its task was archived";

/// An operator sends dead (or delivered) deliveries again: by id, or every dead one of a
/// subscription.
#[derive(Debug, Clone)]
pub struct Redeliver {
    pub ids: Vec<i64>,
    /// Every dead delivery of this subscription (with `ids` empty).
    pub subscription: Option<i64>,
    pub dry_run: bool,
}

impl Redeliver {
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.ids.is_empty() == self.subscription.is_none() {
            return Err(StoreError::InvalidInput("redeliver names either delivery ids or a subscription".into()));
        }
        if self.ids.len() > MAX_DELIVERIES as usize {
            return Err(StoreError::InvalidInput(format!("at most {MAX_DELIVERIES} deliveries at once")));
        }
        Ok(())
    }
}

/// What a redeliver did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedeliverReport {
    /// The deliveries sent back to pending (or that would be).
    pub ids: Vec<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_user_or_password_is_refused_without_echoing_it() {
        let t = |url: &str| WebhookTarget {
            url: url.into(),
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            kinds: Vec::new(),
        };
        assert!(t("https://hooks.example.com/a@b?c=d@e").validate().is_ok(), "an @ past the host is the path's");
        for bad in ["https://user:hunter2@hooks.example.com/x", "ftp://user:hunter2@x/y", "https://hunter2@x"] {
            let e = t(bad).validate().expect_err(bad).to_string();
            assert!(!e.contains("hunter2"), "{e}");
        }
        assert!(t("gopher://x").validate().is_err());
    }
}
