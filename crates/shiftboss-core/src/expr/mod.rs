//! The expression language of workflow definitions: input mappings such as
//! `{"amount": "${charge.output.amount * 100}"}`, switch expressions and loop conditions.
//!
//! Definitions come from users and the scheduler evaluates them, so the language is kept small and
//! bounded on purpose: no loops, no assignment, no user functions. Nothing a definition or the data
//! it reads holds can make parsing or evaluation panic, recurse without bound or run for long: the
//! text is at most [`MAX_LEN`] bytes, it nests at most [`MAX_DEPTH`] levels (counted explicitly by
//! the parser and again by the evaluator), and a string an expression builds is at most
//! [`MAX_STRING`] bytes.
//!
//! # Language
//!
//! - Literals: `null`, `true`, `false`, integers (`i64`), decimals (`f64`, `1.5`, `1e3`), strings in
//!   single or double quotes with the escapes `\\ \' \" \n \t`.
//! - A name (`[A-Za-z_$][A-Za-z0-9_$]*`) is a root, looked up in a [`Scope`]; an unknown root is an
//!   error. After it, any chain of `.field`, `["field"]`, `[index]` (negative counts from the end)
//!   and `[expr]` (a string selects a field, an integer an element). A missing field or element, or a
//!   field of something that is not an object, is `null`: data from outside is often partial, and a
//!   definition can say what it wants instead with `default(a, b)`.
//! - Operators, loosest first: `c ? a : b`; `||`; `&&`; `== !=`; `< <= > >=`; `+ -`; `* / %`;
//!   unary `! -`; paths; parentheses. `==` compares JSON values structurally (`1 == 1.0`). `<` and
//!   friends compare two numbers or two strings. `+` adds numbers or joins two strings. Integer
//!   arithmetic is checked; an integer mixed with a decimal gives a decimal; `/` of two integers is
//!   an integer when it divides exactly and a decimal otherwise (so `150 / 100` is `1.5`, not `1`).
//!   `&&`, `||`, `!` and the condition of `? :` take booleans only, and `&&`, `||`, `? :` and
//!   `default` evaluate only what they need.
//! - Functions: `len(x)` (characters of a string, elements of an array, fields of an object),
//!   `lower(s)`, `upper(s)`, `contains(haystack, needle)` (substring, array element or object key),
//!   `default(a, b)` (`a` unless it is `null`).
//!
//! # Templates
//!
//! A [`Template`] is a JSON value whose strings may hold `${expr}`. A string that is exactly one
//! `${expr}` becomes the expression's value with its type; any other string with `${...}` in it
//! interpolates the values as text (strings as they are, `null` as nothing, the rest as compact
//! JSON). `$${` stands for a literal `${`. Arrays and objects are rendered element by element; keys
//! are taken literally.

mod ast;
mod error;
mod eval;
mod lexer;
mod ops;
mod parser;
mod template;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

pub use error::{ExprError, TemplateError};
pub use serde_json::Value;
pub use template::{Template, render};

/// The longest expression text accepted, in bytes.
pub const MAX_LEN: usize = 4096;

/// How deep an expression (and a template's arrays and objects) may nest.
pub const MAX_DEPTH: usize = 64;

/// The longest string an expression or an interpolating template may build, in bytes.
pub const MAX_STRING: usize = 1 << 20;

/// Where an expression finds the values its root names stand for (`task`, `charge`, ...).
pub trait Scope {
    /// The value of the root `name`, or `None` when there is no such root (an error for the
    /// expression, unlike a missing field further down a path).
    fn root(&self, name: &str) -> Option<Cow<'_, Value>>;
}

/// The map's keys are the roots.
impl Scope for serde_json::Map<String, Value> {
    fn root(&self, name: &str) -> Option<Cow<'_, Value>> {
        self.get(name).map(Cow::Borrowed)
    }
}

/// A parsed expression. Its [`Display`](fmt::Display) form is canonical and parses back to an
/// equal `Expr` when it is at most [`MAX_LEN`] bytes: escapes (`\"` for a quote) can make it
/// longer than the text it was parsed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    node: ast::Node,
}

impl Expr {
    /// Parses `text` (without the `${ }` of a template).
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        parser::parse(text).map(|node| Expr { node })
    }

    /// Evaluates the expression against `scope`.
    pub fn eval(&self, scope: &dyn Scope) -> Result<Value, ExprError> {
        eval::eval(&self.node, scope).map(Cow::into_owned)
    }

    /// Evaluates a condition: the value must be a boolean, so that a typo yielding `null` or a
    /// number fails loudly instead of silently taking a branch.
    pub fn eval_bool(&self, scope: &dyn Scope) -> Result<bool, ExprError> {
        match eval::eval(&self.node, scope)?.as_ref() {
            Value::Bool(b) => Ok(*b),
            other => Err(ExprError::Type(format!("the expression must give a boolean, got {}", ops::type_name(other)))),
        }
    }

    /// The root names the expression reads, each once, in order of first appearance; lets a
    /// definition be checked against the roots it will have before it runs.
    pub fn roots(&self) -> Vec<&str> {
        let mut roots = Vec::new();
        self.node.collect_roots(&mut roots);
        roots
    }
}

impl FromStr for Expr {
    type Err = ExprError;

    fn from_str(text: &str) -> Result<Expr, ExprError> {
        Expr::parse(text)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.node, f)
    }
}
