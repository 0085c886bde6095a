//! Translating the trivial JavaScript of SWITCH, DECISION and DO_WHILE into our expression
//! language.

use super::expressions::{Seg, render_conductor, string_literal};
use shiftboss_core::expr::Expr;

/// Gives our expression text for a JavaScript `$.root...` path, or why it cannot.
pub(super) type Resolver<'a> = dyn FnMut(&str, &[Seg]) -> Result<String, String> + 'a;

/// What [`translate_js`] gives.
#[derive(Debug)]
pub(super) struct JsOut {
    /// Our expression.
    pub(super) text: String,
    /// For `$.<root>['iteration'] < N` (or `<=`): the bound.
    pub(super) bound: Option<JsBound>,
}

#[derive(Debug)]
pub(super) struct JsBound {
    pub(super) root: String,
    pub(super) inclusive: bool,
    pub(super) n: i64,
}

#[derive(Debug, Clone, PartialEq)]
enum Js {
    /// `$.root...`
    Path(String, Vec<Seg>),
    Num(String),
    Str(String),
    Word(String),
    Punct(&'static str),
}

const JS_PUNCT: &[&str] = &[
    "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", "{", "}", "?", ":", ";", "+", "-", "*",
    "/", "%",
];

fn js_tokens(src: &str) -> Result<Vec<Js>, String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'$' {
            i += 1;
            let mut segs = Vec::new();
            loop {
                match b.get(i) {
                    Some(b'.') if b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'$') => {
                        let start = i + 1;
                        i = start;
                        while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$') {
                            i += 1;
                        }
                        segs.push(Seg::Name(src[start..i].to_owned()));
                    }
                    Some(b'[') => {
                        let close = src[i..].find(']').ok_or("`[` without `]`")? + i;
                        let inside = src[i + 1..close].trim();
                        let q = inside.chars().next();
                        if matches!(q, Some('\'' | '"')) && inside.len() >= 2 && inside.ends_with(q.unwrap_or(' ')) {
                            let name = &inside[1..inside.len() - 1];
                            if name.contains(['\\', '\'', '"']) {
                                return Err("quotes and backslashes in a field name are not supported".into());
                            }
                            segs.push(Seg::Name(name.to_owned()));
                        } else {
                            let n = inside.parse().map_err(|_| format!("`[{inside}]` is not supported"))?;
                            segs.push(Seg::Index(n));
                        }
                        i = close + 1;
                    }
                    _ => break,
                }
            }
            match segs.split_first() {
                Some((Seg::Name(root), rest)) => out.push(Js::Path(root.clone(), rest.to_vec())),
                _ => return Err("`$` must be followed by `.name` or `['name']`".into()),
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'.') {
                i += 1;
            }
            let text = &src[start..i];
            if text.parse::<f64>().is_err() || text.ends_with('.') || b.get(i).is_some_and(|c| c.is_ascii_alphabetic())
            {
                // The number and the character after it, which may be more than one byte.
                let shown = src[start..].char_indices().map(|(k, ch)| start + k + ch.len_utf8()).find(|end| *end > i);
                return Err(format!("the number `{}` is not supported", &src[start..shown.unwrap_or(src.len())]));
            }
            out.push(Js::Num(text.to_owned()));
        } else if c == b'\'' || c == b'"' {
            let mut s = String::new();
            let mut chars = src[i + 1..].char_indices();
            let mut end = None;
            while let Some((k, ch)) = chars.next() {
                match ch {
                    ch if ch == char::from(c) => {
                        end = Some(i + 1 + k + 1);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, e)| e) {
                        Some(e @ ('\\' | '\'' | '"')) => s.push(e),
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        _ => return Err("only the escapes \\\\ \\' \\\" \\n \\t are supported in strings".into()),
                    },
                    ch => s.push(ch),
                }
            }
            i = end.ok_or("a string has no closing quote")?;
            out.push(Js::Str(s));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
                i += 1;
            }
            out.push(Js::Word(src[start..i].to_owned()));
        } else {
            let p = JS_PUNCT
                .iter()
                .find(|p| src[i..].starts_with(**p))
                .ok_or_else(|| format!("`{}` is not supported", src[i..].chars().next().unwrap_or(' ')))?;
            out.push(Js::Punct(p));
            i += p.len();
        }
    }
    Ok(out)
}

