//! What can go wrong with an expression or a template, worded for the operator who wrote it.

use super::{MAX_DEPTH, MAX_LEN, MAX_STRING};

/// Why an expression could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// The text is not an expression; `at` is a byte offset into it (into the whole string for an
    /// expression inside a template).
    #[error("syntax error at byte {at}: {problem}")]
    Syntax {
        /// The byte offset of the problem.
        at: usize,
        /// What is wrong there.
        problem: String,
    },
    /// The text is longer than `MAX_LEN` bytes.
    #[error("the expression is longer than {MAX_LEN} bytes")]
    TooLong,
    /// The expression nests deeper than `MAX_DEPTH` levels.
    #[error("nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
    /// A name the scope does not know; the decider's knows `task` and the definition's step names.
    #[error("unknown name `{0}`")]
    UnknownName(String),
    /// A call of a function the language does not have.
    #[error("unknown function `{0}`; the functions are len, lower, upper, contains and default")]
    UnknownFunction(String),
    /// A value of the wrong type for its place, such as a number where a boolean is needed.
    #[error("type error: {0}")]
    Type(String),
    /// A division or remainder by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// A result too large for a 64-bit integer or a finite decimal.
    #[error("arithmetic overflow: the result does not fit in a 64-bit integer or a finite decimal")]
    Overflow,
    /// A string result longer than `MAX_STRING` bytes.
    #[error("the resulting string would be longer than {MAX_STRING} bytes (1 MiB)")]
    TooLarge,
}

/// An expression in a template failed; `path` says where in the template value, like
/// `order.items[2]` (empty when the template is the string itself).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {error}", place(.path))]
pub struct TemplateError {
    /// Where in the template value the expression is, like `order.items[2]`; empty for the string itself.
    pub path: String,
    /// What went wrong with the expression.
    pub error: ExprError,
}

fn place(path: &str) -> String {
    if path.is_empty() { "in the template".to_owned() } else { format!("at `{path}`") }
}
