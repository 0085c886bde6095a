//! The overview's charts: steps completed and errors per second across the whole deployment,
//! from the event log (every process's work is in it): every ten seconds the sampler counts the
//! events of those kinds the log gained (`Store::count_events`), for the last fifteen minutes. The
//! sampler runs while someone looks: the first overview starts it, and it stops after fifteen
//! minutes without one (a later overview starts it again, with a gap in the lines).

use super::html::esc;
use crate::state::AppState;
use shiftboss_store::event_kind as ev;
use shiftboss_store::{CountEvents, Store};
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often a point is taken.
const EVERY: Duration = Duration::from_secs(10);
/// How many points are kept (fifteen minutes).
const KEEP: usize = 91;
/// The sampler stops after this long without an overview.
const UNWATCHED: Duration = Duration::from_secs(15 * 60);

/// A step ended well.
const COMPLETED: [&str; 1] = [ev::STEP_PROCESSED];
/// A step went to Error, an attempt failed, a lease lapsed, a due attempt went unclaimed.
const ERRORS: [&str; 4] = [ev::STEP_ERROR, ev::STEP_FAILED, ev::STEP_EXPIRED, ev::STEP_UNCLAIMED];

#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Milliseconds since the epoch.
    at: i64,
    /// Steps completed in the deployment since the sampler started.
    completed: u64,
    /// Errors in the deployment since the sampler started.
    errors: u64,
}

/// The points, and whether the sampler runs.
#[derive(Default)]
pub struct Samples {
    points: Mutex<VecDeque<Sample>>,
    running: AtomicBool,
    /// When an overview last asked for the charts, in milliseconds since the epoch.
    viewed: AtomicI64,
}

impl Samples {
    fn take(&self, s: Sample) {
        let mut p = self.points.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() == KEEP {
            p.pop_front();
        }
        p.push_back(s);
    }

    fn points(&self) -> Vec<Sample> {
        self.points.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Counts what the log gained since `after`; the new mark, and the sample after `last`.
async fn sample(store: &dyn Store, after: Option<i64>, last: Sample) -> Option<(i64, Sample)> {
    let kinds = COMPLETED.iter().chain(&ERRORS).map(|k| (*k).to_owned()).collect();
    match store.count_events(CountEvents { after, kinds }).await {
        Ok(c) => {
            let completed = COMPLETED.iter().map(|k| c.of(k)).sum::<u64>();
            let errors = ERRORS.iter().map(|k| c.of(k)).sum::<u64>();
            let s = Sample { at: now_ms(), completed: last.completed + completed, errors: last.errors + errors };
            Some((c.upto, s))
        }
        Err(e) => {
            tracing::debug!(error = %e, "console charts: counting events failed; the point is skipped");
            None
        }
    }
}

/// Starts the sampler if it does not run. It stops once nobody looked for a while, or once the
/// server's state (which alone holds the points) is gone.
pub fn ensure_started(state: &AppState) {
    let samples = state.charts.clone();
    samples.viewed.store(now_ms(), Ordering::Relaxed);
    if samples.running.swap(true, Ordering::AcqRel) {
        return;
    }
    samples.points.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let weak: Weak<Samples> = Arc::downgrade(&samples);
    let store = state.store().clone();
    tokio::spawn(async move {
        let zero = Sample { at: now_ms(), completed: 0, errors: 0 };
        let mut mark = sample(store.as_ref(), None, zero).await.map(|(upto, _)| upto);
        if let Some(s) = weak.upgrade() {
            s.take(zero);
        }
        let mut last = zero;
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(samples) = weak.upgrade() else { return };
            if now_ms() - samples.viewed.load(Ordering::Relaxed) > UNWATCHED.as_millis() as i64 {
                samples.running.store(false, Ordering::Release);
                return;
            }
            // Without a first mark (the store was away), the first count only sets one.
            if let Some((upto, s)) = sample(store.as_ref(), mark, last).await {
                if mark.is_some() {
                    samples.take(s);
                    last = s;
                }
                mark = Some(upto);
            }
        }
    });
}

/// Rates between consecutive points: (seconds ago, completed per second, errors per second).
fn rates(points: &[Sample]) -> Vec<(f64, f64, f64)> {
    let last = points.last().map_or(0, |p| p.at);
    points
        .windows(2)
        .filter_map(|w| {
            let secs = (w[1].at - w[0].at) as f64 / 1000.0;
            (secs > 0.0).then(|| {
                let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
                ((last - w[1].at) as f64 / 1000.0, per(w[0].completed, w[1].completed), per(w[0].errors, w[1].errors))
            })
        })
        .collect()
}

/// The two charts, or a line saying they are collecting.
pub fn render(b: &mut String, state: &AppState) {
    ensure_started(state);
    let r = rates(&state.charts.points());
    b.push_str("<h2>Steps and errors per second (the whole deployment)</h2>");
    if r.is_empty() {
        b.push_str(r#"<p class="muted">Collecting: a point every 10 s, the first within 10 s of this page.</p>"#);
        return;
    }
    chart(b, "steps completed / s", "", r.iter().map(|(ago, c, _)| (*ago, *c)).collect());
    chart(
        b,
        "errors / s (in Error, failed attempts, lapsed leases, unclaimed)",
        " errors",
        r.iter().map(|(ago, _, e)| (*ago, *e)).collect(),
    );
}

/// One line chart of (seconds ago, value), newest on the right, as inline SVG.
fn chart(b: &mut String, caption: &str, class: &str, points: Vec<(f64, f64)>) {
    const W: f64 = 360.0;
    const H: f64 = 80.0;
    let span = (KEEP as f64 - 1.0) * EVERY.as_secs_f64();
    let top = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let scale = if top > 0.0 { top } else { 1.0 };
    let mut line = String::new();
    let mut dots = String::new();
    for (ago, v) in &points {
        // Inset so that the newest point's dot shows whole.
        let x = (W - 4.0) - (ago / span * (W - 8.0)).min(W - 8.0);
        let y = H - 4.0 - v / scale * (H - 8.0);
        let _ = write!(line, "{x:.1},{y:.1} ");
        let _ = write!(dots, r#"<circle cx="{x:.1}" cy="{y:.1}" r="2"/>"#);
    }
    let now = points.last().map_or(0.0, |p| p.1);
    let _ = write!(
        b,
        r#"<figure class="chart{class}"><svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{}"><line x1="0" y1="{base}" x2="{W}" y2="{base}"/><polyline points="{}"/>{dots}</svg><figcaption class="cap">{} · now {now:.1} · peak {top:.1} · last 15 min, a point every 10 s</figcaption></figure>"#,
        esc(caption),
        line.trim_end(),
        esc(caption),
        base = H - 4.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_counters_differences_over_time() {
        let p = [
            Sample { at: 0, completed: 0, errors: 0 },
            Sample { at: 10_000, completed: 500, errors: 10 },
            Sample { at: 20_000, completed: 500, errors: 10 },
        ];
        let r = rates(&p);
        assert_eq!(r, vec![(10.0, 50.0, 1.0), (0.0, 0.0, 0.0)]);
        assert!(rates(&p[..1]).is_empty(), "one point makes no rate");
        let mut b = String::new();
        chart(&mut b, "steps", "", r.iter().map(|(a, c, _)| (*a, *c)).collect());
        assert!(b.contains("<polyline points=\"") && b.contains("peak 50.0"), "{b}");
    }
}