/// True when the script is only `$.name` (or `$['name']`), optionally ended by `;`: the one form
/// whose translation gives what the JavaScript engine would, whatever the values (a deeper path
/// throws in JavaScript where a parent is missing, and operators coerce types).
pub(super) fn is_bare_param(src: &str) -> bool {
    matches!(js_tokens(src).as_deref(), Ok([Js::Path(_, segs)] | [Js::Path(_, segs), Js::Punct(";")]) if segs.is_empty())
}

/// Translates the trivial JavaScript of Conductor definitions into our expression language;
/// `resolve` gives our text for a `$.root...` path.
pub(super) fn translate_js(src: &str, resolve: &mut Resolver<'_>) -> Result<JsOut, String> {
    let mut toks: Vec<Js> = js_tokens(src)?
        .into_iter()
        .filter(|t| !matches!(t, Js::Punct(";")) && t != &Js::Word("return".into()))
        .collect();
    // `if (C) { true; } else { false; }` is C; the other way round, !(C).
    if toks.first() == Some(&Js::Word("if".into())) {
        let shape = |t: &[Js]| -> Option<bool> {
            match t {
                [
                    Js::Punct("{"),
                    Js::Word(a),
                    Js::Punct("}"),
                    Js::Word(e),
                    Js::Punct("{"),
                    Js::Word(b),
                    Js::Punct("}"),
                ] if e == "else" => match (a.as_str(), b.as_str()) {
                    ("true", "false") => Some(true),
                    ("false", "true") => Some(false),
                    _ => None,
                },
                _ => None,
            }
        };
        let close = matching_paren(&toks, 1);
        let found = close.and_then(|c| shape(&toks[c + 1..]).map(|keep| (c, keep)));
        let Some((close, keep)) = found else {
            return Err("only `if (condition) { true; } else { false; }` is understood of `if`".into());
        };
        let mut inner: Vec<Js> = toks[2..close].to_vec();
        if !keep {
            inner.insert(0, Js::Punct("("));
            inner.insert(0, Js::Punct("!"));
            inner.push(Js::Punct(")"));
        }
        toks = inner;
    }
    if toks.is_empty() {
        return Err("the expression is empty".into());
    }
    let bound = match toks.as_slice() {
        [Js::Path(root, segs), Js::Punct(op @ ("<" | "<=")), Js::Num(n)]
            if segs.as_slice() == [Seg::Name("iteration".into())] =>
        {
            n.parse::<i64>().ok().map(|n| JsBound { root: root.clone(), inclusive: *op == "<=", n })
        }
        _ => None,
    };
    let mut parts: Vec<String> = Vec::with_capacity(toks.len());
    for (k, t) in toks.iter().enumerate() {
        parts.push(match t {
            Js::Path(root, segs) => {
                if toks.get(k + 1) == Some(&Js::Punct("(")) {
                    return Err(format!("calling `{}` is not supported", render_conductor(root, segs)));
                }
                match segs.split_last() {
                    Some((Seg::Name(l), init)) if l == "length" => format!("len({})", resolve(root, init)?),
                    _ => resolve(root, segs)?,
                }
            }
            Js::Num(n) => n.clone(),
            Js::Str(s) => string_literal(s),
            Js::Word(w) => match w.as_str() {
                "true" | "false" | "null" => w.clone(),
                "undefined" => "null".into(),
                other => return Err(format!("`{other}` is not supported: only `$` paths, literals and operators")),
            },
            Js::Punct(p) => match *p {
                "===" => "==".into(),
                "!==" => "!=".into(),
                "{" | "}" => return Err("blocks are not supported".into()),
                p => p.to_owned(),
            },
        });
    }
    let text = parts.join(" ");
    Expr::parse(&text).map_err(|e| format!("translated to `{text}`, which does not parse: {e}"))?;
    Ok(JsOut { text, bound })
}

fn matching_paren(toks: &[Js], open: usize) -> Option<usize> {
    if toks.get(open) != Some(&Js::Punct("(")) {
        return None;
    }
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t {
            Js::Punct("(") => depth += 1,
            Js::Punct(")") => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_number_before_a_wide_character_is_refused_without_a_panic() {
        // Found by the import property test: the message cut a character in two.
        let e = super::js_tokens("$.loop['iteration'] < 3.\u{54fa0}").unwrap_err();
        assert!(e.contains("3.\u{54fa0}"), "{e}");
    }
}
