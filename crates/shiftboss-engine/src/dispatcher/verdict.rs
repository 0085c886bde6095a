//! What an attempt's answer means for its delivery: delivered, tried again later, given up, or a
//! receiver's own word (410 Gone, 429 Too Many Requests with Retry-After).

use crate::outbound::{CallError, Response};
use shiftboss_core::retry::{RetryDecision, RetryPolicy};
use shiftboss_store::DeliveryResult;
use std::time::Duration;

/// The longest a receiver's Retry-After is honoured; a longer one is cut to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// A 429 or 503 without a Retry-After waits this long.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(30);

/// The verdict on one attempt, `attempts` counting it (the claim counted it already). Waits are
/// durations: the store turns them into due times by its own clock.
pub fn verdict(outcome: &Result<Response, CallError>, attempts: u32, policy: &RetryPolicy) -> DeliveryResult {
    let failed = |status: Option<u16>, error: String| match policy.after_failure(attempts, fastrand::f64()) {
        RetryDecision::RetryAfter(after) => DeliveryResult::Retry { after, status, error },
        RetryDecision::GiveUp => {
            let plural = if attempts == 1 { "" } else { "s" };
            DeliveryResult::Dead { status, error: format!("{error} (gave up after {attempts} attempt{plural})") }
        }
    };
    match outcome {
        Ok(r) => {
            let status = r.status.as_u16();
            match status {
                200..=299 => DeliveryResult::Delivered { status },
                410 => DeliveryResult::Gone { status },
                429 | 503 => {
                    let wait =
                        retry_after(r).unwrap_or(DEFAULT_RETRY_AFTER).clamp(Duration::from_secs(1), MAX_RETRY_AFTER);
                    DeliveryResult::Throttled { after: wait, status }
                }
                _ => failed(Some(status), format!("HTTP {status}")),
            }
        }
        // A refused address or a certificate will not pass by itself: an operator fixes the
        // subscription or the allow-list, then redelivers.
        Err(e) if !e.is_transient() => DeliveryResult::Dead { status: None, error: e.to_string() },
        Err(e) => failed(None, e.to_string()),
    }
}

/// Retry-After, in seconds, or as an HTTP date measured from the answer's own `Date` (the
/// receiver's clock against the receiver's clock, so neither host's skew counts).
fn retry_after(r: &Response) -> Option<Duration> {
    let header = |name: &str| r.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim());
    let v = header("retry-after")?;
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    let sent = httpdate::parse_http_date(header("date")?).ok()?;
    Some(at.duration_since(sent).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::{StatusCode, Url};

    fn answer(status: u16, headers: &[(&str, &str)]) -> Result<Response, CallError> {
        Ok(Response {
            status: StatusCode::from_u16(status).unwrap(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: Vec::new(),
            url: Url::parse("http://x/").unwrap(),
        })
    }

    fn policy() -> RetryPolicy {
        RetryPolicy::Intervals { intervals: vec![Duration::from_secs(5), Duration::from_secs(300)], max_failures: None }
    }

    #[test]
    fn answers_become_verdicts() {
        let p = policy();
        assert_eq!(verdict(&answer(204, &[]), 1, &p), DeliveryResult::Delivered { status: 204 });
        assert_eq!(verdict(&answer(410, &[]), 1, &p), DeliveryResult::Gone { status: 410 });
        assert_eq!(
            verdict(&answer(429, &[("Retry-After", "120")]), 1, &p),
            DeliveryResult::Throttled { after: Duration::from_secs(120), status: 429 }
        );
        assert_eq!(
            verdict(&answer(503, &[("retry-after", "999999")]), 1, &p),
            DeliveryResult::Throttled { after: MAX_RETRY_AFTER, status: 503 }
        );
        assert_eq!(
            verdict(&answer(500, &[]), 1, &p),
            DeliveryResult::Retry { after: Duration::from_secs(5), status: Some(500), error: "HTTP 500".into() }
        );
        assert_eq!(
            verdict(&answer(400, &[]), 2, &p),
            DeliveryResult::Retry { after: Duration::from_secs(300), status: Some(400), error: "HTTP 400".into() }
        );
        let DeliveryResult::Dead { status: Some(500), error } = verdict(&answer(500, &[]), 3, &p) else {
            panic!("the schedule ran out")
        };
        assert!(error.contains("gave up after 3 attempts"), "{error}");
        let dated =
            answer(429, &[("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Retry-After", "Sun, 06 Nov 1994 08:51:37 GMT")]);
        assert_eq!(verdict(&dated, 1, &p), DeliveryResult::Throttled { after: Duration::from_secs(120), status: 429 });
        let undated = answer(429, &[("Retry-After", "Sun, 06 Nov 1994 08:51:37 GMT")]);
        assert_eq!(verdict(&undated, 1, &p), DeliveryResult::Throttled { after: DEFAULT_RETRY_AFTER, status: 429 });
        let refused = Err(CallError::Connect("refused".into()));
        assert!(matches!(verdict(&refused, 1, &p), DeliveryResult::Retry { status: None, .. }));
        let tls = Err(CallError::Tls("unknown issuer".into()));
        assert!(matches!(verdict(&tls, 1, &p), DeliveryResult::Dead { status: None, .. }));
    }
}
