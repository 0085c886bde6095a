//! TaskDef policies: retries, timeouts, per-agent limits and default input for an agent step.

use super::AgentLimits;
use super::document::{is_empty, opt_str, opt_u64};
use super::importer::Importer;
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::retry::RetryPolicy;
use shiftboss_core::workflow::{DefinitionError, MAX_STEP_TIMEOUT, MAX_TASK_TIMEOUT, OnTimeout, StepDef};
use std::time::Duration;

/// A TaskDef and the place it was given at.
type PathedDef = (String, Map<String, Value>);

// Field lists: what the importer reads, what it ignores knowingly, what it notes when set.
const DEF_READ: &[&str] = &[
    "name",
    "retryCount",
    "retryLogic",
    "retryDelaySeconds",
    "backoffScaleFactor",
    "timeoutSeconds",
    "responseTimeoutSeconds",
    "timeoutPolicy",
    "pollTimeoutSeconds",
    "totalTimeoutSeconds",
    "concurrentExecLimit",
    "rateLimitPerFrequency",
    "rateLimitFrequencyInSeconds",
    "inputTemplate",
];
const DEF_IGNORED: &[&str] = &[
    "description",
    "ownerEmail",
    "ownerApp",
    "inputKeys",
    "outputKeys",
    "createTime",
    "updateTime",
    "createdBy",
    "updatedBy",
];
const DEF_NOTED: &[&str] =
    &["isolationGroupId", "executionNameSpace", "inputSchema", "outputSchema", "enforceSchema", "baseType"];

/// The most retries a TaskDef may ask for.
pub(super) const MAX_RETRIES: u64 = 1000;

impl Importer {
    /// The TaskDef of an agent task: its inline `taskDefinition`, else the one of its name.
    fn find_task_def(&mut self, t: &Map<String, Value>, at: &str) -> Result<Option<PathedDef>, DefinitionError> {
        match t.get("taskDefinition") {
            None | Some(Value::Null) => {}
            Some(Value::Object(d)) => return Ok(Some((format!("{at}.taskDefinition"), d.clone()))),
            Some(_) => return Err(err(format!("{at}.taskDefinition"), "must be an object")),
        }
        let Some(name) = opt_str(t, "name", at)? else {
            return Ok(None);
        };
        Ok(self.def_index.get(name).map(|&i| {
            self.defs[i].used = true;
            (self.defs[i].path.clone(), self.defs[i].def.clone())
        }))
    }

