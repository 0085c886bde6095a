//! Recursive descent from tokens to a tree, with two explicit bounds.
//!
//! `nesting` counts the parser's own recursion (parentheses, brackets, arguments, branches,
//! unary operators), so deep input fails before the stack does. Each node's depth is counted too,
//! because loops build deep trees without recursing (`a.b.b.b...`, `1+1+1...`), and everything
//! that walks the tree later (evaluating, printing, dropping) recurses over it.

use super::ast::{BinaryOp, Func, Lit, Node, UnaryOp};
use super::lexer::{Lexer, Tok, Token, syntax};
use super::{ExprError, MAX_DEPTH, MAX_LEN};

/// A subtree and its depth (a leaf is 1).
type Parsed = (Node, usize);

pub(super) fn parse(text: &str) -> Result<Node, ExprError> {
    if text.len() > MAX_LEN {
        return Err(ExprError::TooLong);
    }
    let mut lexer = Lexer::new(text);
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        if token.tok == Tok::Eof {
            break;
        }
        tokens.push(token);
    }
    let mut parser = Parser { tokens, pos: 0, end: text.len(), nesting: 0 };
    let (node, _) = parser.expr()?;
    match parser.peek() {
        Tok::Eof => Ok(node),
        tok => Err(syntax(parser.at(), format!("unexpected {} after a complete expression", tok.describe()))),
    }
}

static EOF: Tok = Tok::Eof;

// Binary operators by level, loosest first.
const LEVELS: [&[BinaryOp]; 6] = [
    &[BinaryOp::Or],
    &[BinaryOp::And],
    &[BinaryOp::Eq, BinaryOp::Ne],
    &[BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge],
    &[BinaryOp::Add, BinaryOp::Sub],
    &[BinaryOp::Mul, BinaryOp::Div, BinaryOp::Rem],
];

fn binary_op(tok: &Tok) -> Option<BinaryOp> {
    Some(match tok {
        Tok::OrOr => BinaryOp::Or,
        Tok::AndAnd => BinaryOp::And,
        Tok::EqEq => BinaryOp::Eq,
        Tok::NotEq => BinaryOp::Ne,
        Tok::Lt => BinaryOp::Lt,
        Tok::Le => BinaryOp::Le,
        Tok::Gt => BinaryOp::Gt,
        Tok::Ge => BinaryOp::Ge,
        Tok::Plus => BinaryOp::Add,
        Tok::Minus => BinaryOp::Sub,
        Tok::Star => BinaryOp::Mul,
        Tok::Slash => BinaryOp::Div,
        Tok::Percent => BinaryOp::Rem,
        _ => return None,
    })
}

