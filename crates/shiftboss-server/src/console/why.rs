//! "Why is this step not running?", answered in words from the state the store holds: the step's
//! row, its task, the pause that holds it, the workflow's definition, who serves its agent type,
//! and the limits the claim obeys. A pure function of what it is given, so each reason is tested
//! with plain values.

use shiftboss_core::model::{StepRecord, TaskRecord};
use shiftboss_core::workflow::StepKind;
use shiftboss_core::{StepState, TaskState, Timestamp};
use shiftboss_engine::runtime::CircuitView;

/// What the answer reads besides the step.
pub struct Context<'a> {
    pub task: &'a TaskRecord,
    pub now: Timestamp,
    /// The last pause of the task, while it is paused: who, when, why.
    pub paused: Option<(&'a str, Timestamp, &'a str)>,
    /// The signal a wait step waits for, from the definition.
    pub signal: Option<&'a str>,
    /// Whether any live scheduler (this process's agents) or remote worker serves the step's agent type.
    pub served: bool,
    /// The concurrency and rate limit its agent type has, if any (at once, per second).
    pub limit: Option<(Option<u32>, Option<u32>)>,
    /// Steps of its agent type processing now.
    pub running_of_type: u64,
    /// The circuit of the step's service in this process, when calls to it wait: given for a step
    /// this process holds or would claim (circuits are kept per process).
    pub circuit: Option<CircuitView>,
}

/// The circuit, in words, with the store's clock for the time it opens again.
fn circuit_words(c: CircuitView, now: Timestamp) -> String {
    match c {
        CircuitView::Open { remaining } => format!(
            "its service's circuit is open in this process until {} after repeated faults: calls wait until then, and the first goes as a probe",
            now.plus(remaining)
        ),
        CircuitView::Probing => {
            "its service's circuit is half open in this process: one call is out as the probe, and the others wait for its answer".to_owned()
        }
    }
}

