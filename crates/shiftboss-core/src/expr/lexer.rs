//! Splits expression text into tokens, one at a time.
//!
//! Templates use the lexer on its own to find the `}` that closes a `${`: a `}` inside a string
//! literal (`${default(x, '}')}`) is part of a string token, so it cannot end the expression.

use super::ExprError;
use super::ast::{is_ident_continue, is_ident_start};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Null,
    True,
    False,
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    Dot,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Question,
    Colon,
    OrOr,
    AndAnd,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
    /// Not part of the language; ends an expression inside a template.
    RBrace,
    Eof,
}

impl Tok {
    /// How an error message names the token.
    pub(super) fn describe(&self) -> String {
        let symbol = match self {
            Tok::Null => "`null`",
            Tok::True => "`true`",
            Tok::False => "`false`",
            Tok::Int(_) | Tok::Float(_) => "a number",
            Tok::Str(_) => "a string",
            Tok::Ident(name) => return format!("the name `{name}`"),
            Tok::Dot => "`.`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::Comma => "`,`",
            Tok::Question => "`?`",
            Tok::Colon => "`:`",
            Tok::OrOr => "`||`",
            Tok::AndAnd => "`&&`",
            Tok::EqEq => "`==`",
            Tok::NotEq => "`!=`",
            Tok::Lt => "`<`",
            Tok::Le => "`<=`",
            Tok::Gt => "`>`",
            Tok::Ge => "`>=`",
            Tok::Plus => "`+`",
            Tok::Minus => "`-`",
            Tok::Star => "`*`",
            Tok::Slash => "`/`",
            Tok::Percent => "`%`",
            Tok::Bang => "`!`",
            Tok::RBrace => "`}`",
            Tok::Eof => "the end of the expression",
        };
        symbol.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub tok: Tok,
    /// Byte offset of the token's first byte.
    pub at: usize,
}

pub(super) fn syntax(at: usize, problem: impl Into<String>) -> ExprError {
    ExprError::Syntax { at, problem: problem.into() }
}

pub(super) struct Lexer<'a> {
    src: &'a str,
    // Always on a char boundary: only ASCII bytes and whole chars are stepped over.
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    fn byte(&self, at: usize) -> Option<u8> {
        self.src.as_bytes().get(at).copied()
    }

    /// The next token; after the end, `Eof` again and again.
    pub(super) fn next_token(&mut self) -> Result<Token, ExprError> {
        while self.byte(self.pos).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
        let at = self.pos;
        let Some(b) = self.byte(at) else {
            return Ok(Token { tok: Tok::Eof, at });
        };
        let tok = match b {
            b'0'..=b'9' => self.number()?,
            b'"' | b'\'' => self.string(b)?,
            b if is_ident_start(b) => self.identifier(),
            _ => self.punctuation(b)?,
        };
        Ok(Token { tok, at })
    }

    fn digits(&mut self) {
        while self.byte(self.pos).is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn number(&mut self) -> Result<Tok, ExprError> {
        let start = self.pos;
        self.digits();
        let mut decimal = false;
        // `1.x` is a field of 1, not a malformed decimal, so a `.` belongs to the number only
        // when a digit follows.
        if self.byte(self.pos) == Some(b'.') && self.byte(self.pos + 1).is_some_and(|b| b.is_ascii_digit()) {
            decimal = true;
            self.pos += 1;
            self.digits();
        }
        if matches!(self.byte(self.pos), Some(b'e' | b'E')) {
            let mut next = self.pos + 1;
            if matches!(self.byte(next), Some(b'+' | b'-')) {
                next += 1;
            }
            if self.byte(next).is_some_and(|b| b.is_ascii_digit()) {
                decimal = true;
                self.pos = next;
                self.digits();
            }
        }
        if self.byte(self.pos).is_some_and(is_ident_continue) {
            return Err(syntax(start, "malformed number: letters run into it"));
        }
        let text = &self.src[start..self.pos];
        if decimal {
            match text.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(Tok::Float(x)),
                _ => Err(syntax(start, format!("the number {text} is out of range"))),
            }
        } else {
            text.parse::<i64>().map(Tok::Int).map_err(|_| {
                syntax(start, format!("the integer {text} is out of range (at most {}); write a decimal", i64::MAX))
            })
        }
    }

    fn string(&mut self, quote: u8) -> Result<Tok, ExprError> {
        let start = self.pos;
        let body = start + 1;
        let mut out = String::new();
        let mut chars = self.src[body..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == char::from(quote) => {
                    self.pos = body + i + 1;
                    return Ok(Tok::Str(out));
                }
                '\\' => match chars.next() {
                    Some((_, '\\')) => out.push('\\'),
                    Some((_, '\'')) => out.push('\''),
                    Some((_, '"')) => out.push('"'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, other)) => {
                        return Err(syntax(
                            body + i,
                            format!("unknown escape `\\{other}` in a string; the escapes are \\\\ \\' \\\" \\n \\t"),
                        ));
                    }
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err(syntax(start, "unterminated string: the closing quote is missing"))
    }

    fn identifier(&mut self) -> Tok {
        let start = self.pos;
        self.pos += 1;
        while self.byte(self.pos).is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        match &self.src[start..self.pos] {
            "null" => Tok::Null,
            "true" => Tok::True,
            "false" => Tok::False,
            name => Tok::Ident(name.to_owned()),
        }
    }

    fn punctuation(&mut self, b: u8) -> Result<Tok, ExprError> {
        let at = self.pos;
        let next = self.byte(at + 1);
        let (tok, width) = match (b, next) {
            (b'|', Some(b'|')) => (Tok::OrOr, 2),
            (b'&', Some(b'&')) => (Tok::AndAnd, 2),
            (b'=', Some(b'=')) => (Tok::EqEq, 2),
            (b'!', Some(b'=')) => (Tok::NotEq, 2),
            (b'<', Some(b'=')) => (Tok::Le, 2),
            (b'>', Some(b'=')) => (Tok::Ge, 2),
            (b'.', _) => (Tok::Dot, 1),
            (b'[', _) => (Tok::LBracket, 1),
            (b']', _) => (Tok::RBracket, 1),
            (b'(', _) => (Tok::LParen, 1),
            (b')', _) => (Tok::RParen, 1),
            (b',', _) => (Tok::Comma, 1),
            (b'?', _) => (Tok::Question, 1),
            (b':', _) => (Tok::Colon, 1),
            (b'<', _) => (Tok::Lt, 1),
            (b'>', _) => (Tok::Gt, 1),
            (b'+', _) => (Tok::Plus, 1),
            (b'-', _) => (Tok::Minus, 1),
            (b'*', _) => (Tok::Star, 1),
            (b'/', _) => (Tok::Slash, 1),
            (b'%', _) => (Tok::Percent, 1),
            (b'!', _) => (Tok::Bang, 1),
            (b'}', _) => (Tok::RBrace, 1),
            (b'=', _) => return Err(syntax(at, "`=` is not an operator; compare with `==`")),
            (b'|', _) => return Err(syntax(at, "`|` is not an operator; use `||` for \"or\"")),
            (b'&', _) => return Err(syntax(at, "`&` is not an operator; use `&&` for \"and\"")),
            _ => {
                let c = self.src[at..].chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
                return Err(syntax(at, format!("unexpected character `{}`", c.escape_debug())));
            }
        };
        self.pos += width;
        Ok(tok)
    }
}
