//! The built-in HTTP agent: lets a workflow call a remote service without writing Rust.
//!
//! A step's `config` names the request:
//! `{"method": "POST", "url": "https://stock:8443/reserve", "headers": {"authorization": "Bearer ${secret.STOCK_TOKEN}"}, "body": {...}}`.
//! An agent made with [`HttpAgent::for_service`] wraps one service (P4): its steps give a path
//! (`"url": "/reserve"`), resolved against the service's base URL, so that definitions do not
//! change when the service moves.
//! The body is the step's input unless the config gives one. Every attempt carries the step's
//! idempotency key as an `Idempotency-Key` header, so the service can drop duplicates.
//! Other settings: `follow_redirects` (false by default: a redirect is a permanent error),
//! `timeout_ms` (a bound on the whole call, within complete-by), `content_type` (a body that is
//! a string is then sent as it is), and `output: "conductor"` (Conductor's HTTP task's output,
//! `{"response": {"statusCode", "headers", "body", "reasonPhrase"}}`), and `input: "request"`: the
//! step's input is `{"url", "method", "headers", "body"}`, each optional, made at run time from
//! the step's input template (a Conductor HTTP task whose uri names the order); its url and method
//! replace the config's, its headers are added (sent as they are: no secret is resolved in data),
//! its body is sent.
//!
//! Every call goes through [`Outbound`]: the SSRF guard, TLS, secrets (`${secret.NAME}` in header
//! values and in the config's body, never in the url nor the task's input) and the bounds.
//!
//! Faults that may pass (5xx, 429, timeouts, connection errors) are transient; other 4xx, guard
//! refusals, certificate errors, missing secrets, redirects not allowed and oversized answers are
//! permanent. A 2xx answer's JSON body is the step's output.

use crate::agent::{Agent, AgentCall, AgentError};
use crate::outbound::{Body, CallError, Outbound, Request, Response, secrets};
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
    #[serde(default)]
    follow_redirects: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    output: OutputShape,
    #[serde(default)]
    input: InputShape,
}

/// What the step's input is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum InputShape {
    /// The request body (unless the config gives one).
    #[default]
    Body,
    /// Parts of the request, made at run time: see [`InputRequest`].
    Request,
}

/// The parts of a request a step's input gives when its config says `input: "request"`. They are
/// data (the task's input may have made them), so no `${secret.NAME}` in them is resolved.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputRequest {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    body: Option<serde_json::Value>,
}

/// How a 2xx answer becomes the step's output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum OutputShape {
    /// The JSON body (or `{"status", "body"}` for a body that is not JSON).
    #[default]
    Body,
    /// Conductor's HTTP task: `{"response": {"statusCode", "headers", "body", "reasonPhrase"}}`.
    Conductor,
}

fn post() -> String {
    "POST".into()
}

impl RequestConfig {
    /// The config, its method, and its url: none only when the step's input gives it.
    fn parse(config: &serde_json::Value, base: Option<&Url>) -> Result<(RequestConfig, Method, Option<Url>), String> {
        let c: RequestConfig = serde_json::from_value(config.clone()).map_err(|e| format!("http agent config: {e}"))?;
        let method = parse_method(&c.method).map_err(|e| format!("http agent config: {e}"))?;
        let url = match (base, c.url.as_deref()) {
            (Some(base), None) => Some(base.clone()),
            (None, None) if c.input == InputShape::Request => None,
            (None, None) => return Err("http agent config: url is required".into()),
            (_, Some(u)) => {
                if u.contains("${secret.") {
                    return Err(
                        "http agent config: no secret in the url (urls appear in errors and logs): put it in a header"
                            .into(),
                    );
                }
                Some(target(base, u).map_err(|e| format!("http agent config: {e}"))?)
            }
        };
        for (k, v) in &c.headers {
            reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("http agent config: invalid header name {k:?}"))?;
            let refs = secrets::references(v).map_err(|e| format!("http agent config: header {k:?}: {e}"))?;
            // A value with a reference is checked once resolved, at call time.
            if refs.is_empty() {
                reqwest::header::HeaderValue::from_str(v)
                    .map_err(|_| format!("http agent config: invalid value for header {k:?}"))?;
            }
        }
        if let Some(body) = &c.body {
            check_body_references(body)?;
        }
        if c.timeout_ms == Some(0) {
            return Err("http agent config: timeout_ms must be above 0".into());
        }
        Ok((c, method, url))
    }
}

fn parse_method(m: &str) -> Result<Method, String> {
    Method::from_bytes(m.to_ascii_uppercase().as_bytes()).map_err(|_| format!("invalid method {m:?}"))
}

