//! The webhook sink: a POST of the message as JSON, made by the engine's own HTTP agent, so that
//! the SSRF guard, the allow-list, TLS, secrets, the bounds, the `Idempotency-Key` header and the
//! sorting of answers into transient and permanent faults are the same code as every HTTP step's,
//! not a second copy of it.

use shiftboss_core::workflow::StepDef;
use shiftboss_engine::agent::{Agent, AgentCall, AgentError};
use shiftboss_engine::{HttpAgent, Outbound};
use std::collections::BTreeMap;
use std::time::Duration;

pub struct Webhook {
    http: HttpAgent,
}

impl Webhook {
    pub fn new(outbound: Outbound) -> Webhook {
        Webhook { http: HttpAgent::new(outbound) }
    }

    /// Checks the URL and headers by the HTTP agent's rules, at registration.
    pub fn check(&self, step: &StepDef, url: &str, headers: &BTreeMap<String, String>) -> Result<(), String> {
        let step = StepDef { config: http_config(url, headers, None), ..step.clone() };
        self.http.check_config(&step)
    }

    /// POSTs the call's input to `url`; `Ok` on a 2xx answer (whose body is not kept: the event
    /// agent's output is the same whatever the sink).
    pub async fn post(
        &self,
        call: &AgentCall,
        url: &str,
        headers: &BTreeMap<String, String>,
        timeout: Option<Duration>,
    ) -> Result<(), AgentError> {
        // The body is the input, which the HTTP agent never resolves secrets in (whoever submits
        // a task must not read one out); the headers come from the definition and may.
        let call = AgentCall { config: http_config(url, headers, timeout), ..call.clone() };
        self.http.call(&call).await.map(|_| ())
    }

    /// host:port of a webhook's URL, for the circuit breaker.
    pub fn service(&self, url: &str) -> Option<String> {
        self.http.service(&serde_json::json!({ "url": url }))
    }
}

/// The HTTP agent's config for the POST.
fn http_config(url: &str, headers: &BTreeMap<String, String>, timeout: Option<Duration>) -> serde_json::Value {
    let mut c = serde_json::json!({"method": "POST", "url": url, "headers": headers});
    if let Some(t) = timeout {
        // At least 1: the HTTP agent refuses 0, and a sub-millisecond bound means "now" anyway.
        c["timeout_ms"] = serde_json::json!(u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1));
    }
    c
}
