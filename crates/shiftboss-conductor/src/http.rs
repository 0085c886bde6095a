//! Mapping an HTTP task: its request becomes the static config of the `http` agent, its body the
//! step's input. The agent answers in Conductor's shape (`output: "conductor"`), so that
//! `${ref.output.response.body...}`, `...statusCode` and `...headers` read what they read there;
//! the agent's guard, TLS, secrets and bounds apply as to every outbound call.

use super::document::{is_empty, opt_str};
use super::importer::Importer;
use crate::err;
use serde_json::{Map, Value, json};
use shiftboss_core::workflow::{DefinitionError, StepDef};

impl Importer {
    pub(super) fn http(
        &mut self,
        t: &Map<String, Value>,
        at: &str,
        loops: &[String],
    ) -> Result<StepDef, DefinitionError> {
        let params = match t.get("inputParameters") {
            Some(Value::Object(p)) => p,
            _ => return Err(err(format!("{at}.inputParameters"), "an HTTP task needs http_request")),
        };
        let (req, rpath) = match params.get("http_request") {
            Some(Value::Object(r)) => (r, format!("{at}.inputParameters.http_request")),
            Some(_) => return Err(err(format!("{at}.inputParameters.http_request"), "must be an object")),
            None if params.contains_key("uri") => (params, format!("{at}.inputParameters")),
            None => return Err(err(format!("{at}.inputParameters.http_request"), "an HTTP task needs http_request")),
        };
        let static_str = |key: &str| -> Result<Option<&str>, DefinitionError> {
            let v = opt_str(req, key, &rpath)?;
            if v.is_some_and(|s| s.contains("${")) {
                return Err(err(
                    format!("{rpath}.{key}"),
                    "the HTTP agent's config is static in shiftboss: no `${...}` here (the body may use them)",
                ));
            }
            Ok(v)
        };
        let uri = static_str("uri")?.ok_or_else(|| err(format!("{rpath}.uri"), "an HTTP task needs a uri"))?;
        let method = static_str("method")?.unwrap_or("GET").to_ascii_uppercase();
        let mut headers = Map::new();
        match req.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    match v {
                        // Conductor's (Orkes') secret reference is ours, resolved by the agent at call time.
                        Value::String(s) if s.contains("${workflow.secrets.") => {
                            let ours = s.replace("${workflow.secrets.", "${secret.");
                            if ours.replace("${secret.", "").contains("${") {
                                return Err(err(
                                    format!("{rpath}.headers.{k}"),
                                    "only `${workflow.secrets.NAME}` may be used in a header: the config is static",
                                ));
                            }
                            headers.insert(k.clone(), Value::String(ours));
                        }
                        Value::String(s) if s.contains("${") => {
                            return Err(err(
                                format!("{rpath}.headers.{k}"),
                                "the HTTP agent's config is static in shiftboss: no `${...}` in headers",
                            ));
                        }
                        Value::String(_) => {
                            headers.insert(k.clone(), v.clone());
                        }
                        _ => return Err(err(format!("{rpath}.headers.{k}"), "a header value must be a string")),
                    }
                }
            }
            Some(_) => return Err(err(format!("{rpath}.headers"), "must be an object")),
        }
        if let Some(accept) = static_str("accept")?
            && !headers.keys().any(|k| k.eq_ignore_ascii_case("accept"))
        {
            headers.insert("Accept".into(), Value::String(accept.to_owned()));
        }
        let content_type = static_str("contentType")?;
        // Conductor bounds the connection and each read; the HTTP agent bounds the whole call (and
        // its connect by the deployment's connect_timeout): their sum bounds it here.
        let mut timeout_ms = 0u64;
        for key in ["connectionTimeOut", "readTimeOut"] {
            match req.get(key) {
                None | Some(Value::Null) => {}
                Some(v) => match v.as_u64() {
                    Some(ms) => timeout_ms = timeout_ms.saturating_add(ms),
                    None => return Err(err(format!("{rpath}.{key}"), "must be a number of milliseconds")),
                },
            }
        }
        for (key, v) in req {
            match key.as_str() {
                "uri" | "method" | "headers" | "accept" | "contentType" | "body" => {}
                "connectionTimeOut" | "readTimeOut" => self.note(
                    format!("{rpath}.{key}"),
                    "approximated: connectionTimeOut + readTimeOut bound the whole call (timeout_ms)",
                ),
                "asyncComplete" if v == &Value::Bool(true) => {
                    return Err(err(
                        format!("{rpath}.asyncComplete"),
                        "a call completed from outside is not supported",
                    ));
                }
                _ if is_empty(v) => {}
                _ => self.note(format!("{rpath}.{key}"), "dropped: the HTTP agent has no such setting"),
            }
        }
        if !std::ptr::eq(req, params) {
            for key in params.keys().filter(|k| k.as_str() != "http_request") {
                self.note(
                    format!("{at}.inputParameters.{key}"),
                    "dropped: the HTTP agent's input is the request body (http_request.body)",
                );
            }
        }
        let mut config = json!({"url": uri, "method": method, "output": "conductor"});
        if !headers.is_empty() {
            config["headers"] = Value::Object(headers);
        }
        if let Some(ct) = content_type {
            config["content_type"] = Value::String(ct.to_owned());
        }
        if timeout_ms > 0 {
            config["timeout_ms"] = json!(timeout_ms);
        }
        // The agent sends the step's input as the body; a request without one sends `{}`.
        let body = match req.get("body") {
            None | Some(Value::Null) => {
                self.note(format!("{rpath}.body"), "none given: the HTTP agent sends `{}` as the JSON body");
                json!({})
            }
            Some(b) => self.template(b, &format!("{rpath}.body"), loops)?,
        };
        let mut step = StepDef::agent("", "http").with_config(config).with_input(body);
        self.apply_task_def(&mut step, t, at, None, loops)?;
        Ok(step)
    }
}
