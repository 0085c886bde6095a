//! What can go wrong with an expression or a template, worded for the operator who wrote it.

use super::{MAX_DEPTH, MAX_LEN, MAX_STRING};

/// Why an expression could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// The text is not an expression; `at` is a byte offset into it (into the whole string for an
    /// expression inside a template).
    #[error("syntax error at byte {at}: {problem}")]
    Syntax { at: usize, problem: String },
    #[error("the expression is longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    #[error("unknown name `{0}`")]
    UnknownName(String),
    #[error("unknown function `{0}`; the functions are len, lower, upper, contains and default")]
    UnknownFunction(String),
    #[error("type error: {0}")]
    Type(String),
    #[error("division by zero")]
    DivisionByZero,
    #[error("arithmetic overflow: the result does not fit in a 64-bit integer or a finite decimal")]
    Overflow,
    #[error("the resulting string would be longer than {MAX_STRING} bytes (1 MiB)")]
    TooLarge,
}

/// An expression in a template failed; `path` says where in the template value, like
/// `order.items[2]` (empty when the template is the string itself).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {error}", place(.path))]
pub struct TemplateError {
    pub path: String,
    pub error: ExprError,
}

fn place(path: &str) -> String {
    if path.is_empty() { "in the template".to_owned() } else { format!("at `{path}`") }
}
