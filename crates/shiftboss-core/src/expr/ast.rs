//! The parsed form of an expression and its canonical text.
//!
//! Parentheses leave no trace in the tree, so printing puts back only those the precedence rules
//! need; that makes the printed form canonical and lets it parse back to an equal tree.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Lit(Lit),
    Root(String),
    /// `.name` or `["name"]`: the parser turns a bracketed string literal into a field.
    Field(Box<Node>, String),
    /// `[expr]` with anything but a string literal inside.
    Index(Box<Node>, Box<Node>),
    Unary(UnaryOp, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    Call(Func, Vec<Node>),
}

/// Literals as written; numbers are never negative here, `-1` is a negation of `1`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Len,
    Lower,
    Upper,
    Contains,
    Default,
}

// Binding strength, loosest first; each binary level binds tighter than the one before.
const PREC_COND: u8 = 1;
const PREC_UNARY: u8 = 8;
const PREC_POSTFIX: u8 = 9;
const PREC_ATOM: u8 = 10;

impl BinaryOp {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }

    fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 2,
            BinaryOp::And => 3,
            BinaryOp::Eq | BinaryOp::Ne => 4,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 5,
            BinaryOp::Add | BinaryOp::Sub => 6,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 7,
        }
    }
}

impl Func {
    pub(super) fn from_name(name: &str) -> Option<Func> {
        Some(match name {
            "len" => Func::Len,
            "lower" => Func::Lower,
            "upper" => Func::Upper,
            "contains" => Func::Contains,
            "default" => Func::Default,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Func::Len => "len",
            Func::Lower => "lower",
            Func::Upper => "upper",
            Func::Contains => "contains",
            Func::Default => "default",
        }
    }

    pub(super) fn arity(self) -> usize {
        match self {
            Func::Len | Func::Lower | Func::Upper => 1,
            Func::Contains | Func::Default => 2,
        }
    }
}

/// Whether `name` can follow a `.`; anything else is printed as `["name"]`.
pub(super) fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(is_ident_start) && bytes.all(is_ident_continue)
}

pub(super) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

pub(super) fn is_ident_continue(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

impl Node {
    fn precedence(&self) -> u8 {
        match self {
            Node::Lit(_) | Node::Root(_) | Node::Call(..) => PREC_ATOM,
            Node::Field(..) | Node::Index(..) => PREC_POSTFIX,
            Node::Unary(..) => PREC_UNARY,
            Node::Binary(op, ..) => op.precedence(),
            Node::Cond(..) => PREC_COND,
        }
    }

    /// Pushes each root name once, in order of first appearance. Recursion is bounded by the
    /// parser's depth limit.
    pub(super) fn collect_roots<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Node::Lit(_) => {}
            Node::Root(name) => {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
            Node::Field(base, _) | Node::Unary(_, base) => base.collect_roots(out),
            Node::Index(a, b) | Node::Binary(_, a, b) => {
                a.collect_roots(out);
                b.collect_roots(out);
            }
            Node::Cond(c, a, b) => {
                c.collect_roots(out);
                a.collect_roots(out);
                b.collect_roots(out);
            }
            Node::Call(_, args) => args.iter().for_each(|arg| arg.collect_roots(out)),
        }
    }

    /// Prints `self`, in parentheses if it binds looser than its position requires.
    fn write_at(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if self.precedence() < min {
            f.write_str("(")?;
            fmt::Display::fmt(self, f)?;
            f.write_str(")")
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Lit(lit) => lit.fmt(f),
            Node::Root(name) => f.write_str(name),
            Node::Field(base, name) => {
                base.write_at(f, PREC_POSTFIX)?;
                if is_identifier(name) {
                    write!(f, ".{name}")
                } else {
                    f.write_str("[")?;
                    write_string(f, name)?;
                    f.write_str("]")
                }
            }
            Node::Index(base, index) => {
                base.write_at(f, PREC_POSTFIX)?;
                f.write_str("[")?;
                index.write_at(f, PREC_COND)?;
                f.write_str("]")
            }
            Node::Unary(op, operand) => {
                f.write_str(match op {
                    UnaryOp::Not => "!",
                    UnaryOp::Neg => "-",
                })?;
                operand.write_at(f, PREC_UNARY)
            }
            Node::Binary(op, left, right) => {
                // Left-associative: an operand of the same level needs parentheses only on the right.
                left.write_at(f, op.precedence())?;
                write!(f, " {} ", op.symbol())?;
                right.write_at(f, op.precedence() + 1)
            }
            Node::Cond(cond, then, otherwise) => {
                // Right-associative: a conditional as the condition needs parentheses, elsewhere not.
                cond.write_at(f, PREC_COND + 1)?;
                f.write_str(" ? ")?;
                then.write_at(f, PREC_COND)?;
                f.write_str(" : ")?;
                otherwise.write_at(f, PREC_COND)
            }
            Node::Call(func, args) => {
                write!(f, "{}(", func.name())?;
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    arg.write_at(f, PREC_COND)?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lit::Null => f.write_str("null"),
            Lit::Bool(b) => write!(f, "{b}"),
            Lit::Int(i) => write!(f, "{i}"),
            // Debug, unlike Display, keeps a `.0` or an exponent, so the text lexes as a decimal
            // again (Display prints 1e20 as twenty-one digits, which would read back as an integer).
            Lit::Float(x) => write!(f, "{x:?}"),
            Lit::Str(s) => write_string(f, s),
        }
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}
