//! A step's config for the event agent: `{"sink": "...", "headers": {...}, "timeout_ms": N}`.

use crate::sink::{Sink, SinkError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    sink: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// A checked config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepConfig {
    pub sink: Sink,
    /// Headers of a webhook's request (values may name `${secret.NAME}`).
    pub headers: BTreeMap<String, String>,
    /// A bound on the whole call, besides the step's complete-by.
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("event agent config: {0}")]
    Shape(String),
    #[error("event agent config: {0}")]
    Sink(#[from] SinkError),
    #[error("event agent config: headers are sent with webhook sinks only, not with {0:?}")]
    HeadersNotSent(String),
    #[error("event agent config: timeout_ms must be above 0")]
    ZeroTimeout,
}

impl StepConfig {
    pub fn parse(config: &serde_json::Value) -> Result<StepConfig, ConfigError> {
        let raw: Raw = serde_json::from_value(config.clone()).map_err(|e| ConfigError::Shape(e.to_string()))?;
        let sink = Sink::parse(&raw.sink)?;
        // NATS headers would be a second place for secrets and ids to leak through; nothing asks
        // for them yet.
        if !raw.headers.is_empty() && !matches!(sink, Sink::Webhook(_)) {
            return Err(ConfigError::HeadersNotSent(raw.sink));
        }
        if raw.timeout_ms == Some(0) {
            return Err(ConfigError::ZeroTimeout);
        }
        Ok(StepConfig { sink, headers: raw.headers, timeout: raw.timeout_ms.map(Duration::from_millis) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configs_are_checked() {
        let c = StepConfig::parse(&json!({"sink": "webhook:http://h/x", "headers": {"a": "b"}, "timeout_ms": 500}))
            .unwrap();
        assert_eq!(c.timeout, Some(Duration::from_millis(500)));
        assert_eq!(c.headers["a"], "b");
        for (bad, says) in [
            (json!(null), "invalid type"),
            (json!({}), "missing field `sink`"),
            (json!({"sink": 3}), "invalid type"),
            (json!({"sink": "nats:a", "sinc": 1}), "unknown field `sinc`"),
            (json!({"sink": "nats:a", "headers": {"a": "b"}}), "webhook sinks only"),
            (json!({"sink": "nats:a", "timeout_ms": 0}), "above 0"),
            (json!({"sink": "sqs:q"}), "not supported"),
        ] {
            let e = StepConfig::parse(&bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
