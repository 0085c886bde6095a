//! JSON values with `${expr}` in their strings: parsed once when a definition is loaded, rendered
//! each time a step's input is built.

use super::lexer::{Lexer, Tok, syntax};
use super::{Expr, ExprError, MAX_DEPTH, MAX_LEN, MAX_STRING, Scope, TemplateError, ast};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// A parsed template value.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Nothing to evaluate (escapes already resolved).
    Literal(Value),
    /// A string that is exactly `${expr}`: the value keeps its type.
    Exact(Expr),
    /// Text and expressions joined into one string.
    Interpolated(Vec<Part>),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Expr(Expr),
}

/// One step of the way from the template's top to a value, for error messages.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_text(path: &[Step<'_>]) -> String {
    let mut text = String::new();
    for step in path {
        // Writing to a String cannot fail.
        let _ = match step {
            Step::Key(key) if ast::is_identifier(key) && text.is_empty() => write!(text, "{key}"),
            Step::Key(key) if ast::is_identifier(key) => write!(text, ".{key}"),
            Step::Key(key) => write!(text, "[{}]", Value::from(*key)),
            Step::Index(i) => write!(text, "[{i}]"),
        };
    }
    text
}

fn at_path(path: &[Step<'_>], error: ExprError) -> TemplateError {
    TemplateError { path: path_text(path), error }
}

impl Template {
    /// Parses every `${...}` in `value`; arrays and objects may nest [`MAX_DEPTH`] levels.
    pub fn parse(value: &Value) -> Result<Template, TemplateError> {
        let mut path = Vec::new();
        parse_node(value, &mut path).map(|node| Template { node })
    }

    /// The value with every expression replaced by what it gives in `scope`.
    pub fn render(&self, scope: &dyn Scope) -> Result<Value, TemplateError> {
        let mut path = Vec::new();
        render_node(&self.node, scope, &mut path)
    }

    /// The root names the template's expressions read, each once, in order of first appearance.
    pub fn roots(&self) -> Vec<&str> {
        let mut roots = Vec::new();
        let mut pending = vec![&self.node];
        // Children are pushed in reverse so that they are visited in document order.
        while let Some(node) = pending.pop() {
            match node {
                Node::Literal(_) => {}
                Node::Exact(expr) => add_roots(expr, &mut roots),
                Node::Interpolated(parts) => {
                    for part in parts {
                        if let Part::Expr(expr) = part {
                            add_roots(expr, &mut roots);
                        }
                    }
                }
                Node::Array(items) => pending.extend(items.iter().rev()),
                Node::Object(fields) => pending.extend(fields.iter().rev().map(|(_, node)| node)),
            }
        }
        roots
    }
}

fn add_roots<'a>(expr: &'a Expr, roots: &mut Vec<&'a str>) {
    for root in expr.roots() {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
}

/// Parses and renders `value` in one go, for templates used once.
pub fn render(value: &Value, scope: &dyn Scope) -> Result<Value, TemplateError> {
    Template::parse(value)?.render(scope)
}

fn parse_node<'v>(value: &'v Value, path: &mut Vec<Step<'v>>) -> Result<Node, TemplateError> {
    if path.len() >= MAX_DEPTH {
        return Err(at_path(path, ExprError::TooDeep));
    }
    match value {
        Value::String(s) => parse_string(s).map_err(|error| at_path(path, error)),
        Value::Array(items) => {
            let mut nodes = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                nodes.push(parse_node(item, path)?);
                path.pop();
            }
            Ok(Node::Array(nodes))
        }
        Value::Object(fields) => {
            let mut nodes = Vec::with_capacity(fields.len());
            for (key, item) in fields {
                path.push(Step::Key(key));
                nodes.push((key.clone(), parse_node(item, path)?));
                path.pop();
            }
            Ok(Node::Object(nodes))
        }
        scalar => Ok(Node::Literal(scalar.clone())),
    }
}