/// A url, a path resolved against the agent's service, checked to be http or https.
fn target(base: Option<&Url>, u: &str) -> Result<Url, String> {
    let url = match base {
        Some(base) if u.starts_with('/') => base.join(u),
        _ => Url::parse(u),
    };
    let url = url.map_err(|e| format!("invalid url {u:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("url {u:?}: only http:// and https:// are supported"));
    }
    Ok(url)
}

impl InputRequest {
    /// The request parts a step's input gives; an input of another shape is a permanent error.
    fn parse(input: &serde_json::Value) -> Result<InputRequest, String> {
        serde_json::from_value(input.clone()).map_err(|e| format!("http agent input (a request): {e}"))
    }

    /// Its headers as text: a number or a boolean is written out; a list or an object is refused.
    fn header_values(&self) -> Result<Vec<(String, String)>, String> {
        self.headers
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
                serde_json::Value::Number(_) | serde_json::Value::Bool(_) => Ok((k.clone(), v.to_string())),
                _ => Err(format!("http agent input: header {k:?} must be a string")),
            })
            .collect()
    }
}

fn check_body_references(v: &serde_json::Value) -> Result<(), String> {
    match v {
        serde_json::Value::String(s) => {
            secrets::references(s).map(|_| ()).map_err(|e| format!("http agent config: body: {e}"))
        }
        serde_json::Value::Array(a) => a.iter().try_for_each(check_body_references),
        serde_json::Value::Object(o) => o.values().try_for_each(check_body_references),
        _ => Ok(()),
    }
}

/// The longest part of an error response kept in the step's error.
const MAX_ERROR_BODY: usize = 300;

pub struct HttpAgent {
    outbound: Outbound,
    /// The service this agent wraps, when it wraps one.
    base: Option<Url>,
}

impl HttpAgent {
    /// An agent for any URL a step names, through `outbound` (its guard, TLS and secrets).
    pub fn new(outbound: Outbound) -> Self {
        HttpAgent { outbound, base: None }
    }

    /// An agent for one service: steps give paths, resolved against `base_url`.
    pub fn for_service(base_url: &str, outbound: Outbound) -> Result<Self, String> {
        let base = Url::parse(base_url).map_err(|e| format!("invalid base url {base_url:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!("base url {base_url:?}: only http:// and https:// are supported"));
        }
        Ok(HttpAgent { outbound, base: Some(base) })
    }
}

#[async_trait]
impl Agent for HttpAgent {
    async fn call(&self, call: &AgentCall) -> Result<serde_json::Value, AgentError> {
        // A config that passed the check at registration cannot fail here; if the database was
        // edited by hand it can, and that will not pass by retrying.
        let (cfg, mut method, url) =
            RequestConfig::parse(&call.config, self.base.as_ref()).map_err(AgentError::Permanent)?;
        let given = match cfg.input {
            InputShape::Body => None,
            InputShape::Request => Some(InputRequest::parse(&call.input).map_err(AgentError::Permanent)?),
        };
        let url = match given.as_ref().and_then(|g| g.url.as_deref()) {
            Some(u) => {
                target(self.base.as_ref(), u).map_err(|e| AgentError::Permanent(format!("http agent input: {e}")))?
            }
            None => url.ok_or_else(|| AgentError::Permanent("http agent: no url in the config or the input".into()))?,
        };
        if let Some(m) = given.as_ref().and_then(|g| g.method.as_deref()) {
            method = parse_method(m).map_err(|e| AgentError::Permanent(format!("http agent input: {e}")))?;
        }
        let mut req = Request::new(method, url);
        req.plain_headers = vec![
            ("Idempotency-Key".into(), call.idempotency_key.clone()),
            ("X-Shiftboss-Task".into(), call.task_id.0.to_string()),
            ("X-Shiftboss-Step".into(), call.step_id.0.to_string()),
            ("X-Shiftboss-Attempt".into(), call.attempt.to_string()),
        ];
        if let Some(g) = &given {
            req.plain_headers.extend(g.header_values().map_err(AgentError::Permanent)?);
        }
        req.headers = cfg.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // Only the definition's own body may name secrets: the input comes from whoever
        // submitted the task.
        let (body, body_secrets) = match (&cfg.body, given) {
            (Some(b), _) => (b.clone(), true),
            (None, Some(g)) => (g.body.unwrap_or_else(|| serde_json::json!({})), false),
            (None, None) => (call.input.clone(), false),
        };
        req.body = match (&cfg.content_type, body) {
            (Some(ct), serde_json::Value::String(text)) if !is_json(ct) => {
                Body::Text { content_type: ct.clone(), text }
            }
            (_, v) => Body::Json(v),
        };
        req.body_secrets = body_secrets;
        req.follow_redirects = cfg.follow_redirects;
        req.timeout = cfg.timeout_ms.map(Duration::from_millis);
        req.deadline = Some(call.deadline);
        let resp = self.outbound.call(req).await.map_err(agent_error)?;
        let status = resp.status;
        if status.is_success() {
            return Ok(match cfg.output {
                OutputShape::Body => body_output(&resp),
                OutputShape::Conductor => conductor_output(&resp),
            });
        }
        let text = String::from_utf8_lossy(&resp.body);
        let text: String = text.chars().take(MAX_ERROR_BODY).collect();
        let msg = format!("HTTP {status}: {text}");
        if is_transient(status) { Err(AgentError::Transient(msg)) } else { Err(AgentError::Permanent(msg)) }
    }

