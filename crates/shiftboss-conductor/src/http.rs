//! Mapping an HTTP task: its request becomes the static config of the `http` agent, its body the
//! step's input; a uri, method or header with `${...}` is made at run time, in the step's input
//! (`{"url", "method", "headers", "body"}`, the agent's `input: "request"`). The agent answers in Conductor's shape (`output: "conductor"`), so that
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
                return Err(err(format!("{rpath}.{key}"), "must be static in shiftboss: no `${...}` here"));
            }
            Ok(v)
        };
        // The uri, method and headers may hold expressions: those parts are made at run time, in
        // the step's input (the agent's `input: "request"`); the rest stays static config.
        let mut dynamic = Map::new();
        let uri =
            opt_str(req, "uri", &rpath)?.ok_or_else(|| err(format!("{rpath}.uri"), "an HTTP task needs a uri"))?;
        if uri.contains("${") {
            dynamic
                .insert("url".into(), self.template(&Value::String(uri.to_owned()), &format!("{rpath}.uri"), loops)?);
        }
        let method = opt_str(req, "method", &rpath)?.unwrap_or("GET");
        if method.contains("${") {
            let m = self.template(&Value::String(method.to_owned()), &format!("{rpath}.method"), loops)?;
            dynamic.insert("method".into(), m);
        }
        let method = method.to_ascii_uppercase();
        let mut headers = Map::new();
        let mut dynamic_headers = Map::new();
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
                                    "a header that names a secret may hold no other `${...}`",
                                ));
                            }
                            headers.insert(k.clone(), Value::String(ours));
                        }
                        Value::String(s) if s.contains("${") => {
                            let at = format!("{rpath}.headers.{k}");
                            dynamic_headers.insert(k.clone(), self.template(v, &at, loops)?);
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
        if !dynamic_headers.is_empty() {
            dynamic.insert("headers".into(), Value::Object(dynamic_headers));
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
        let mut config = json!({"output": "conductor"});
        if !dynamic.contains_key("method") {
            config["method"] = Value::String(method);
        }
        if !dynamic.contains_key("url") {
            config["url"] = Value::String(uri.to_owned());
        }
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
        let input = if dynamic.is_empty() {
            body
        } else {
            config["input"] = json!("request");
            dynamic.insert("body".into(), body);
            Value::Object(dynamic)
        };
        let mut step = StepDef::agent("", "http").with_config(config).with_input(input);
        self.apply_task_def(&mut step, t, at, None, loops)?;
        Ok(step)
    }
}