    /// Retries, timeouts, limits and default input from the task's TaskDef.
    pub(super) fn apply_task_def(
        &mut self,
        step: &mut StepDef,
        t: &Map<String, Value>,
        at: &str,
        limits_agent: Option<&str>,
        loops: &[String],
    ) -> Result<(), DefinitionError> {
        let retry_override = opt_u64(t, "retryCount", at)?;
        let Some((dpath, d)) = self.find_task_def(t, at)? else {
            match retry_override {
                Some(n) => {
                    let r = retry_policy(n, "FIXED", 60, 1).map_err(|(f, p)| err(format!("{at}.{f}"), p))?;
                    step.retry = Some(r.0);
                    self.note(at, "no TaskDef: retries every 60 s (Conductor's default delay); 30 s step timeout")
                }
                None => {
                    let name = opt_str(t, "name", at)?.unwrap_or_default();
                    if self.missing_defs.insert(name.to_owned()) {
                        self.note(
                            at,
                            format!(
                                "no TaskDef named {name:?}: shiftboss's defaults apply (a 30 s timeout; the agent's or \
                                 the deployment's retry policy)"
                            ),
                        );
                    }
                }
            }
            return Ok(());
        };
        for (k, v) in &d {
            let k = k.as_str();
            if DEF_READ.contains(&k) || DEF_IGNORED.contains(&k) || is_empty(v) {
                continue;
            }
            if DEF_NOTED.contains(&k) {
                self.note(format!("{dpath}.{k}"), "ignored: shiftboss has no equivalent");
            } else {
                self.note(format!("{dpath}.{k}"), "ignored: not a TaskDef field the importer knows");
            }
        }
        let count = match retry_override {
            Some(n) => n,
            None => opt_u64(&d, "retryCount", &dpath)?.unwrap_or(3),
        };
        let logic = opt_str(&d, "retryLogic", &dpath)?.unwrap_or("FIXED");
        let delay = opt_u64(&d, "retryDelaySeconds", &dpath)?.unwrap_or(60);
        let scale = opt_u64(&d, "backoffScaleFactor", &dpath)?.unwrap_or(1);
        let (policy, note) = retry_policy(count, logic, delay, scale).map_err(|(f, p)| {
            let place = if f == "retryCount" && retry_override.is_some() { at } else { dpath.as_str() };
            err(format!("{place}.{f}"), p)
        })?;
        step.retry = Some(policy);
        if let Some(n) = note {
            self.note(format!("{dpath}.retryLogic"), n);
        }

        let timeout = opt_u64(&d, "timeoutSeconds", &dpath)?.unwrap_or(0);
        if timeout > 0 {
            let t = Duration::from_secs(timeout);
            if t > MAX_STEP_TIMEOUT {
                return Err(err(format!("{dpath}.timeoutSeconds"), "at most 7 days (604800 s) in shiftboss"));
            }
            step.timeout = Some(t);
        } else {
            self.note(
                format!("{dpath}.timeoutSeconds"),
                "0 (no timeout) in Conductor; every shiftboss step has one: the default 30 s applies",
            );
        }
        if let Some(r) = opt_u64(&d, "responseTimeoutSeconds", &dpath)?.filter(|r| *r > 0) {
            let r = Duration::from_secs(r);
            if r <= step.timeout() {
                step.response_timeout = Some(r);
            } else {
                self.note(
                    format!("{dpath}.responseTimeoutSeconds"),
                    format!(
                        "dropped: longer than the step's timeout ({}s), so it could never fire",
                        step.timeout().as_secs()
                    ),
                );
            }
        }
        // 0 is "none" for both, as in Conductor.
        for (key, field) in
            [("pollTimeoutSeconds", &mut step.claim_timeout), ("totalTimeoutSeconds", &mut step.total_timeout)]
        {
            if let Some(secs) = opt_u64(&d, key, &dpath)?.filter(|s| *s > 0) {
                let t = Duration::from_secs(secs);
                if t > MAX_TASK_TIMEOUT {
                    return Err(err(format!("{dpath}.{key}"), "at most 366 days (31622400 s) in shiftboss"));
                }
                *field = Some(t);
            }
        }
        step.on_timeout = match opt_str(&d, "timeoutPolicy", &dpath)?.unwrap_or("TIME_OUT_WF") {
            "RETRY" => OnTimeout::Retry,
            "TIME_OUT_WF" => OnTimeout::FailTask,
            "ALERT_ONLY" => OnTimeout::AlertOnly,
            other => {
                return Err(err(
                    format!("{dpath}.timeoutPolicy"),
                    format!("{other:?} is none of RETRY, TIME_OUT_WF, ALERT_ONLY"),
                ));
            }
        };

        let concurrent = opt_u64(&d, "concurrentExecLimit", &dpath)?.filter(|n| *n > 0);
        let per = opt_u64(&d, "rateLimitPerFrequency", &dpath)?.filter(|n| *n > 0);
        let every = opt_u64(&d, "rateLimitFrequencyInSeconds", &dpath)?.unwrap_or(1).max(1);
        if concurrent.is_some() || per.is_some() {
            match limits_agent {
                Some(agent) => {
                    let limit = AgentLimits {
                        agent: agent.to_owned(),
                        max_concurrent: concurrent.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                        per_second: per.map(|n| n as f64 / every as f64),
                    };
                    if !self.limits.iter().any(|l| l.agent == agent) {
                        self.limits.push(limit);
                    }
                }
                None => self.note(
                    &dpath,
                    "concurrentExecLimit and rate limits dropped: shiftboss sets limits per agent, and the http \
                     agent is shared by every HTTP step",
                ),
            }
        }

        if let Some(tmpl) = d.get("inputTemplate").filter(|v| !is_empty(v)) {
            let tpath = format!("{dpath}.inputTemplate");
            let Value::Object(defaults) = tmpl else {
                return Err(err(tpath, "must be an object"));
            };
            match (limits_agent, step.input.as_mut()) {
                (Some(_), Some(Value::Object(input))) => {
                    for (k, v) in defaults {
                        if !input.contains_key(k) {
                            let v = self.template(v, &format!("{tpath}.{k}"), loops)?;
                            input.insert(k.clone(), v);
                        }
                    }
                }
                _ => self.note(tpath, "dropped: an HTTP step's input is its request body"),
            }
        }
        Ok(())
    }
}

/// A TaskDef's retry settings as a policy, and a note when it is approximated. Errors name the
/// TaskDef field.
pub(super) fn retry_policy(
    count: u64,
    logic: &str,
    delay: u64,
    scale: u64,
) -> Result<(RetryPolicy, Option<String>), (&'static str, String)> {
    if count > MAX_RETRIES {
        return Err(("retryCount", format!("at most {MAX_RETRIES} retries")));
    }
    let secs = Duration::from_secs;
    if count == 0 {
        return Ok((RetryPolicy::Intervals { intervals: vec![secs(delay)], max_failures: Some(1) }, None));
    }
    Ok(match logic {
        "FIXED" => (RetryPolicy::Intervals { intervals: vec![secs(delay); count as usize], max_failures: None }, None),
        "LINEAR_BACKOFF" => {
            if scale == 0 {
                return Err(("backoffScaleFactor", "must be 1 or more".into()));
            }
            let intervals = (1..=count).map(|n| secs(delay.saturating_mul(scale).saturating_mul(n))).collect();
            (RetryPolicy::Intervals { intervals, max_failures: None }, None)
        }
        "EXPONENTIAL_BACKOFF" => {
            let longest = delay.saturating_mul(1u64.checked_shl((count - 1).min(63) as u32).unwrap_or(u64::MAX));
            let most = MAX_STEP_TIMEOUT.as_secs();
            let note = (longest > most)
                .then(|| format!("delays are capped at {} days (Conductor's would reach {longest} s)", most / 86_400));
            let cap = secs(longest.min(most).max(delay));
            let policy = RetryPolicy::Exponential {
                base: secs(delay),
                factor: 2.0,
                cap,
                jitter: 0.0,
                max_failures: count as u32 + 1,
            };
            (policy, note)
        }
        other => {
            return Err(("retryLogic", format!("{other:?} is none of FIXED, LINEAR_BACKOFF, EXPONENTIAL_BACKOFF")));
        }
    })
}
