//! Reading definitions from JSON and YAML text. Both go through the same typed model, so a field
//! means the same in either; errors name the place (`steps[1].timeout`) and, for syntax errors,
//! the line and column.

use super::{DefinitionError, WorkflowDef, err};
use serde::de::DeserializeOwned;

/// The largest definition text accepted.
pub const MAX_DEFINITION_BYTES: usize = 4 * 1024 * 1024;

/// The text formats a definition may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// JSON when the text starts with `{` (after blanks), else YAML (of which JSON is a subset, but
    /// serde_json's errors are the clearer for JSON).
    pub fn sniff(text: &str) -> Format {
        if text.trim_start().starts_with('{') { Format::Json } else { Format::Yaml }
    }
}

/// Reads any record of the definition model from JSON, naming the place of an error.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, DefinitionError> {
    check_size(text)?;
    let de = &mut serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let place = if path == "." || inner.is_syntax() || inner.is_eof() {
            format!("line {} column {}", inner.line(), inner.column())
        } else {
            path
        };
        err(place, strip_position(&inner.to_string()))
    })?;
    Ok(value)
}

/// Reads any record of the definition model from YAML, naming the place of an error.
pub fn from_yaml<T: DeserializeOwned>(text: &str) -> Result<T, DefinitionError> {
    check_size(text)?;
    // YAML becomes a JSON value first: the model's types then see exactly what they see for JSON.
    let value: serde_json::Value = serde_yaml_ng::from_str(text).map_err(|e| {
        let place = e.location().map(|l| format!("line {} column {}", l.line(), l.column()));
        err(place.unwrap_or_else(|| "document".into()), e.to_string())
    })?;
    // Blank, or only comments: say so rather than name the type that null is not.
    if value.is_null() {
        return Err(err("document", "empty: it holds no definition"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        err(if path == "." { "document".into() } else { path }, e.into_inner().to_string())
    })
}

fn check_size(text: &str) -> Result<(), DefinitionError> {
    if text.len() > MAX_DEFINITION_BYTES {
        return Err(err("document", format!("larger than {MAX_DEFINITION_BYTES} bytes")));
    }
    Ok(())
}

/// serde_json appends " at line L column C"; the place is already in the error's path.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

impl WorkflowDef {
    /// Reads and checks a definition from JSON.
    pub fn from_json(text: &str) -> Result<WorkflowDef, DefinitionError> {
        let def: WorkflowDef = from_json(text)?;
        def.validate()?;
        Ok(def)
    }

    /// Reads and checks a definition from YAML.
    pub fn from_yaml(text: &str) -> Result<WorkflowDef, DefinitionError> {
        let def: WorkflowDef = from_yaml(text)?;
        def.validate()?;
        Ok(def)
    }

    /// Reads and checks a definition from JSON or YAML, whichever the text is.
    pub fn from_text(text: &str) -> Result<WorkflowDef, DefinitionError> {
        match Format::sniff(text) {
            Format::Json => WorkflowDef::from_json(text),
            Format::Yaml => WorkflowDef::from_yaml(text),
        }
    }
}