fn parse_string(s: &str) -> Result<Node, ExprError> {
    let mut parts = Vec::new();
    let mut text = String::new();
    // Everything before `done` is in `text` or `parts`. Every index used to slice sits on an
    // ASCII `$`, `{` or `}` or just after one, so on a char boundary.
    let mut done = 0;
    while let Some(offset) = s[done..].find('$') {
        let dollar = done + offset;
        let rest = &s[dollar..];
        if rest.starts_with("$${") {
            text.push_str(&s[done..dollar]);
            text.push_str("${");
            done = dollar + 3;
        } else if rest.starts_with("${") {
            text.push_str(&s[done..dollar]);
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            let start = dollar + 2;
            let end = closing_brace(s, start, dollar)?;
            let expr = Expr::parse(&s[start..end]).map_err(|error| shift(error, start))?;
            parts.push(Part::Expr(expr));
            done = end + 1;
        } else {
            text.push_str(&s[done..=dollar]);
            done = dollar + 1;
        }
    }
    text.push_str(&s[done..]);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    if parts.len() == 1 {
        match parts.pop() {
            Some(Part::Expr(expr)) => return Ok(Node::Exact(expr)),
            Some(Part::Text(text)) => return Ok(Node::Literal(Value::String(text))),
            None => {}
        }
    }
    Ok(if parts.is_empty() { Node::Literal(Value::String(String::new())) } else { Node::Interpolated(parts) })
}

/// The offset in `s` of the `}` closing the expression that starts at `start`. Found by lexing,
/// because a `}` inside a string literal does not close anything.
fn closing_brace(s: &str, start: usize, open: usize) -> Result<usize, ExprError> {
    let mut lexer = Lexer::new(&s[start..]);
    loop {
        let token = lexer.next_token().map_err(|error| shift(error, start))?;
        // Stop scanning long unclosed text early; the expression would be refused anyway.
        if token.at > MAX_LEN {
            return Err(ExprError::TooLong);
        }
        match token.tok {
            Tok::RBrace => return Ok(start + token.at),
            Tok::Eof => return Err(syntax(open, "`${` has no closing `}` (write `$${` for a literal `${`)")),
            _ => {}
        }
    }
}

/// Makes a syntax error's offset count from the start of the whole string.
fn shift(error: ExprError, by: usize) -> ExprError {
    match error {
        ExprError::Syntax { at, problem } => ExprError::Syntax { at: at + by, problem },
        other => other,
    }
}

fn render_node<'t>(node: &'t Node, scope: &dyn Scope, path: &mut Vec<Step<'t>>) -> Result<Value, TemplateError> {
    match node {
        Node::Literal(value) => Ok(value.clone()),
        Node::Exact(expr) => expr.eval(scope).map_err(|error| at_path(path, error)),
        Node::Interpolated(parts) => interpolate(parts, scope).map_err(|error| at_path(path, error)),
        Node::Array(items) => {
            let mut values = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                values.push(render_node(item, scope, path)?);
                path.pop();
            }
            Ok(Value::Array(values))
        }
        Node::Object(fields) => {
            let mut values = Map::new();
            for (key, item) in fields {
                path.push(Step::Key(key));
                values.insert(key.clone(), render_node(item, scope, path)?);
                path.pop();
            }
            Ok(Value::Object(values))
        }
    }
}

fn interpolate(parts: &[Part], scope: &dyn Scope) -> Result<Value, ExprError> {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Text(text) => push_limited(&mut out, text)?,
            Part::Expr(expr) => match expr.eval(scope)? {
                Value::String(s) => push_limited(&mut out, &s)?,
                Value::Null => {}
                other => push_limited(&mut out, &other.to_string())?,
            },
        }
    }
    Ok(Value::String(out))
}

fn push_limited(out: &mut String, piece: &str) -> Result<(), ExprError> {
    if out.len() + piece.len() > MAX_STRING {
        return Err(ExprError::TooLarge);
    }
    out.push_str(piece);
    Ok(())
}
