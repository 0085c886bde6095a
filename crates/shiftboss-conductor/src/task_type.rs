//! The Conductor task types the importer knows, read from a task's `type`.

use super::document::opt_str;
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::DefinitionError;

/// The Conductor task types the importer maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
    Simple,
    Http,
    /// SWITCH, or the legacy DECISION.
    Switch,
    Fork,
    Join,
    DoWhile,
    SubWorkflow,
    Wait,
    Terminate,
    /// INLINE: JavaScript (or value-param) evaluated by the `inline` agent.
    Inline,
    /// LAMBDA: a JavaScript function body, evaluated by the `inline` agent.
    Lambda,
    /// JSON_JQ_TRANSFORM: a jq filter run by the `jq` agent.
    JqTransform,
    /// SET_VARIABLE: a set step.
    SetVariable,
    /// NOOP: a set step that sets nothing.
    Noop,
    /// HUMAN: a wait for a signal.
    Human,
    /// EXCLUSIVE_JOIN: a set step whose output is the joined task's.
    ExclusiveJoin,
    /// START_WORKFLOW: a start_workflow step.
    StartWorkflow,
    /// DYNAMIC: an agent step whose agent is chosen at run time.
    Dynamic,
    /// FORK_JOIN_DYNAMIC (with its JOIN): a fork_each.
    ForkDynamic,
    /// EVENT: a step of the `event` agent.
    Event,
}

impl Type {
    pub(super) fn parse(at: &str, t: &Map<String, Value>) -> Result<Type, DefinitionError> {
        let path = format!("{at}.type");
        let name = opt_str(t, "type", at)?.unwrap_or("SIMPLE");
        Ok(match name {
            "SIMPLE" => Type::Simple,
            "HTTP" => Type::Http,
            "SWITCH" | "DECISION" => Type::Switch,
            "FORK_JOIN" => Type::Fork,
            "JOIN" => Type::Join,
            "DO_WHILE" => Type::DoWhile,
            "SUB_WORKFLOW" => Type::SubWorkflow,
            "WAIT" => Type::Wait,
            "TERMINATE" => Type::Terminate,
            "INLINE" => Type::Inline,
            "LAMBDA" => Type::Lambda,
            "JSON_JQ_TRANSFORM" => Type::JqTransform,
            "SET_VARIABLE" => Type::SetVariable,
            "NOOP" => Type::Noop,
            "HUMAN" => Type::Human,
            "EXCLUSIVE_JOIN" => Type::ExclusiveJoin,
            "START_WORKFLOW" => Type::StartWorkflow,
            "DYNAMIC" => Type::Dynamic,
            "FORK_JOIN_DYNAMIC" => Type::ForkDynamic,
            "EVENT" => Type::Event,
            other => {
                let hint = match other {
                    "KAFKA_PUBLISH" => ": publish with an EVENT task to NATS or a webhook, or from an agent",
                    _ => "",
                };
                return Err(err(path, format!("the Conductor task type {other:?} is not supported{hint}")));
            }
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Type::Simple => "SIMPLE",
            Type::Http => "HTTP",
            Type::Switch => "SWITCH",
            Type::Fork => "FORK_JOIN",
            Type::Join => "JOIN",
            Type::DoWhile => "DO_WHILE",
            Type::SubWorkflow => "SUB_WORKFLOW",
            Type::Wait => "WAIT",
            Type::Terminate => "TERMINATE",
            Type::Inline => "INLINE",
            Type::Lambda => "LAMBDA",
            Type::JqTransform => "JSON_JQ_TRANSFORM",
            Type::SetVariable => "SET_VARIABLE",
            Type::Noop => "NOOP",
            Type::Human => "HUMAN",
            Type::ExclusiveJoin => "EXCLUSIVE_JOIN",
            Type::StartWorkflow => "START_WORKFLOW",
            Type::Dynamic => "DYNAMIC",
            Type::ForkDynamic => "FORK_JOIN_DYNAMIC",
            Type::Event => "EVENT",
        }
    }
}
