//! Mapping an HTTP task: its request becomes the static config of the `http` agent, its body the
//! step's input.

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
        if let Some(ct) = static_str("contentType")?
            && !ct.eq_ignore_ascii_case("application/json")
        {
            self.note(format!("{rpath}.contentType"), format!("dropped: the HTTP agent always sends JSON, not {ct}"));
        }
        for (key, v) in req {
            match key.as_str() {
                "uri" | "method" | "headers" | "accept" | "contentType" | "body" => {}
                "connectionTimeOut" | "readTimeOut" => {
                    self.note(format!("{rpath}.{key}"), "dropped: the step's timeout bounds the whole call")
                }
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
        if uri.starts_with("https://") {
            self.note(
                format!("{rpath}.uri"),
                "the HTTP agent of this build speaks only http://: the engine refuses this url until it does",
            );
        }
        let mut config = json!({"url": uri, "method": method});
        if !headers.is_empty() {
            config["headers"] = Value::Object(headers);
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