/// The reason, in words; none for a step that is done.
pub fn why(step: &StepRecord, cx: &Context<'_>) -> Option<String> {
    let t = |ts: Timestamp| ts.to_string();
    if matches!(step.state, StepState::Processed | StepState::Cancelled) {
        return None;
    }
    if cx.task.state == TaskState::Paused
        && let Some((by, at, reason)) = cx.paused
    {
        return Some(format!("its task is paused by {by} at {} (\"{reason}\"); resume it to go on", t(at)));
    }
    if step.state == StepState::Error {
        let err = step.last_error.as_deref().unwrap_or("no reason recorded");
        return Some(format!(
            "it is in Error after {} attempt{} and {} counted failure{} (last error: {err}); it runs again only when an operator resubmits it",
            step.attempts,
            if step.attempts == 1 { "" } else { "s" },
            step.failure_count,
            if step.failure_count == 1 { "" } else { "s" }
        ));
    }
    if step.kind == StepKind::Wait {
        return Some(match cx.signal {
            Some(s) => format!("it is waiting for signal \"{s}\" (send it with the Signal action)"),
            None => format!("it is waiting until {}", t(step.due_at)),
        });
    }
    if step.kind == StepKind::SubWorkflow {
        return Some("it is waiting for its child task to end".to_owned());
    }
    if step.kind != StepKind::Agent {
        return Some("a control step: it moves when the steps it holds end".to_owned());
    }
    if step.state == StepState::Processing {
        let by = step.locked_by.as_deref().unwrap_or("?");
        let until = step.complete_by.map(t).unwrap_or_else(|| "no deadline".into());
        let running = format!(
            "it is running: attempt {} on {by}, which must reply by {until} (lease token {})",
            step.attempts, step.lease_token.0
        );
        return Some(match cx.circuit {
            Some(c) => format!("{running}; {}", circuit_words(c, cx.now)),
            None => running,
        });
    }
    // Pending.
    if step.due_at.0 > cx.now.0 {
        let postponed = step.last_error.as_deref().is_some_and(shiftboss_store::lapse::is_postponed_why);
        return Some(if postponed {
            format!(
                "it was handed back unfinished (not ready yet, no failure counted): it is due again at {}",
                t(step.due_at)
            )
        } else if step.failure_count > 0 {
            format!(
                "it is due at {} after its {} failure ({})",
                t(step.due_at),
                ordinal(step.failure_count),
                step.last_error.as_deref().unwrap_or("no reason recorded")
            )
        } else {
            format!("it is due at {}", t(step.due_at))
        });
    }
    if !cx.served {
        return Some(format!("no live worker or scheduler serves agent type \"{}\"", step.agent));
    }
    if let Some(d) = &step.domain {
        match step.fallback_at {
            Some(at) if at.0 <= cx.now.0 => {}
            Some(at) => {
                return Some(format!(
                    "it is routed to domain \"{d}\": only a worker or scheduler serving that domain takes it until {}, then any instance may",
                    t(at)
                ));
            }
            None => {
                return Some(format!(
                    "it is routed to domain \"{d}\": only a worker or scheduler serving that domain takes it (poll with domain \"{d}\")"
                ));
            }
        }
    }
    if let Some(c) = cx.circuit {
        return Some(format!("it is due; {}", circuit_words(c, cx.now)));
    }
    if let Some((at_once, per_second)) = cx.limit {
        if let Some(n) = at_once
            && cx.running_of_type >= u64::from(n)
        {
            return Some(format!(
                "agent type \"{}\" runs {} steps, its limit of {n} at once: it waits for one to end",
                step.agent, cx.running_of_type
            ));
        }
        if let Some(r) = per_second {
            return Some(format!(
                "it is due; agent type \"{}\" is limited to {r} per second, so it may wait for its turn",
                step.agent
            ));
        }
    }
    Some("it is due now and waits for a scheduler to claim it".to_owned())
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use shiftboss_core::{LeaseToken, StepId, TaskId};
    use std::time::Duration;

    fn task(state: TaskState) -> TaskRecord {
        TaskRecord {
            id: TaskId(1),
            key: "k".into(),
            workflow: "w".into(),
            workflow_version: 1,
            state,
            priority: 0,
            bucket: 0,
            input: serde_json::json!({}),
            output: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            parent_task_id: None,
            deadline_at: None,
            correlation_id: None,
            domains: Default::default(),
            archived: false,
        }
    }

    fn step(state: StepState) -> StepRecord {
        StepRecord {
            id: StepId(1),
            task_id: TaskId(1),
            name: "charge".into(),
            kind: StepKind::Agent,
            agent: "payment".into(),
            state,
            compensates: None,
            locked_by: None,
            complete_by: None,
            lease_token: LeaseToken(3),
            due_at: Timestamp(1_000),
            priority: 0,
            bucket: 0,
            failure_count: 0,
            attempts: 0,
            last_error: None,
            input: serde_json::json!({}),
            output: None,
            progress: None,
            domain: None,
            fallback_at: None,
            idempotency_key: "i".into(),
            timeout: Duration::from_secs(5),
            config: serde_json::json!({}),
            retry: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    fn cx(task: &TaskRecord) -> Context<'_> {
        Context {
            task,
            now: Timestamp(2_000),
            paused: None,
            signal: None,
            served: true,
            limit: None,
            running_of_type: 0,
            circuit: None,
        }
    }

    #[test]
    fn each_reason_is_named_in_words() {
        let running = task(TaskState::Running);
        let later = StepRecord {
            due_at: Timestamp(5_000),
            failure_count: 3,
            last_error: Some("503".into()),
            ..step(StepState::Pending)
        };
        let w = why(&later, &cx(&running)).unwrap();
        assert!(w.contains("due at") && w.contains("3rd failure") && w.contains("503"), "{w}");
        let handed_back = StepRecord {
            last_error: Some(shiftboss_store::lapse::postponed_why(Duration::from_secs(60))),
            ..later.clone()
        };
        let w = why(&handed_back, &cx(&running)).unwrap();
        assert!(w.contains("handed back unfinished") && !w.contains("failure ("), "{w}");

        let wait = StepRecord { kind: StepKind::Wait, agent: String::new(), ..step(StepState::Processing) };
        let w = why(&wait, &Context { signal: Some("approve"), ..cx(&running) }).unwrap();
        assert!(w.contains("waiting for signal \"approve\""), "{w}");

        let w = why(&step(StepState::Pending), &Context { served: false, ..cx(&running) }).unwrap();
        assert!(w.contains("no live worker or scheduler serves agent type \"payment\""), "{w}");

        let paused = task(TaskState::Paused);
        let w = why(
            &step(StepState::Pending),
            &Context { paused: Some(("ann", Timestamp(1_500), "fraud check")), ..cx(&paused) },
        );
        let w = w.unwrap();
        assert!(w.contains("paused by ann") && w.contains("\"fraud check\""), "{w}");

        let full = Context { limit: Some((Some(2), None)), running_of_type: 2, ..cx(&running) };
        let w = why(&step(StepState::Pending), &full).unwrap();
        assert!(w.contains("limit of 2 at once"), "{w}");
        let rate = Context { limit: Some((None, Some(10))), ..cx(&running) };
        assert!(why(&step(StepState::Pending), &rate).unwrap().contains("limited to 10 per second"));

        let err =
            StepRecord { attempts: 2, failure_count: 1, last_error: Some("refused".into()), ..step(StepState::Error) };
        let w = why(&err, &cx(&running)).unwrap();
        assert!(w.contains("in Error after 2 attempts and 1 counted failure (last error: refused)"), "{w}");
        assert!(w.contains("resubmits"), "{w}");

        let busy = StepRecord {
            locked_by: Some("s-1".into()),
            complete_by: Some(Timestamp(9_000)),
            attempts: 2,
            ..step(StepState::Processing)
        };
        let w = why(&busy, &cx(&running)).unwrap();
        assert!(w.contains("attempt 2 on s-1") && w.contains("lease token 3"), "{w}");

        let open = Context { circuit: Some(CircuitView::Open { remaining: Duration::from_secs(65) }), ..cx(&running) };
        let w = why(&step(StepState::Pending), &open).unwrap();
        assert!(w.starts_with("it is due; its service's circuit is open in this process until"), "{w}");
        assert!(w.contains(&Timestamp(67_000).to_string()), "open until now + 65 s: {w}");
        let w = why(&busy, &open).unwrap();
        assert!(w.contains("attempt 2 on s-1") && w.contains("circuit is open"), "{w}");
        let probing = Context { circuit: Some(CircuitView::Probing), ..cx(&running) };
        assert!(why(&busy, &probing).unwrap().contains("one call is out as the probe"));

        let routed = StepRecord { domain: Some("eu-west".into()), ..step(StepState::Pending) };
        let w = why(&routed, &cx(&running)).unwrap();
        assert!(w.contains("routed to domain \"eu-west\"") && w.contains("poll with domain"), "{w}");
        let falls_back = StepRecord { fallback_at: Some(Timestamp(9_000)), ..routed.clone() };
        let w = why(&falls_back, &cx(&running)).unwrap();
        assert!(w.contains(&format!("until {}, then any instance may", Timestamp(9_000))), "{w}");
        let fallen_back = StepRecord { fallback_at: Some(Timestamp(1_000)), ..routed };
        assert!(why(&fallen_back, &cx(&running)).unwrap().contains("waits for a scheduler"), "past its fallback");

        assert!(why(&step(StepState::Pending), &cx(&running)).unwrap().contains("waits for a scheduler"));
        assert_eq!(why(&step(StepState::Processed), &cx(&running)), None);
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(22), "22nd");
    }
}
