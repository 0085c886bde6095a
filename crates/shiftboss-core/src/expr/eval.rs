//! Evaluation of a parsed expression against a scope.
//!
//! Values are carried as `Cow` so that a path into a large scope value (`task.input.order.id`)
//! borrows all the way down and clones only what it ends on.

use super::ast::{BinaryOp, Func, Lit, Node, UnaryOp};
use super::{ExprError, MAX_DEPTH, Scope, ops};
use serde_json::Value;
use std::borrow::Cow;

static NULL: Value = Value::Null;

pub(super) fn eval<'s>(node: &Node, scope: &'s dyn Scope) -> Result<Cow<'s, Value>, ExprError> {
    Evaluator { scope }.eval(node, 1)
}

struct Evaluator<'s> {
    scope: &'s dyn Scope,
}

impl<'s> Evaluator<'s> {
    fn eval(&self, node: &Node, depth: usize) -> Result<Cow<'s, Value>, ExprError> {
        // The parser already bounds the tree; this keeps the evaluator safe on its own.
        if depth > MAX_DEPTH {
            return Err(ExprError::TooDeep);
        }
        let next = depth + 1;
        match node {
            Node::Lit(lit) => owned(literal(lit)),
            Node::Root(name) => self.scope.root(name).ok_or_else(|| ExprError::UnknownName(name.clone())),
            Node::Field(base, name) => Ok(field(self.eval(base, next)?, name)),
            Node::Index(base, index) => {
                let base = self.eval(base, next)?;
                let index = self.eval(index, next)?;
                element(base, &index)
            }
            Node::Unary(UnaryOp::Not, operand) => owned(Value::Bool(!self.boolean(operand, next, "`!`")?)),
            Node::Unary(UnaryOp::Neg, operand) => owned(ops::negate(&*self.eval(operand, next)?)?),
            Node::Binary(BinaryOp::And, left, right) => {
                let result = self.boolean(left, next, "`&&`")? && self.boolean(right, next, "`&&`")?;
                owned(Value::Bool(result))
            }
            Node::Binary(BinaryOp::Or, left, right) => {
                let result = self.boolean(left, next, "`||`")? || self.boolean(right, next, "`||`")?;
                owned(Value::Bool(result))
            }
            Node::Binary(op, left, right) => {
                let left = self.eval(left, next)?;
                let right = self.eval(right, next)?;
                owned(match op {
                    BinaryOp::Eq => Value::Bool(ops::equal(&left, &right)),
                    BinaryOp::Ne => Value::Bool(!ops::equal(&left, &right)),
                    BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                        Value::Bool(ops::compare(*op, &left, &right)?)
                    }
                    _ => ops::arithmetic(*op, &left, &right)?,
                })
            }
            Node::Cond(cond, then, otherwise) => {
                if self.boolean(cond, next, "the condition of `? :`")? {
                    self.eval(then, next)
                } else {
                    self.eval(otherwise, next)
                }
            }
            Node::Call(func, args) => self.call(*func, args, next),
        }
    }

    /// Evaluates an operand that must be a boolean; `what` names its user for the error.
    fn boolean(&self, node: &Node, depth: usize, what: &str) -> Result<bool, ExprError> {
        match self.eval(node, depth)?.as_ref() {
            Value::Bool(b) => Ok(*b),
            other => Err(ExprError::Type(format!("{what} needs a boolean, got {}", ops::type_name(other)))),
        }
    }

    fn call(&self, func: Func, args: &[Node], depth: usize) -> Result<Cow<'s, Value>, ExprError> {
        let value = match (func, args) {
            (Func::Default, [value, fallback]) => {
                let value = self.eval(value, depth)?;
                return if value.is_null() { self.eval(fallback, depth) } else { Ok(value) };
            }
            (Func::Len, [value]) => ops::len(&*self.eval(value, depth)?)?,
            (Func::Lower | Func::Upper, [value]) => match self.eval(value, depth)?.as_ref() {
                Value::String(s) if func == Func::Lower => ops::string(s.to_lowercase())?,
                Value::String(s) => ops::string(s.to_uppercase())?,
                other => {
                    return Err(ExprError::Type(format!(
                        "`{}` needs a string, got {}",
                        func.name(),
                        ops::type_name(other)
                    )));
                }
            },
            (Func::Contains, [haystack, needle]) => {
                let haystack = self.eval(haystack, depth)?;
                let needle = self.eval(needle, depth)?;
                Value::Bool(ops::contains(&haystack, &needle)?)
            }
            // The parser checks arity; a tree built otherwise still gets an error, not a panic.
            _ => {
                return Err(ExprError::Type(format!(
                    "`{}` takes {} arguments, got {}",
                    func.name(),
                    func.arity(),
                    args.len()
                )));
            }
        };
        Ok(Cow::Owned(value))
    }
}

fn owned<'s>(value: Value) -> Result<Cow<'s, Value>, ExprError> {
    Ok(Cow::Owned(value))
}

fn literal(lit: &Lit) -> Value {
    match lit {
        Lit::Null => Value::Null,
        Lit::Bool(b) => Value::Bool(*b),
        Lit::Int(i) => Value::from(*i),
        // The lexer only makes finite decimals, and from_f64 refuses only non-finite ones.
        Lit::Float(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        Lit::Str(s) => Value::String(s.clone()),
    }
}

/// `base.name`: `null` unless `base` is an object with that field.
fn field<'s>(base: Cow<'s, Value>, name: &str) -> Cow<'s, Value> {
    match base {
        Cow::Borrowed(Value::Object(fields)) => Cow::Borrowed(fields.get(name).unwrap_or(&NULL)),
        Cow::Owned(Value::Object(mut fields)) => Cow::Owned(fields.remove(name).unwrap_or(Value::Null)),
        _ => Cow::Borrowed(&NULL),
    }
}

/// `base[index]`: a string index is a field, an integer one an element (negative from the end).
fn element<'s>(base: Cow<'s, Value>, index: &Value) -> Result<Cow<'s, Value>, ExprError> {
    let position = match index {
        Value::String(name) => return Ok(field(base, name)),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(from_start), _) => Position::FromStart(from_start),
            (None, Some(negative)) => Position::FromEnd(negative.unsigned_abs()),
            (None, None) => return Err(ExprError::Type(format!("an index must be an integer, got {n}"))),
        },
        other => {
            return Err(ExprError::Type(format!(
                "an index must be a string or an integer, got {}",
                ops::type_name(other)
            )));
        }
    };
    Ok(match base {
        Cow::Borrowed(Value::Array(items)) => {
            Cow::Borrowed(position.resolve(items.len()).and_then(|i| items.get(i)).unwrap_or(&NULL))
        }
        Cow::Owned(Value::Array(items)) => {
            let at = position.resolve(items.len());
            Cow::Owned(at.and_then(|i| items.into_iter().nth(i)).unwrap_or(Value::Null))
        }
        _ => Cow::Borrowed(&NULL),
    })
}

#[derive(Clone, Copy)]
enum Position {
    FromStart(u64),
    /// 1 is the last element.
    FromEnd(u64),
}

impl Position {
    fn resolve(self, len: usize) -> Option<usize> {
        match self {
            Position::FromStart(i) => usize::try_from(i).ok().filter(|&i| i < len),
            Position::FromEnd(k) => usize::try_from(k).ok().and_then(|k| len.checked_sub(k)),
        }
    }
}
