//! What the operators do to JSON values.

use super::ast::BinaryOp;
use super::{ExprError, MAX_STRING};
use serde_json::{Number, Value};
use std::cmp::Ordering;

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(value: &Value) -> Option<Num> {
        let Value::Number(n) = value else { return None };
        // An unsigned number beyond i64 can only be used as a decimal.
        n.as_i64().map(Num::Int).or_else(|| n.as_f64().map(Num::Float))
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(x) => x,
        }
    }
}

fn float(x: f64) -> Result<Value, ExprError> {
    Number::from_f64(x).map(Value::Number).ok_or(ExprError::Overflow)
}

pub(super) fn string(s: String) -> Result<Value, ExprError> {
    if s.len() > MAX_STRING { Err(ExprError::TooLarge) } else { Ok(Value::String(s)) }
}

fn operand_error(op: BinaryOp, wanted: &str, left: &Value, right: &Value) -> ExprError {
    ExprError::Type(format!("`{}` needs {wanted}, got {} and {}", op.symbol(), type_name(left), type_name(right)))
}

/// `+ - * / %`.
pub(super) fn arithmetic(op: BinaryOp, left: &Value, right: &Value) -> Result<Value, ExprError> {
    if let (BinaryOp::Add, Value::String(a), Value::String(b)) = (op, left, right) {
        if a.len() + b.len() > MAX_STRING {
            return Err(ExprError::TooLarge);
        }
        return Ok(Value::String(format!("{a}{b}")));
    }
    let (Some(a), Some(b)) = (Num::of(left), Num::of(right)) else {
        let wanted = if op == BinaryOp::Add { "two numbers or two strings" } else { "two numbers" };
        return Err(operand_error(op, wanted, left, right));
    };
    match (a, b) {
        (Num::Int(a), Num::Int(b)) => integer(op, a, b),
        (a, b) => decimal(op, a.as_f64(), b.as_f64()),
    }
}

fn integer(op: BinaryOp, a: i64, b: i64) -> Result<Value, ExprError> {
    if b == 0 && matches!(op, BinaryOp::Div | BinaryOp::Rem) {
        return Err(ExprError::DivisionByZero);
    }
    let result = match op {
        BinaryOp::Add => a.checked_add(b),
        BinaryOp::Sub => a.checked_sub(b),
        BinaryOp::Mul => a.checked_mul(b),
        // Amounts in minor units divided by 100 should give 1.5, not 1; exact quotients stay integers.
        BinaryOp::Div => match a.checked_rem(b) {
            Some(0) => a.checked_div(b),
            Some(_) => return decimal(op, a as f64, b as f64),
            None => None,
        },
        BinaryOp::Rem => a.checked_rem(b),
        _ => return Err(ExprError::Type(format!("`{}` is not arithmetic", op.symbol()))),
    };
    result.map(Value::from).ok_or(ExprError::Overflow)
}

fn decimal(op: BinaryOp, a: f64, b: f64) -> Result<Value, ExprError> {
    if b == 0.0 && matches!(op, BinaryOp::Div | BinaryOp::Rem) {
        return Err(ExprError::DivisionByZero);
    }
    float(match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        _ => return Err(ExprError::Type(format!("`{}` is not arithmetic", op.symbol()))),
    })
}

pub(super) fn negate(value: &Value) -> Result<Value, ExprError> {
    match Num::of(value) {
        Some(Num::Int(i)) => i.checked_neg().map(Value::from).ok_or(ExprError::Overflow),
        Some(Num::Float(x)) => float(-x),
        None => Err(ExprError::Type(format!("`-` needs a number, got {}", type_name(value)))),
    }
}

/// `< <= > >=`.
pub(super) fn compare(op: BinaryOp, left: &Value, right: &Value) -> Result<bool, ExprError> {
    let ordering = match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => match (Num::of(left), Num::of(right)) {
            (Some(Num::Int(a)), Some(Num::Int(b))) => Some(a.cmp(&b)),
            (Some(a), Some(b)) => a.as_f64().partial_cmp(&b.as_f64()),
            _ => None,
        },
    };
    let Some(ordering) = ordering else {
        return Err(operand_error(op, "two numbers or two strings", left, right));
    };
    Ok(match op {
        BinaryOp::Lt => ordering == Ordering::Less,
        BinaryOp::Le => ordering != Ordering::Greater,
        BinaryOp::Gt => ordering == Ordering::Greater,
        BinaryOp::Ge => ordering != Ordering::Less,
        _ => return Err(ExprError::Type(format!("`{}` is not an ordering", op.symbol()))),
    })
}

/// Structural equality where numbers compare by value (`1 == 1.0`). Iterative, because the values
/// come from outside and may nest deeply.
pub(super) fn equal(left: &Value, right: &Value) -> bool {
    let mut pending = vec![(left, right)];
    while let Some(pair) = pending.pop() {
        let same = match pair {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Number(a), Value::Number(b)) => same_number(a, b),
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => {
                pending.extend(a.iter().zip(b));
                a.len() == b.len()
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(key, value)| match b.get(key) {
                        Some(other) => {
                            pending.push((value, other));
                            true
                        }
                        None => false,
                    })
            }
            _ => false,
        };
        if !same {
            return false;
        }
    }
    true
}

fn same_number(a: &Number, b: &Number) -> bool {
    // Exact where both fit an integer type, so large integers are not merged by rounding.
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
        return a == b;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `contains(haystack, needle)`.
pub(super) fn contains(haystack: &Value, needle: &Value) -> Result<bool, ExprError> {
    match (haystack, needle) {
        (Value::String(h), Value::String(n)) => Ok(h.contains(n.as_str())),
        (Value::Array(items), needle) => Ok(items.iter().any(|item| equal(item, needle))),
        (Value::Object(fields), Value::String(key)) => Ok(fields.contains_key(key)),
        (Value::String(_) | Value::Object(_), needle) => Err(ExprError::Type(format!(
            "`contains` looks for a string in {}, got {}",
            type_name(haystack),
            type_name(needle)
        ))),
        (haystack, _) => Err(ExprError::Type(format!(
            "`contains` looks in a string, an array or an object, got {}",
            type_name(haystack)
        ))),
    }
}

/// `len(x)`.
pub(super) fn len(value: &Value) -> Result<Value, ExprError> {
    match value {
        Value::String(s) => Ok(Value::from(s.chars().count())),
        Value::Array(items) => Ok(Value::from(items.len())),
        Value::Object(fields) => Ok(Value::from(fields.len())),
        other => Err(ExprError::Type(format!("`len` needs a string, an array or an object, got {}", type_name(other)))),
    }
}
