//! Folding: the first alert on a subject goes out at once and opens a window; the repeats within
//! it are held and go out as one summary when it ends ("56 more since ..."), which opens the next
//! window. A service that is down for an hour makes one alert and one summary per window, not
//! one per task. Time is passed in, so the rules are tested without waiting.

use super::alert::Alert;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

pub struct Folder {
    window: Duration,
    open: HashMap<(String, String), Window>,
}

struct Window {
    until: Instant,
    /// The repeats since the window opened, as one alert.
    held: Option<Alert>,
}

impl Folder {
    /// A window of zero folds nothing.
    pub fn new(window: Duration) -> Folder {
        Folder { window, open: HashMap::new() }
    }

    /// What to send now: the summaries of windows that have ended, and the alert itself unless
    /// it folds into its subject's open window (then true: it is held).
    pub fn offer(&mut self, alert: Alert, now: Instant) -> (Vec<Alert>, bool) {
        let mut out = self.due(now);
        if self.window.is_zero() {
            out.push(alert);
            return (out, false);
        }
        let key = (alert.kind.clone(), alert.subject.clone());
        match self.open.get_mut(&key) {
            Some(w) => {
                match &mut w.held {
                    Some(held) => held.absorb(&alert),
                    None => w.held = Some(Alert { folded: true, ..alert }),
                }
                (out, true)
            }
            None => {
                self.open.insert(key, Window { until: now + self.window, held: None });
                out.push(alert);
                (out, false)
            }
        }
    }

    /// The summaries of the windows that have ended by `now`. A window that held repeats opens
    /// again (the flood may go on); one that held none closes.
    pub fn due(&mut self, now: Instant) -> Vec<Alert> {
        let mut out = Vec::new();
        let window = self.window;
        self.open.retain(|_, w| {
            if now < w.until {
                return true;
            }
            match w.held.take() {
                Some(held) => {
                    out.push(held);
                    w.until = now + window;
                    true
                }
                None => false,
            }
        });
        out.sort_by_key(|a| a.events.map(|e| e.0));
        out
    }

    /// Every summary held, whether its window has ended or not (at shutdown).
    pub fn flush(&mut self) -> Vec<Alert> {
        let mut out: Vec<Alert> = self.open.drain().filter_map(|(_, w)| w.held).collect();
        out.sort_by_key(|a| a.events.map(|e| e.0));
        out
    }

    /// When the next held summary is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.open.values().filter(|w| w.held.is_some()).map(|w| w.until).min()
    }

    /// The lowest event id a held summary stands for: the log must be read again from before it
    /// should this process die holding it.
    pub fn oldest_held(&self) -> Option<i64> {
        self.open.values().filter_map(|w| w.held.as_ref()?.events.map(|e| e.0)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::alert::AlertTask;
    use serde_json::json;
    use shiftboss_core::Timestamp;

    fn alert(kind: &str, subject: &str, event: i64) -> Alert {
        Alert {
            kind: kind.into(),
            subject: subject.into(),
            count: 1,
            folded: false,
            first_at: Timestamp(event),
            last_at: Timestamp(event),
            step: None,
            tasks: vec![AlertTask { id: event, key: format!("k{event}") }],
            detail: json!({}),
            events: Some((event, event)),
        }
    }

    #[test]
    fn repeats_fold_into_one_summary_per_window() {
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        let mut f = Folder::new(w);
        assert_eq!(
            f.offer(alert("step.error", "order/pay", 1), t0),
            (vec![alert("step.error", "order/pay", 1)], false)
        );
        for i in 2..=10 {
            let (out, held) = f.offer(alert("step.error", "order/pay", i), t0 + Duration::from_secs(i as u64));
            assert!(out.is_empty() && held, "a repeat within the window is held");
        }
        let (other, _) = f.offer(alert("step.error", "order/ship", 11), t0 + Duration::from_secs(11));
        assert_eq!(other.len(), 1, "another subject has its own window");
        assert_eq!(f.oldest_held(), Some(2));
        assert_eq!(f.next_due(), Some(t0 + w));
        assert!(f.due(t0 + Duration::from_secs(59)).is_empty(), "not before the window ends");

        let summary = f.due(t0 + w);
        assert_eq!(summary.len(), 1);
        assert!(summary[0].folded);
        assert_eq!(summary[0].count, 9);
        assert_eq!(summary[0].events, Some((2, 10)));
        assert_eq!(f.oldest_held(), None);

        // The flood goes on: the window opened again, so the next repeat is held, not sent.
        assert!(f.offer(alert("step.error", "order/pay", 12), t0 + w + Duration::from_secs(1)).0.is_empty());
        let flushed = f.flush();
        assert_eq!(flushed.len(), 1);
        assert_eq!(flushed[0].count, 1);
    }

    #[test]
    fn a_quiet_window_closes_and_the_next_alert_goes_out_at_once() {
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        let mut f = Folder::new(w);
        assert_eq!(f.offer(alert("task.failed", "order", 1), t0).0.len(), 1);
        assert!(f.due(t0 + w).is_empty(), "nothing was held");
        assert_eq!(f.offer(alert("task.failed", "order", 2), t0 + w * 2).0.len(), 1);
    }

    #[test]
    fn an_offer_after_a_missed_due_sends_the_summary_too() {
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        let mut f = Folder::new(w);
        f.offer(alert("task.failed", "order", 1), t0);
        f.offer(alert("task.failed", "order", 2), t0 + Duration::from_secs(1));
        let (out, held) = f.offer(alert("task.failed", "order", 3), t0 + w * 3);
        assert!(held);
        assert_eq!(out.len(), 1, "the summary of 2; 3 is held in the reopened window");
        assert_eq!(out[0].events, Some((2, 2)));
        assert_eq!(f.oldest_held(), Some(3));
    }

    #[test]
    fn a_zero_window_folds_nothing() {
        let mut f = Folder::new(Duration::ZERO);
        let t0 = Instant::now();
        assert_eq!(f.offer(alert("task.failed", "order", 1), t0).0.len(), 1);
        assert_eq!(f.offer(alert("task.failed", "order", 2), t0).0.len(), 1);
        assert_eq!(f.oldest_held(), None);
    }
}
