//! The built-in HTTP agent: lets a workflow call a remote service without writing Rust.
//!
//! A step's `config` names the request:
//! `{"method": "POST", "url": "http://stock:8080/reserve", "headers": {"x-team": "orders"}, "body": {...}}`.
//! An agent made with [`HttpAgent::for_service`] wraps one service (P4): its steps give a path
//! (`"url": "/reserve"`), resolved against the service's base URL, so that definitions do not
//! change when the service moves.
//! The body is the step's input unless the config gives one. Every attempt carries the step's
//! idempotency key as an `Idempotency-Key` header, so the service can drop duplicates.
//!
//! Faults that may pass (5xx, 429, timeouts, connection errors) are transient; other 4xx are
//! permanent. A 2xx answer's JSON body is the step's output.

use crate::agent::{Agent, AgentCall, AgentError};
use async_trait::async_trait;
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use shiftboss_core::workflow::StepDef;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestConfig {
    #[serde(default = "post")]
    method: String,
    /// Optional for an agent of one service: a job's step, which has no config, posts to the
    /// service's base URL.
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<serde_json::Value>,
}

fn post() -> String {
    "POST".into()
}

impl RequestConfig {
    fn parse(config: &serde_json::Value, base: Option<&Url>) -> Result<(RequestConfig, Method, Url), String> {
        let c: RequestConfig = serde_json::from_value(config.clone()).map_err(|e| format!("http agent config: {e}"))?;
        let method = Method::from_bytes(c.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("http agent config: invalid method {:?}", c.method))?;
        let url = match (base, c.url.as_deref()) {
            (Some(base), None) => Ok(base.clone()),
            (None, None) => return Err("http agent config: url is required".into()),
            (Some(base), Some(u)) if u.starts_with('/') => base.join(u),
            (_, Some(u)) => Url::parse(u),
        };
        let shown = c.url.as_deref().unwrap_or("");
        let url = url.map_err(|e| format!("http agent config: invalid url {shown:?}: {e}"))?;
        if url.scheme() != "http" {
            return Err(format!("http agent config: url {shown:?}: only http:// is supported by this build"));
        }
        for (k, v) in &c.headers {
            reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("http agent config: invalid header name {k:?}"))?;
            reqwest::header::HeaderValue::from_str(v)
                .map_err(|_| format!("http agent config: invalid value for header {k:?}"))?;
        }
        Ok((c, method, url))
    }
}

/// The longest part of an error response kept in the step's error.
const MAX_ERROR_BODY: usize = 300;

pub struct HttpAgent {
    client: reqwest::Client,
    /// The service this agent wraps, when it wraps one.
    base: Option<Url>,
}

impl Default for HttpAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpAgent {
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(64)
            .build()
            .expect("a plain HTTP client builds");
        HttpAgent { client, base: None }
    }

    /// An agent for one service: steps give paths, resolved against `base_url`.
    pub fn for_service(base_url: &str) -> Result<Self, String> {
        let base = Url::parse(base_url).map_err(|e| format!("invalid base url {base_url:?}: {e}"))?;
        if base.scheme() != "http" {
            return Err(format!("base url {base_url:?}: only http:// is supported by this build"));
        }
        Ok(HttpAgent { base: Some(base), ..Self::new() })
    }
}

#[async_trait]
impl Agent for HttpAgent {
    async fn call(&self, call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        // A config that passed the check at registration cannot fail here; if the database was
        // edited by hand it can, and that will not pass by retrying.
        let (cfg, method, url) =
            RequestConfig::parse(&call.config, self.base.as_ref()).map_err(AgentError::Permanent)?;
        let body = cfg.body.as_ref().unwrap_or(&call.input);
        let mut req = self
            .client
            .request(method, url)
            .header("Idempotency-Key", &call.idempotency_key)
            .header("X-Shiftboss-Task", call.task_id.0)
            .header("X-Shiftboss-Step", call.step_id.0)
            .header("X-Shiftboss-Attempt", call.attempt)
            .json(body);
        for (k, v) in &cfg.headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|e| AgentError::Transient(describe(&e)))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| AgentError::Transient(describe(&e)))?;
        if status.is_success() {
            if bytes.is_empty() {
                return Ok(serde_json::json!({"status": status.as_u16()}));
            }
            return Ok(serde_json::from_slice(&bytes).unwrap_or_else(
                |_| serde_json::json!({"status": status.as_u16(), "body": String::from_utf8_lossy(&bytes)}),
            ));
        }
        let text = String::from_utf8_lossy(&bytes);
        let text: String = text.chars().take(MAX_ERROR_BODY).collect();
        let msg = format!("HTTP {status}: {text}");
        if is_transient(status) { Err(AgentError::Transient(msg)) } else { Err(AgentError::Permanent(msg)) }
    }

    fn check_config(&self, step: &StepDef) -> Result<(), String> {
        RequestConfig::parse(&step.config, self.base.as_ref()).map(|_| ())
    }

    fn service(&self, config: &serde_json::Value) -> Option<String> {
        let url = match &self.base {
            Some(base) => base.clone(),
            None => Url::parse(config.get("url")?.as_str()?).ok()?,
        };
        Some(format!("{}:{}", url.host_str()?, url.port_or_known_default()?))
    }
}

fn is_transient(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_informational()
        || status.is_redirection()
}

fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "request failed"
    };
    format!("{kind}: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_sorted_into_transient_and_permanent() {
        for s in [500, 502, 503, 504, 429, 408] {
            assert!(is_transient(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [400, 401, 402, 404, 409, 422] {
            assert!(!is_transient(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }

    #[test]
    fn configs_are_checked() {
        let ok = serde_json::json!({"url": "http://127.0.0.1:9/x", "headers": {"x-a": "b"}});
        assert!(RequestConfig::parse(&ok, None).is_ok());
        let base = Url::parse("http://127.0.0.1:9").unwrap();
        let (_, _, url) = RequestConfig::parse(&serde_json::json!({"url": "/reserve"}), Some(&base)).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/reserve");
        assert!(RequestConfig::parse(&serde_json::json!({"url": "/reserve"}), None).is_err());
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"url": "not a url"}),
            serde_json::json!({"url": "ftp://h/x"}),
            serde_json::json!({"url": "http://h/x", "method": "NO SPACE"}),
            serde_json::json!({"url": "http://h/x", "headers": {"bad header": "v"}}),
            serde_json::json!({"url": "http://h/x", "mehtod": "GET"}),
        ] {
            assert!(RequestConfig::parse(&bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_service_is_host_and_port() {
        let a = HttpAgent::new();
        assert_eq!(a.service(&serde_json::json!({"url": "http://127.0.0.1:81/a"})).as_deref(), Some("127.0.0.1:81"));
        assert_eq!(a.service(&serde_json::json!({"url": "http://svc/a"})).as_deref(), Some("svc:80"));
        let b = HttpAgent::for_service("http://127.0.0.1:7000").unwrap();
        assert_eq!(b.service(&serde_json::json!({"url": "/x"})).as_deref(), Some("127.0.0.1:7000"));
        assert!(HttpAgent::for_service("https://h").is_err());
    }
}
