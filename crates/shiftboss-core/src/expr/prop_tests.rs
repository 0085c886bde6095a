//! Properties: no input makes parsing, evaluating or rendering panic, and the canonical text of
//! any tree parses back to the same tree.

use super::ast::{BinaryOp, Func, Lit, Node, UnaryOp};
use super::*;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, json};

/// A scope full of edge values for arithmetic and paths.
fn edge_scope() -> Map<String, Value> {
    let mut scope = super::tests::scope();
    for (name, value) in [
        ("a", json!(0)),
        ("b", json!(-1)),
        ("f", json!(1e308)),
        ("g", json!(-0.0)),
        ("e", json!("")),
        ("deep", json!({"x": [[{"y": [1, null, "z"]}]]})),
    ] {
        scope.insert(name.into(), value);
    }
    scope
}

// Space-separated; a space itself is added in `tokens`.
const TOKENS: &str = "a b n s arr obj max min huge f g deep x y task $ _ . [ ] ( ) , ? : || && == != < <= > >= + - * / % ! \
    0 1 2 -1 2.5 1e3 1e308 9223372036854775807 'x' \"}\" '\\'' null true false \
    len lower upper contains default foo } { ${ $${ ' \" \\ é # = \t";

fn tokens() -> Vec<&'static str> {
    TOKENS.split(' ').filter(|t| !t.is_empty()).chain([" ", "\n"]).collect()
}

fn token_soup() -> impl Strategy<Value = String> {
    (prop::collection::vec(select(tokens()), 0..40), any::<bool>())
        .prop_map(|(tokens, spaced)| tokens.join(if spaced { " " } else { "" }))
}

fn root_name() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec!["a", "b", "n", "s", "arr", "obj", "max", "min", "huge", "f", "g", "e", "deep", "nil", "ok"])
            .prop_map(String::from),
        "[A-Za-z_$][A-Za-z0-9_$]{0,5}",
    ]
    .prop_filter("keywords are not names", |name| !matches!(name.as_str(), "null" | "true" | "false"))
}

fn literal() -> impl Strategy<Value = Lit> {
    prop_oneof![
        Just(Lit::Null),
        any::<bool>().prop_map(Lit::Bool),
        prop_oneof![0..=3i64, 0..=i64::MAX].prop_map(Lit::Int),
        // The lexer makes only finite, non-negative decimals (`-` is an operator).
        prop_oneof![Just(0.5), any::<f64>()]
            .prop_filter("finite and positive", |x| x.is_finite() && x.is_sign_positive())
            .prop_map(Lit::Float),
        "\\PC{0,6}".prop_map(Lit::Str),
        any::<String>().prop_map(Lit::Str),
    ]
}

/// Trees the parser can produce: no negative literals, no bracketed string literal (that is a
/// field), calls with the right number of arguments.
fn tree() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![literal().prop_map(Node::Lit), root_name().prop_map(Node::Root)];
    leaf.prop_recursive(6, 48, 3, |inner| {
        let binary = select(vec![
            BinaryOp::Or,
            BinaryOp::And,
            BinaryOp::Eq,
            BinaryOp::Ne,
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Rem,
        ]);
        let func = select(vec![Func::Len, Func::Lower, Func::Upper, Func::Contains, Func::Default]);
        prop_oneof![
            (inner.clone(), prop_oneof!["[a-z]{1,3}", "\\PC{0,4}"])
                .prop_map(|(base, name)| Node::Field(Box::new(base), name)),
            (inner.clone(), inner.clone()).prop_map(|(base, index)| match index {
                Node::Lit(Lit::Str(name)) => Node::Field(Box::new(base), name),
                index => Node::Index(Box::new(base), Box::new(index)),
            }),
            (any::<bool>(), inner.clone()).prop_map(|(not, operand)| Node::Unary(
                if not { UnaryOp::Not } else { UnaryOp::Neg },
                Box::new(operand)
            )),
            (binary, inner.clone(), inner.clone()).prop_map(|(op, left, right)| Node::Binary(
                op,
                Box::new(left),
                Box::new(right)
            )),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| Node::Cond(
                Box::new(c),
                Box::new(a),
                Box::new(b)
            )),
            (func, prop::collection::vec(inner, 2)).prop_map(|(func, mut args)| {
                args.truncate(func.arity());
                Node::Call(func, args)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_string(text in any::<String>()) {
        let _ = Expr::parse(&text);
    }

    #[test]
    fn templates_never_panic_on_any_string(text in any::<String>()) {
        let scope = edge_scope();
        if let Ok(template) = Template::parse(&Value::String(text)) {
            let _ = template.render(&scope);
        }
    }

    #[test]
    fn token_soup_parses_renders_and_evaluates_without_panic(text in token_soup()) {
        let scope = edge_scope();
        if let Ok(expr) = Expr::parse(&text) {
            let _ = expr.eval(&scope);
            let _ = expr.eval_bool(&scope);
            // Whatever parses prints to a fixed point that parses back to the same tree.
            let canonical = expr.to_string();
            prop_assert_eq!(Expr::parse(&canonical), Ok(expr.clone()), "{} -> {}", text, canonical);
            prop_assert_eq!(Expr::parse(&canonical).map(|e| e.to_string()), Ok(canonical));
        }
        for template in [format!("${{{text}}}"), format!("x ${{{text}}} ${{n}}"), text.clone()] {
            if let Ok(template) = Template::parse(&Value::String(template)) {
                let _ = template.render(&scope);
            }
        }
    }

    #[test]
    fn display_parses_back_to_the_same_tree(node in tree()) {
        let expr = Expr { node };
        let text = expr.to_string();
        prop_assume!(text.len() <= MAX_LEN);
        prop_assert_eq!(Expr::parse(&text), Ok(expr), "{}", text);
    }

    #[test]
    fn eval_never_panics_and_an_exact_template_agrees(node in tree()) {
        let scope = edge_scope();
        let expr = Expr { node };
        let value = expr.eval(&scope);
        let text = expr.to_string();
        prop_assume!(text.len() <= MAX_LEN);
        let rendered = render(&Value::String(format!("${{{text}}}")), &scope).map_err(|e| e.error);
        prop_assert_eq!(rendered, value, "{}", text);
    }
}
