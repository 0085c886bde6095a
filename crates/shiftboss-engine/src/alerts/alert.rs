//! One alert: what an operator is told, made from an alert event of the log or from a task found
//! without progress, and how it reads in a log line, a webhook and a chat message.

use serde::Serialize;
use serde_json::{Value, json};
use shiftboss_core::Timestamp;
use shiftboss_core::model::TaskRecord;
use shiftboss_store::StreamEvent;
use shiftboss_store::event_kind as ev;

/// The most tasks one alert names; a folded alert counts the rest.
pub const MAX_TASKS: usize = 10;

/// The longest error text an alert quotes.
const MAX_ERROR: usize = 500;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertTask {
    pub id: i64,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The event kind (`step.error`, `task.failed`, ...) or `task.stuck`.
    pub kind: String,
    /// What it is about, the unit repeats fold on: a workflow's step (`order/pay`), a workflow
    /// (`order`), or a subscription (`subscription 7`).
    pub subject: String,
    /// How many occurrences it stands for: 1 for the first on its subject; for a folded alert,
    /// the repeats since the one before it.
    pub count: u64,
    /// True for a summary of repeats that were held back.
    pub folded: bool,
    pub first_at: Timestamp,
    pub last_at: Timestamp,
    /// The step concerned, when it is about one.
    pub step: Option<String>,
    /// The tasks concerned, the first [`MAX_TASKS`] of them.
    pub tasks: Vec<AlertTask>,
    /// The last occurrence's detail, as the event log holds it.
    pub detail: Value,
    /// The event ids it stands for, lowest and highest (none for a task without progress).
    #[serde(skip)]
    pub events: Option<(i64, i64)>,
}

impl Alert {
    /// The alert an alert event of the log raises.
    pub fn from_event(e: &StreamEvent) -> Alert {
        let ev = &e.event;
        let step = ev.detail.get("step").and_then(Value::as_str).map(str::to_owned).or_else(|| e.step.clone());
        let subject = match ev.kind.as_str() {
            ev::DELIVERY_DEAD => match ev.detail.get("subscription") {
                Some(s) => format!("subscription {s}"),
                None => e.workflow.clone(),
            },
            _ => match &step {
                Some(step) => format!("{}/{step}", e.workflow),
                None => e.workflow.clone(),
            },
        };
        Alert {
            kind: ev.kind.clone(),
            subject,
            count: 1,
            folded: false,
            first_at: ev.at,
            last_at: ev.at,
            step,
            tasks: vec![AlertTask { id: ev.task_id.0, key: e.task_key.clone() }],
            detail: ev.detail.clone(),
            events: Some((ev.id, ev.id)),
        }
    }

    /// The alert for a running task that has not moved since `since`.
    pub fn stuck(task: &TaskRecord, since: Timestamp, now: Timestamp) -> Alert {
        let quiet = now.since(since);
        Alert {
            kind: ev::TASK_STUCK.into(),
            subject: task.workflow.clone(),
            count: 1,
            folded: false,
            first_at: now,
            last_at: now,
            step: None,
            tasks: vec![AlertTask { id: task.id.0, key: task.key.clone() }],
            detail: json!({"last_progress": since.to_string(), "quiet_seconds": quiet.as_secs()}),
            events: None,
        }
    }

