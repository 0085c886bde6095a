//! Templates: exact and interpolated strings, escapes, nesting, error paths.

use super::tests::scope;
use super::*;
use serde_json::json;

fn render_one(template: Value) -> Result<Value, TemplateError> {
    render(&template, &scope())
}

#[test]
fn an_exact_expression_keeps_its_type() {
    let cases = [
        (json!("${n}"), json!(7)),
        (json!("${ n }"), json!(7)),
        (json!("${task.input.items}"), json!([10, 20, 30])),
        (json!("${obj}"), json!({"a": 1, "b c": 2})),
        (json!("${nil}"), json!(null)),
        (json!("${ok}"), json!(true)),
        (json!("${s}"), json!("hello")),
        (json!("${charge.output.amount * 100}"), json!(1200)),
        (json!("${1.5}"), json!(1.5)),
    ];
    for (template, expected) in cases {
        assert_eq!(render_one(template.clone()), Ok(expected), "{template}");
    }
}

#[test]
fn anything_else_interpolates_text() {
    let cases = [
        ("n=${n}", "n=7"),
        ("${n} ", "7 "),
        ("${s}${s}", "hellohello"),
        ("[${nil}]", "[]"),
        ("${arr}!", "[1,2,3]!"),
        (" ${obj}", r#" {"a":1,"b c":2}"#),
        ("${ok} ", "true "),
        ("${1.5}/${2}", "1.5/2"),
        ("order ${task.input.order_id} of ${len(arr)} (${s})", "order A-1 of 3 (hello)"),
        ("héllo ${s} wörld € ${n}", "héllo hello wörld € 7"),
        ("no expressions", "no expressions"),
        ("", ""),
    ];
    for (template, expected) in cases {
        assert_eq!(render_one(json!(template)), Ok(json!(expected)), "{template}");
    }
}

#[test]
fn dollar_dollar_brace_is_a_literal() {
    let cases = [
        ("$${n}", "${n}"),
        ("a $${n} ${n}", "a ${n} 7"),
        ("$${", "${"),
        ("$$${n}", "$${n}"),
        ("$${n}${n}", "${n}7"),
        ("$$", "$$"),
        ("$", "$"),
        ("$5 and ${n}", "$5 and 7"),
        ("{n}", "{n}"),
        ("}", "}"),
    ];
    for (template, expected) in cases {
        assert_eq!(render_one(json!(template)), Ok(json!(expected)), "{template}");
    }
}

#[test]
fn a_brace_inside_a_string_literal_does_not_close() {
    let cases = [
        (json!("${default(nil, '}')}"), json!("}")),
        (json!("${'a}b' + s}!"), json!("a}bhello!")),
        (json!(r#"${"}"}"#), json!("}")),
        (json!(r#"${'\'}'}"#), json!("'}")),
        (json!("${'${n}'}"), json!("${n}")),
    ];
    for (template, expected) in cases {
        assert_eq!(render_one(template.clone()), Ok(expected), "{template}");
    }
}

#[test]
fn arrays_and_objects_are_rendered_recursively_but_keys_are_not() {
    let template = json!({
        "order": "${task.input.order_id}",
        "lines": [{"qty": "${task.input.qty}", "label": "qty ${task.input.qty}"}, 5, true, null, "$${x}"],
        "k${n}": "v",
        "empty": {},
    });
    let expected = json!({
        "order": "A-1",
        "lines": [{"qty": 3, "label": "qty 3"}, 5, true, null, "${x}"],
        "k${n}": "v",
        "empty": {},
    });
    assert_eq!(render_one(template), Ok(expected));
}

#[test]
fn errors_carry_the_path() {
    let cases = [
        (json!("${1 / 0}"), "", ExprError::DivisionByZero),
        (json!({"order": {"items": [1, 2, "${1 / 0}"]}}), "order.items[2]", ExprError::DivisionByZero),
        (json!({"a b": ["${missing}"]}), r#"["a b"][0]"#, ExprError::UnknownName("missing".into())),
        (json!([{"x": "${foo()}"}]), "[0].x", ExprError::UnknownFunction("foo".into())),
        (
            json!({"a": {"\"": "x${1 +}"}}),
            r#"a["\""]"#,
            ExprError::Syntax {
                at: 6,
                problem: "expected a value, a name or `(`, found the end of the expression".into(),
            },
        ),
    ];
    for (template, path, error) in cases {
        assert_eq!(render_one(template.clone()), Err(TemplateError { path: path.into(), error }), "{template}");
    }
    let error = render_one(json!({"order": {"items": [1, 2, "${1 / 0}"]}})).unwrap_err();
    assert_eq!(error.to_string(), "at `order.items[2]`: division by zero");
    assert_eq!(render_one(json!("${1/0}")).unwrap_err().to_string(), "in the template: division by zero");
}

#[test]
fn syntax_errors_count_bytes_from_the_start_of_the_string() {
    let at = |template: &str| match Template::parse(&json!(template)) {
        Err(TemplateError { error: ExprError::Syntax { at, .. }, .. }) => at,
        other => panic!("{template}: {other:?}"),
    };
    assert_eq!(at("ab ${1 +}"), 8);
    assert_eq!(at("${n} ${1 2}"), 9);
    assert_eq!(at("é ${#}"), 5);
    // Unclosed: the offset of the `${`.
    assert_eq!(at("${n"), 0);
    assert_eq!(at("x ${n"), 2);
    assert_eq!(at("${'}'"), 0);
    assert_eq!(at("${n} ${"), 5);
    // An unterminated string literal points at its quote.
    assert_eq!(at("${'abc}"), 2);
    assert_eq!(at("${}"), 2);
}

#[test]
fn template_limits() {
    let long = format!("${{{}1}}", "1+".repeat(MAX_LEN));
    assert_eq!(Template::parse(&json!(long)).map_err(|e| e.error), Err(ExprError::TooLong));
    let unclosed = format!("${{{}", "a ".repeat(MAX_LEN));
    assert_eq!(Template::parse(&json!(unclosed)).map_err(|e| e.error), Err(ExprError::TooLong));

    let nest = |depth: usize| (0..depth).fold(json!("${n}"), |inner, _| json!([inner]));
    let expected = (0..MAX_DEPTH - 1).fold(json!(7), |inner, _| json!([inner]));
    assert_eq!(render_one(nest(MAX_DEPTH - 1)), Ok(expected));
    let error = render_one(nest(MAX_DEPTH + 10)).unwrap_err();
    assert_eq!(error.error, ExprError::TooDeep);
    assert_eq!(error.path, "[0]".repeat(MAX_DEPTH));

    let mut scope = scope();
    scope.insert("big".into(), json!("x".repeat(MAX_STRING / 2 + 1)));
    let render_big = |template: &str| render(&json!(template), &scope).map_err(|e| e.error);
    assert_eq!(render_big("${big}${big}"), Err(ExprError::TooLarge));
    assert_eq!(render_big("${len(big)}"), Ok(json!(MAX_STRING / 2 + 1)));
    assert!(render_big("${big}").is_ok());
}

#[test]
fn parsed_templates_render_again_and_list_their_roots() {
    let template = Template::parse(&json!({
        "a": "${task.input.qty} ${s}",
        "b": ["${charge.output.amount}", "${task.input.price}", "plain"],
        "c": "${n + len(arr)}",
    }))
    .unwrap();
    assert_eq!(template.roots(), ["task", "s", "charge", "n", "arr"]);
    let scope = scope();
    let first = template.render(&scope);
    assert_eq!(first, Ok(json!({"a": "3 hello", "b": [12, 2.5, "plain"], "c": 10})));
    assert_eq!(template.render(&scope), first);
    assert!(Template::parse(&json!([1, "x", null])).unwrap().roots().is_empty());
}
