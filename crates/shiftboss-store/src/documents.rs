//! Documents the API keeps beside the engine's definitions (issue 17): Conductor's task
//! definitions, and the Conductor document each workflow version was registered from. They live
//! in the store, not in a process, so that every `serve` of a deployment answers the same and a
//! restart forgets nothing. A document is JSON, named within its kind; putting one again replaces it.

use crate::StoreError;
use serde_json::Value;

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// A Conductor TaskDef, named by its task type; the importer reads it when a workflow
    /// definition that uses the type is registered.
    TaskDef,
    /// The Conductor WorkflowDef a workflow version was registered from, named `<name>:<version>`,
    /// answered back as it was sent.
    WorkflowSource,
}

impl DocumentKind {
    /// The name the stores keep the kind under.
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentKind::TaskDef => "task_def",
            DocumentKind::WorkflowSource => "workflow_source",
        }
    }
}

/// The longest name a document may have.
pub const MAX_DOCUMENT_NAME_LEN: usize = 300;
/// The largest document, in bytes of its JSON text.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// The most documents one `put_documents` writes.
pub const MAX_DOCUMENTS_PER_PUT: usize = 1_000;
/// The most documents of one kind a listing returns.
pub const MAX_DOCUMENTS_LISTED: u32 = 10_000;

/// Refuses what no store should keep: an empty or overlong name, a control character in it, an
/// oversized document, too many at once.
pub fn validate_documents(docs: &[(String, Value)]) -> Result<(), StoreError> {
    if docs.len() > MAX_DOCUMENTS_PER_PUT {
        return Err(StoreError::InvalidInput(format!("at most {MAX_DOCUMENTS_PER_PUT} documents at once")));
    }
    for (name, body) in docs {
        validate_document_name(name)?;
        let len = body.to_string().len();
        if len > MAX_DOCUMENT_BYTES {
            return Err(StoreError::InvalidInput(format!(
                "document {name:?}: {len} bytes, at most {MAX_DOCUMENT_BYTES}"
            )));
        }
    }
    Ok(())
}

/// Refuses a name no store should keep.
pub fn validate_document_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty() || name.len() > MAX_DOCUMENT_NAME_LEN || name.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput(format!(
            "a document name is 1 to {MAX_DOCUMENT_NAME_LEN} bytes with no control characters"
        )));
    }
    Ok(())
}