    /// What a person reads first: the kind in words.
    pub fn title(&self) -> &'static str {
        match self.kind.as_str() {
            ev::STEP_ERROR => "step in error",
            ev::TASK_FAILED => "task failed",
            ev::TASK_COMPENSATING => "task failed, compensating",
            ev::TASK_COMPENSATION_FAILED => "compensation failed",
            ev::TASK_TIMED_OUT => "task timed out",
            ev::STEP_OVERDUE => "step past its lease",
            ev::DELIVERY_DEAD => "delivery dead",
            ev::TASK_STUCK => "task without progress",
            _ => "alert",
        }
    }

    /// One line for a log or a chat message.
    pub fn text(&self) -> String {
        let tasks: Vec<String> = self.tasks.iter().map(|t| format!("{} ({})", t.id, t.key)).collect();
        if self.folded {
            let more = if self.count as usize > self.tasks.len() { ", ..." } else { "" };
            format!(
                "shiftboss: {} on {}: {} more since {} (tasks {}{more})",
                self.title(),
                self.subject,
                self.count,
                self.first_at,
                tasks.join(", ")
            )
        } else {
            let why = self.reason().map(|r| format!(": {r}")).unwrap_or_default();
            format!("shiftboss: {} on {}: task {}{why}", self.title(), self.subject, tasks.join(", "))
        }
    }

    /// The error or reason the detail records, cut to a readable length.
    fn reason(&self) -> Option<String> {
        let d = &self.detail;
        let text = ["error", "reason", "last_error"].iter().find_map(|k| d.get(*k).and_then(Value::as_str))?;
        let mut cut: String = text.chars().take(MAX_ERROR).collect();
        if cut.len() < text.len() {
            cut.push('…');
        }
        Some(cut)
    }

    /// Adds a repeat to a folded alert.
    pub fn absorb(&mut self, repeat: &Alert) {
        self.count += repeat.count;
        self.last_at = self.last_at.max(repeat.last_at);
        for t in &repeat.tasks {
            if self.tasks.len() < MAX_TASKS && !self.tasks.contains(t) {
                self.tasks.push(t.clone());
            }
        }
        self.detail = repeat.detail.clone();
        self.events = match (self.events, repeat.events) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
    }

    /// The webhook sink's body.
    pub fn webhook_body(&self) -> Value {
        json!({"type": "alert", "title": self.title(), "text": self.text(), "alert": self})
    }

    /// The chat sink's body (Slack's incoming-webhook form, which Mattermost, Rocket.Chat and
    /// others take too).
    pub fn chat_body(&self) -> Value {
        json!({"text": self.text()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiftboss_core::TaskId;
    use shiftboss_core::model::{EventLevel, EventRecord};

    fn event(id: i64, kind: &str, detail: Value) -> StreamEvent {
        StreamEvent {
            event: EventRecord {
                id,
                task_id: TaskId(7),
                step_id: None,
                at: Timestamp(1_700_000_000_000),
                kind: kind.into(),
                level: EventLevel::Alert,
                actor: "x".into(),
                detail,
            },
            task_key: "order-7".into(),
            workflow: "order".into(),
            step: None,
        }
    }

    #[test]
    fn subjects_and_text_name_what_failed() {
        let a = Alert::from_event(&event(3, ev::STEP_ERROR, json!({"step": "pay", "error": "card declined"})));
        assert_eq!(a.subject, "order/pay");
        assert_eq!(a.text(), "shiftboss: step in error on order/pay: task 7 (order-7): card declined");
        let d = Alert::from_event(&event(4, ev::DELIVERY_DEAD, json!({"subscription": 9, "delivery": 2})));
        assert_eq!(d.subject, "subscription 9");
        let f = Alert::from_event(&event(5, ev::TASK_FAILED, json!({})));
        assert_eq!(f.subject, "order");
        assert_eq!(f.text(), "shiftboss: task failed on order: task 7 (order-7)");
    }

    #[test]
    fn a_long_error_is_cut() {
        let a = Alert::from_event(&event(3, ev::STEP_ERROR, json!({"step": "pay", "error": "x".repeat(5000)})));
        assert!(a.text().len() < 700, "{}", a.text().len());
    }

    #[test]
    fn absorbing_counts_and_names_a_bounded_number_of_tasks() {
        let mut a = Alert::from_event(&event(3, ev::STEP_ERROR, json!({"step": "pay"})));
        for i in 0..20 {
            let mut r = Alert::from_event(&event(10 + i, ev::STEP_ERROR, json!({"step": "pay"})));
            r.tasks[0].id = 100 + i;
            a.absorb(&r);
        }
        assert_eq!(a.count, 21);
        assert_eq!(a.tasks.len(), MAX_TASKS);
        assert_eq!(a.events, Some((3, 29)));
    }
}