    fn check_config(&self, step: &StepDef) -> Result<(), String> {
        RequestConfig::parse(&step.config, self.base.as_ref()).map(|_| ())
    }

    fn service(&self, config: &serde_json::Value) -> Option<String> {
        // A url the input gives is known only at call time: such steps share no service's limits.
        let url = match &self.base {
            Some(base) => base.clone(),
            None if config.get("input").and_then(|v| v.as_str()) == Some("request") => return None,
            None => Url::parse(config.get("url")?.as_str()?).ok()?,
        };
        Some(format!("{}:{}", url.host_str()?, url.port_or_known_default()?))
    }
}

fn is_json(content_type: &str) -> bool {
    let ct = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    ct == "application/json" || ct.ends_with("+json")
}

fn agent_error(e: CallError) -> AgentError {
    if e.is_transient() { AgentError::Transient(e.to_string()) } else { AgentError::Permanent(e.to_string()) }
}

fn body_output(resp: &Response) -> serde_json::Value {
    let status = resp.status.as_u16();
    if resp.body.is_empty() {
        return serde_json::json!({"status": status});
    }
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|_| serde_json::json!({"status": status, "body": String::from_utf8_lossy(&resp.body)}))
}

fn conductor_output(resp: &Response) -> serde_json::Value {
    let mut headers = serde_json::Map::new();
    for (k, v) in &resp.headers {
        let entry = headers.entry(k.clone()).or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(values) = entry {
            values.push(serde_json::Value::String(v.clone()));
        }
    }
    let body = if resp.body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&resp.body)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&resp.body).into_owned()))
    };
    serde_json::json!({"response": {
        "statusCode": resp.status.as_u16(),
        "reasonPhrase": resp.status.canonical_reason().unwrap_or(""),
        "headers": headers,
        "body": body,
    }})
}

fn is_transient(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_informational()
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
        let ok = serde_json::json!({"url": "http://127.0.0.1:9/x", "headers": {"x-a": "b", "authorization": "Bearer ${secret.T}"}});
        assert!(RequestConfig::parse(&ok, None).is_ok());
        let base = Url::parse("http://127.0.0.1:9").unwrap();
        let (_, _, url) = RequestConfig::parse(&serde_json::json!({"url": "/reserve"}), Some(&base)).unwrap();
        assert_eq!(url.unwrap().as_str(), "http://127.0.0.1:9/reserve");
        assert!(RequestConfig::parse(&serde_json::json!({"url": "/reserve"}), None).is_err());
        // The url may come from the input alone when the input is the request.
        let (_, _, none) = RequestConfig::parse(&serde_json::json!({"input": "request"}), None).unwrap();
        assert!(none.is_none());
        assert!(RequestConfig::parse(&serde_json::json!({"input": "the body"}), None).is_err());
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"url": "not a url"}),
            serde_json::json!({"url": "ftp://h/x"}),
            serde_json::json!({"url": "http://h/${secret.A}"}),
            serde_json::json!({"url": "http://h/x", "headers": {"a": "${secret.bad-name}"}}),
            serde_json::json!({"url": "http://h/x", "body": {"a": ["${secret."]}}),
            serde_json::json!({"url": "http://h/x", "timeout_ms": 0}),
            serde_json::json!({"url": "http://h/x", "method": "NO SPACE"}),
            serde_json::json!({"url": "http://h/x", "headers": {"bad header": "v"}}),
            serde_json::json!({"url": "http://h/x", "mehtod": "GET"}),
        ] {
            assert!(RequestConfig::parse(&bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_service_is_host_and_port() {
        let out = Outbound::new(&crate::outbound::OutboundConfig::default()).unwrap();
        let a = HttpAgent::new(out.clone());
        assert_eq!(a.service(&serde_json::json!({"url": "http://127.0.0.1:81/a"})).as_deref(), Some("127.0.0.1:81"));
        assert_eq!(a.service(&serde_json::json!({"url": "http://svc/a"})).as_deref(), Some("svc:80"));
        let b = HttpAgent::for_service("http://127.0.0.1:7000", out.clone()).unwrap();
        assert_eq!(b.service(&serde_json::json!({"url": "/x"})).as_deref(), Some("127.0.0.1:7000"));
        assert!(HttpAgent::for_service("https://h", out.clone()).is_ok());
        assert!(HttpAgent::for_service("ftp://h", out).is_err());
    }
}
