//! Percentiles of latency samples, in milliseconds.

use serde_json::{Value, json};

/// p50, p99 and max of `samples` (ms), nearest-rank; `None` if there are none.
pub fn summary(mut samples: Vec<f64>) -> Option<Value> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    Some(json!({
        "n": samples.len(),
        "p50_ms": round3(at(0.5)),
        "p99_ms": round3(at(0.99)),
        "max_ms": round3(samples[samples.len() - 1]),
    }))
}

pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentiles_by_nearest_rank() {
        let s = super::summary((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!(s["p50_ms"], 51.0);
        assert_eq!(s["p99_ms"], 99.0);
        assert_eq!(s["max_ms"], 100.0);
        assert!(super::summary(vec![]).is_none());
    }
}
