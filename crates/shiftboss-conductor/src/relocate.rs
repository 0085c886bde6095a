//! Validation errors of the mapped definition, reported at the Conductor place they came from.

use super::importer::Importer;
use crate::err;
use shiftboss_core::workflow::DefinitionError;

impl Importer {
    /// A validation error of the mapped definition, at the Conductor place it came from.
    pub(super) fn relocate(&self, e: DefinitionError) -> DefinitionError {
        let shiftboss = e.path.clone();
        let (base, field) = if let Some(rest) = e.path.strip_prefix("step \"") {
            match rest.split_once("\".") {
                Some((name, field)) => (self.by_name.get(name).cloned(), field.to_owned()),
                None => (None, String::new()),
            }
        } else {
            let found = self
                .places
                .iter()
                .filter(|(ours, _)| {
                    e.path == *ours || e.path.strip_prefix(ours.as_str()).is_some_and(|r| r.starts_with('.'))
                })
                .max_by_key(|(ours, _)| ours.len());
            match found {
                Some((ours, conductor)) => {
                    (Some(conductor.clone()), e.path[ours.len()..].trim_start_matches('.').to_owned())
                }
                None => (None, e.path.clone()),
            }
        };
        let field = match field.as_str() {
            "name" => "taskReferenceName",
            "agent" => "name",
            "input" => "inputParameters",
            "config" => "inputParameters.http_request",
            "cases" => "decisionCases",
            "default" => "defaultCase",
            "branches" => "forkTasks",
            "condition" => "loopCondition",
            "body" => "loopOver",
            "max_iterations" => "loopCondition",
            "workflow" => "subWorkflowParam.name",
            "workflow_version" | "workflow_version_from" => "subWorkflowParam.version",
            "duration" | "until" | "signal" => "inputParameters",
            "timeout" if base.is_none() => "timeoutSeconds",
            // The TaskDef the value came from is not tracked here: our field name stays, and the
            // problem says where it is in the shiftboss definition.
            "output" if base.is_none() => "outputParameters",
            "output" => "inputParameters.workflowOutput",
            "steps" => "tasks",
            other => other,
        };
        let path = match base {
            Some(b) if field.is_empty() => b,
            Some(b) => format!("{b}.{field}"),
            None => field.to_owned(),
        };
        err(path, format!("{} (in the shiftboss definition: {shiftboss})", e.problem))
    }
}