/// The depth of a node over children at most `children` deep.
fn deeper(children: usize) -> Result<usize, ExprError> {
    let depth = children + 1;
    if depth > MAX_DEPTH { Err(ExprError::TooDeep) } else { Ok(depth) }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// Where `Eof` is.
    end: usize,
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.tokens.get(self.pos).map_or(&EOF, |token| &token.tok)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |token| token.at)
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        let found = self.peek() == tok;
        if found {
            self.bump();
        }
        found
    }

    fn expect(&mut self, tok: &Tok, wanted: &str) -> Result<(), ExprError> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(syntax(self.at(), format!("expected {wanted}, found {}", self.peek().describe())))
        }
    }

    /// Runs `inner` one level deeper in the parser's recursion.
    fn nested(&mut self, inner: impl FnOnce(&mut Self) -> Result<Parsed, ExprError>) -> Result<Parsed, ExprError> {
        if self.nesting >= MAX_DEPTH {
            return Err(ExprError::TooDeep);
        }
        self.nesting += 1;
        let parsed = inner(self);
        self.nesting -= 1;
        parsed
    }

    /// A whole expression, conditional included.
    fn expr(&mut self) -> Result<Parsed, ExprError> {
        self.nested(Self::conditional)
    }

    fn conditional(&mut self) -> Result<Parsed, ExprError> {
        let (cond, cond_depth) = self.binary(0)?;
        if !self.eat(&Tok::Question) {
            return Ok((cond, cond_depth));
        }
        let (then, then_depth) = self.expr()?;
        self.expect(&Tok::Colon, "`:` of `? :`")?;
        // Parsing the else branch as a whole expression makes `? :` right-associative.
        let (otherwise, otherwise_depth) = self.expr()?;
        let depth = deeper(cond_depth.max(then_depth).max(otherwise_depth))?;
        Ok((Node::Cond(Box::new(cond), Box::new(then), Box::new(otherwise)), depth))
    }

    fn binary(&mut self, level: usize) -> Result<Parsed, ExprError> {
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let (mut left, mut depth) = self.binary(level + 1)?;
        while let Some(op) = binary_op(self.peek()).filter(|op| ops.contains(op)) {
            self.bump();
            let (right, right_depth) = self.binary(level + 1)?;
            depth = deeper(depth.max(right_depth))?;
            left = Node::Binary(op, Box::new(left), Box::new(right));
        }
        Ok((left, depth))
    }

    fn unary(&mut self) -> Result<Parsed, ExprError> {
        let op = match self.peek() {
            Tok::Bang => UnaryOp::Not,
            Tok::Minus => UnaryOp::Neg,
            _ => return self.postfix(),
        };
        self.bump();
        let (operand, depth) = self.nested(Self::unary)?;
        Ok((Node::Unary(op, Box::new(operand)), deeper(depth)?))
    }

    fn postfix(&mut self) -> Result<Parsed, ExprError> {
        let (mut node, mut depth) = self.primary()?;
        loop {
            match self.peek() {
                Tok::Dot => {
                    self.bump();
                    let name = match self.peek() {
                        Tok::Ident(name) => name.clone(),
                        // Keywords are fine as field names: `.null` cannot mean anything else.
                        Tok::Null => "null".to_owned(),
                        Tok::True => "true".to_owned(),
                        Tok::False => "false".to_owned(),
                        tok => {
                            return Err(syntax(
                                self.at(),
                                format!("expected a field name after `.`, found {}", tok.describe()),
                            ));
                        }
                    };
                    self.bump();
                    depth = deeper(depth)?;
                    node = Node::Field(Box::new(node), name);
                }
                Tok::LBracket => {
                    self.bump();
                    let (index, index_depth) = self.expr()?;
                    self.expect(&Tok::RBracket, "`]`")?;
                    depth = deeper(depth.max(index_depth))?;
                    node = match index {
                        Node::Lit(Lit::Str(name)) => Node::Field(Box::new(node), name),
                        index => Node::Index(Box::new(node), Box::new(index)),
                    };
                }
                _ => return Ok((node, depth)),
            }
        }
    }

    fn primary(&mut self) -> Result<Parsed, ExprError> {
        let at = self.at();
        let lit = match self.peek() {
            Tok::Null => Lit::Null,
            Tok::True => Lit::Bool(true),
            Tok::False => Lit::Bool(false),
            Tok::Int(i) => Lit::Int(*i),
            Tok::Float(x) => Lit::Float(*x),
            Tok::Str(s) => Lit::Str(s.clone()),
            Tok::Ident(name) => {
                let name = name.clone();
                self.bump();
                return if self.peek() == &Tok::LParen { self.call(name, at) } else { Ok((Node::Root(name), 1)) };
            }
            Tok::LParen => {
                self.bump();
                let inner = self.expr()?;
                self.expect(&Tok::RParen, "`)`")?;
                return Ok(inner);
            }
            tok => return Err(syntax(at, format!("expected a value, a name or `(`, found {}", tok.describe()))),
        };
        self.bump();
        Ok((Node::Lit(lit), 1))
    }

    /// A call, with the parser on its `(`.
    fn call(&mut self, name: String, at: usize) -> Result<Parsed, ExprError> {
        let func = Func::from_name(&name).ok_or(ExprError::UnknownFunction(name))?;
        self.bump();
        let mut args = Vec::new();
        let mut depth = 0;
        if !self.eat(&Tok::RParen) {
            loop {
                let (arg, arg_depth) = self.expr()?;
                depth = depth.max(arg_depth);
                args.push(arg);
                if !self.eat(&Tok::Comma) {
                    self.expect(&Tok::RParen, "`,` or `)`")?;
                    break;
                }
            }
        }
        if args.len() != func.arity() {
            let plural = if func.arity() == 1 { "" } else { "s" };
            return Err(syntax(
                at,
                format!("`{}` takes {} argument{plural}, got {}", func.name(), func.arity(), args.len()),
            ));
        }
        Ok((Node::Call(func, args), deeper(depth)?))
    }
}
