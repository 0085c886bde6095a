//! Table-driven tests of the expression language: values, operators, precedence, paths, errors,
//! the canonical text.

use super::*;
use serde_json::{Map, json};

pub(super) fn scope() -> Map<String, Value> {
    let json = json!({
        "task": {"input": {
            "order_id": "A-1",
            "items": [10, 20, 30],
            "qty": 3,
            "price": 2.5,
            "key": "order_id",
            "nothing": null,
            "nested": {"k": {"v": 1}},
        }},
        "charge": {"output": {"amount": 12}},
        "n": 7,
        "s": "hello",
        "ok": true,
        "no": false,
        "nil": null,
        "arr": [1, 2, 3],
        "obj": {"a": 1, "b c": 2},
        "max": i64::MAX,
        "min": i64::MIN,
        "huge": u64::MAX,
    });
    match json {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn eval(text: &str) -> Result<Value, ExprError> {
    Expr::parse(text)?.eval(&scope())
}

fn check_values(cases: &[(&str, Value)]) {
    for (text, expected) in cases {
        assert_eq!(eval(text).as_ref(), Ok(expected), "{text}");
    }
}

#[test]
fn literals() {
    check_values(&[
        ("null", json!(null)),
        ("true", json!(true)),
        ("false", json!(false)),
        ("42", json!(42)),
        ("0", json!(0)),
        ("1.5", json!(1.5)),
        ("1e3", json!(1000.0)),
        ("2E-1", json!(0.2)),
        ("1.5e+2", json!(150.0)),
        ("9223372036854775807", json!(i64::MAX)),
        ("'single'", json!("single")),
        (r#""double""#, json!("double")),
        (r#"'a\'b\"c\\d\ne\tf'"#, json!("a'b\"c\\d\ne\tf")),
        (r#""it's""#, json!("it's")),
        ("'é ☃'", json!("é ☃")),
        ("  7\t\n", json!(7)),
    ]);
}

#[test]
fn paths_are_lenient_below_the_root() {
    check_values(&[
        ("task.input.order_id", json!("A-1")),
        ("task['input'][\"order_id\"]", json!("A-1")),
        ("task.input.nested.k.v", json!(1)),
        ("arr[0]", json!(1)),
        ("arr[2]", json!(3)),
        ("arr[-1]", json!(3)),
        ("arr[-3]", json!(1)),
        ("arr[3]", json!(null)),
        ("arr[-4]", json!(null)),
        ("arr[1 + 1]", json!(3)),
        ("arr[huge]", json!(null)),
        ("arr[min]", json!(null)),
        ("task.input[task.input.key]", json!("A-1")),
        ("obj['b c']", json!(2)),
        ("task.input.items[1]", json!(20)),
        ("task.input.missing", json!(null)),
        ("task.input.missing.deeper[3]", json!(null)),
        ("task.input.order_id.length", json!(null)),
        ("task.input.nothing.x", json!(null)),
        ("n.x", json!(null)),
        ("n[0]", json!(null)),
        ("s[0]", json!(null)),
        ("arr.x", json!(null)),
        ("arr['0']", json!(null)),
        ("obj[0]", json!(null)),
        // Paths on computed (owned) values behave the same as on borrowed ones.
        ("default(nil, obj).a", json!(1)),
        ("default(nil, arr)[-1]", json!(3)),
        ("default(nil, arr)[5]", json!(null)),
        ("default(nil, obj).zz", json!(null)),
        ("'abc'.x", json!(null)),
        ("(1).x", json!(null)),
        ("task.null", json!(null)),
    ]);
}

#[test]
fn arithmetic() {
    check_values(&[
        ("1 + 2", json!(3)),
        ("1 + 2.5", json!(3.5)),
        ("2.5 + 1", json!(3.5)),
        ("'ab' + 'cd'", json!("abcd")),
        ("s + ''", json!("hello")),
        ("7 - 10", json!(-3)),
        ("7.5 - 0.5", json!(7.0)),
        ("3 * 4", json!(12)),
        ("2.5 * 2", json!(5.0)),
        ("6 / 3", json!(2)),
        ("7 / 2", json!(3.5)),
        ("-7 / 2", json!(-3.5)),
        ("7.0 / 2", json!(3.5)),
        ("7 % 3", json!(1)),
        ("-7 % 3", json!(-1)),
        ("7.5 % 2", json!(1.5)),
        ("-n", json!(-7)),
        ("--n", json!(7)),
        ("-1.5", json!(-1.5)),
        ("charge.output.amount * 100", json!(1200)),
        ("task.input.price * task.input.qty", json!(7.5)),
        ("min + 1", json!(i64::MIN + 1)),
        ("max - 1", json!(i64::MAX - 1)),
        ("huge + 0", json!(u64::MAX as f64)),
    ]);
}

#[test]
fn comparison_and_equality() {
    check_values(&[
        ("1 < 2", json!(true)),
        ("2 < 2", json!(false)),
        ("2 <= 2", json!(true)),
        ("3 <= 2", json!(false)),
        ("3 > 2.5", json!(true)),
        ("2 > 2", json!(false)),
        ("2 >= 2", json!(true)),
        ("1 >= 2", json!(false)),
        ("'a' < 'b'", json!(true)),
        ("'b' >= 'a'", json!(true)),
        ("'B' < 'a'", json!(true)),
        ("max > min", json!(true)),
        ("huge > max", json!(true)),
        ("1 == 1.0", json!(true)),
        ("1 != 1.0", json!(false)),
        ("1 != 2", json!(true)),
        ("'x' == 'x'", json!(true)),
        ("'x' == 'y'", json!(false)),
        ("null == null", json!(true)),
        ("null == false", json!(false)),
        ("0 == false", json!(false)),
        ("1 == '1'", json!(false)),
        ("task.input.nothing == null", json!(true)),
        ("task.input.missing == null", json!(true)),
        ("arr == arr", json!(true)),
        ("arr == task.input.items", json!(false)),
        ("task == task", json!(true)),
        ("obj != task", json!(true)),
        ("huge == huge", json!(true)),
        ("huge == max", json!(false)),
    ]);
}

#[test]
fn logic_short_circuits() {
    check_values(&[
        ("true && true", json!(true)),
        ("true && false", json!(false)),
        ("false || true", json!(true)),
        ("false || false", json!(false)),
        ("!true", json!(false)),
        ("!!true", json!(true)),
        ("!no", json!(true)),
        // The right side would fail: an unknown root, a division by zero, a non-boolean.
        ("true || unknown", json!(true)),
        ("false && 1 / 0 == 1", json!(false)),
        ("false && 5", json!(false)),
        ("ok ? 1 : 2", json!(1)),
        ("no ? 1 : 2", json!(2)),
        ("true ? 1 : 1 / 0", json!(1)),
        ("false ? unknown : 'b'", json!("b")),
        ("default(1, unknown)", json!(1)),
    ]);
}

#[test]
fn precedence_and_associativity() {
    check_values(&[
        ("1 + 2 * 3", json!(7)),
        ("(1 + 2) * 3", json!(9)),
        ("10 - 2 - 3", json!(5)),
        ("100 / 10 / 5", json!(2)),
        ("2 * 3 % 4", json!(2)),
        ("7 % 4 * 2", json!(6)),
        ("-1 + 2", json!(1)),
        ("-arr[0]", json!(-1)),
        ("1 + 2 < 4", json!(true)),
        ("1 < 2 == 2 < 3", json!(true)),
        ("true || false && false", json!(true)),
        ("1 == 1 && 2 == 2", json!(true)),
        ("false || true ? 'y' : 'n'", json!("y")),
        ("true ? 1 : 2 + 10", json!(1)),
        ("false ? 1 : true ? 2 : 3", json!(2)),
        ("true ? false ? 1 : 2 : 3", json!(2)),
        ("!false && false", json!(false)),
    ]);
}

#[test]
fn functions() {
    check_values(&[
        ("len('héllo')", json!(5)),
        ("len('')", json!(0)),
        ("len(arr)", json!(3)),
        ("len(obj)", json!(2)),
        ("lower('AbC')", json!("abc")),
        ("upper('abc')", json!("ABC")),
        ("contains('hello', 'ell')", json!(true)),
        ("contains(s, 'z')", json!(false)),
        ("contains(arr, 2)", json!(true)),
        ("contains(arr, 2.0)", json!(true)),
        ("contains(arr, 5)", json!(false)),
        ("contains(arr, '2')", json!(false)),
        ("contains(obj, 'b c')", json!(true)),
        ("contains(obj, 'z')", json!(false)),
        ("default(nil, 5)", json!(5)),
        ("default(n, 5)", json!(7)),
        ("default(false, 5)", json!(false)),
        ("default(task.input.missing, 'x')", json!("x")),
        ("upper(default(task.input.missing, 'x'))", json!("X")),
    ]);
}

#[test]
fn eval_bool_wants_a_boolean() {
    let scope = scope();
    let eval_bool = |text: &str| Expr::parse(text).and_then(|e| e.eval_bool(&scope));
    assert_eq!(eval_bool("n > 1"), Ok(true));
    assert_eq!(eval_bool("no"), Ok(false));
    assert!(matches!(eval_bool("n"), Err(ExprError::Type(_))));
    assert!(matches!(eval_bool("nil"), Err(ExprError::Type(_))));
    assert!(matches!(eval_bool("'true'"), Err(ExprError::Type(_))));
}

#[test]
fn syntax_errors_say_where() {
    let cases: &[(&str, usize)] = &[
        ("", 0),
        ("1 +", 3),
        ("(1", 2),
        ("a.", 2),
        ("a.1", 2),
        ("a[1", 3),
        ("1 2", 2),
        ("'abc", 0),
        (r#""a\q""#, 2),
        ("a = 1", 2),
        ("a | b", 2),
        ("a & b", 2),
        ("a # b", 2),
        ("é", 0),
        ("a { b", 2),
        ("1abc", 0),
        ("1e", 0),
        ("99999999999999999999", 0),
        ("1e999", 0),
        ("a ? b", 5),
        ("a ? b c", 6),
        ("len(1, 2)", 0),
        ("x + contains(1)", 4),
        ("default()", 0),
        ("len(1 2)", 6),
        (")", 0),
        ("a}", 1),
        ("a..b", 2),
        ("[1]", 0),
    ];
    for (text, at) in cases {
        match Expr::parse(text) {
            Err(ExprError::Syntax { at: found, problem }) => {
                assert_eq!(found, *at, "{text}: {problem}");
                assert!(!problem.is_empty());
            }
            other => panic!("{text}: expected a syntax error, got {other:?}"),
        }
    }
}

#[test]
fn error_messages_name_the_problem() {
    let message = |text: &str| eval(text).unwrap_err().to_string();
    assert_eq!(
        message("1 +"),
        "syntax error at byte 3: expected a value, a name or `(`, found the end of the expression"
    );
    assert_eq!(message("a = 1"), "syntax error at byte 2: `=` is not an operator; compare with `==`");
    assert_eq!(message("len(1, 2)"), "syntax error at byte 0: `len` takes 1 argument, got 2");
    assert_eq!(message("nope.x"), "unknown name `nope`");
    assert!(message("exec('rm')").starts_with("unknown function `exec`"));
    assert_eq!(message("1 + 'a'"), "type error: `+` needs two numbers or two strings, got a number and a string");
    assert_eq!(message("1 / 0"), "division by zero");
    assert_eq!(message(&format!("{}1", "(".repeat(100))), "nested more than 64 levels deep");
}

fn check_errors(cases: &[&str], expected: impl Fn(&ExprError) -> bool) {
    for text in cases {
        match eval(text) {
            Err(error) if expected(&error) => {}
            other => panic!("{text}: got {other:?}"),
        }
    }
}

#[test]
fn unknown_names_and_functions() {
    check_errors(
        &["missing", "missing.x", "n + missing", "ok && missing", "len(missing)"],
        |e| matches!(e, ExprError::UnknownName(name) if name == "missing"),
    );
    check_errors(
        &["foo(1)", "1 + foo()", "foo(missing)"],
        |e| matches!(e, ExprError::UnknownFunction(f) if f == "foo"),
    );
}

#[test]
fn type_errors() {
    check_errors(
        &[
            "1 + 'a'",
            "'a' + 1",
            "1 + null",
            "arr + arr",
            "'a' - 'b'",
            "'a' * 2",
            "true / 1",
            "obj % 2",
            "1 < 'a'",
            "null < 1",
            "arr >= arr",
            "true > false",
            "!1",
            "!nil",
            "1 && true",
            "true && 1",
            "false || 1",
            "nil || true",
            "n ? 1 : 2",
            "-'a'",
            "-nil",
            "len(1)",
            "len(nil)",
            "lower(1)",
            "upper(arr)",
            "contains(1, 1)",
            "contains('a', 1)",
            "contains(obj, 1)",
            "arr[1.5]",
            "arr[true]",
            "arr[nil]",
            "arr[arr]",
        ],
        |e| matches!(e, ExprError::Type(_)),
    );
}

#[test]
fn division_by_zero() {
    check_errors(&["1 / 0", "1 % 0", "1.0 / 0", "1 / 0.0", "1.5 % 0", "n / (n - 7)", "0 / 0"], |e| {
        *e == ExprError::DivisionByZero
    });
}

#[test]
fn overflow() {
    check_errors(
        &[
            "max + 1",
            "min - 1",
            "max * 2",
            "min / -1",
            "min % -1",
            "-min",
            "1e308 * 10",
            "1e308 + 1e308",
            "-1e308 - 1e308",
            "1e300 / 1e-300",
        ],
        |e| *e == ExprError::Overflow,
    );
}

#[test]
fn strings_are_bounded() {
    let mut scope = scope();
    scope.insert("big".into(), json!("x".repeat(MAX_STRING / 2 + 1)));
    scope.insert("half".into(), json!("x".repeat(MAX_STRING / 2)));
    // `ŉ` is two bytes and upper-cases to three.
    let grows = "ŉ".repeat(MAX_STRING / 3 + 1);
    assert!(grows.len() <= MAX_STRING);
    scope.insert("grows".into(), json!(grows));
    let eval = |text: &str| Expr::parse(text).and_then(|e| e.eval(&scope));
    assert_eq!(eval("big + big"), Err(ExprError::TooLarge));
    assert_eq!(eval("upper(grows)"), Err(ExprError::TooLarge));
    assert_eq!(eval("len(half + half)"), Ok(json!(MAX_STRING)));
    assert_eq!(eval("len(lower(grows))"), Ok(json!(MAX_STRING / 3 + 1)));
}

#[test]
fn long_and_deep_input_is_refused_without_overflowing_the_stack() {
    for unit in ["(", "!", "-", "a[", "len("] {
        assert_eq!(Expr::parse(&unit.repeat(100_000)), Err(ExprError::TooLong), "{unit}");
    }
    assert_eq!(Expr::parse(&"1+".repeat(2100)), Err(ExprError::TooLong));
    let deep = [
        format!("{}1{}", "(".repeat(2000), ")".repeat(2000)),
        format!("{}true", "!".repeat(4000)),
        format!("{}1", "-".repeat(4000)),
        format!("a{}", ".b".repeat(2000)),
        format!("a{}", "[0]".repeat(1000)),
        format!("1{}", "+1".repeat(2000)),
        format!("1{}", " || 1".repeat(700)),
        "true ? 1 : ".repeat(300) + "1",
        format!("{}1{}", "len(".repeat(800), ")".repeat(800)),
        format!("{}1{}", "a[".repeat(1000), "]".repeat(1000)),
    ];
    for text in deep {
        assert!(text.len() <= MAX_LEN, "{}", text.len());
        assert_eq!(Expr::parse(&text), Err(ExprError::TooDeep), "{}...", &text[..20]);
    }
}

#[test]
fn nesting_up_to_the_limit_is_fine() {
    let depth = MAX_DEPTH - 2;
    let parens = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
    assert_eq!(eval(&parens), Ok(json!(1)));
    assert_eq!(eval(&format!("{}true", "!".repeat(depth))), Ok(json!(true)));
    assert_eq!(eval(&format!("1{}", "+1".repeat(depth))), Ok(json!(depth + 1)));
    assert_eq!(eval(&format!("task{}", ".x".repeat(depth))), Ok(json!(null)));
}

#[test]
fn the_evaluator_bounds_depth_by_itself() {
    // A tree the parser would refuse; only reachable from inside the module.
    let mut node = ast::Node::Lit(ast::Lit::Bool(true));
    for _ in 0..MAX_DEPTH {
        node = ast::Node::Unary(ast::UnaryOp::Not, Box::new(node));
    }
    assert_eq!(Expr { node }.eval(&scope()), Err(ExprError::TooDeep));
}

#[test]
fn roots_lists_each_root_once() {
    let roots = |text: &str| Expr::parse(text).map(|e| e.roots().iter().map(|r| r.to_string()).collect::<Vec<_>>());
    assert_eq!(
        roots("task.input.a + charge.output.b + task.x + len(s) + arr[n] + (ok ? x : y)"),
        Ok(vec!["task", "charge", "s", "arr", "n", "ok", "x", "y"].into_iter().map(String::from).collect())
    );
    assert_eq!(roots("1 + len('a')"), Ok(vec![]));
    assert_eq!(roots("a.b.c"), Ok(vec!["a".to_string()]));
}

#[test]
fn display_is_canonical_and_parses_back() {
    let cases = [
        ("1+2*3", "1 + 2 * 3"),
        ("(1+2)*3", "(1 + 2) * 3"),
        ("a-(b-c)", "a - (b - c)"),
        ("(a-b)-c", "a - b - c"),
        ("a || b && c", "a || b && c"),
        ("(a || b) && c", "(a || b) && c"),
        ("a ? b : c ? d : e", "a ? b : c ? d : e"),
        ("(a ? b : c) ? d : e", "(a ? b : c) ? d : e"),
        ("a ? (b ? c : d) : e", "a ? b ? c : d : e"),
        ("x + (a ? b : c)", "x + (a ? b : c)"),
        ("a['b']", "a.b"),
        ("a['b c']", r#"a["b c"]"#),
        ("a[\"null\"]", "a.null"),
        ("a['1']", r#"a["1"]"#),
        ("a[0][-1]", "a[0][-1]"),
        ("a[(b)]", "a[b]"),
        ("a[b ? 'x' : 'y']", r#"a[b ? "x" : "y"]"#),
        ("-(-1)", "--1"),
        ("!(!a)", "!!a"),
        ("(-a).b", "(-a).b"),
        ("-a.b", "-a.b"),
        ("-(a + b)", "-(a + b)"),
        ("(a + b).c", "(a + b).c"),
        ("(1).x", "1.x"),
        ("1.5", "1.5"),
        ("1e3", "1000.0"),
        ("1e20", "1e20"),
        ("0.000001", "1e-6"),
        ("'it\\'s'", r#""it's""#),
        (r#""a\"b\\c\n\t""#, r#""a\"b\\c\n\t""#),
        ("len( x )", "len(x)"),
        ("default(a,b)", "default(a, b)"),
        ("contains(default(a, b), 'x')", r#"contains(default(a, b), "x")"#),
        ("a <= b != (c >= d)", "a <= b != c >= d"),
        ("(a != b) == c", "a != b == c"),
        ("a != (b == c)", "a != (b == c)"),
        ("a % (b * c)", "a % (b * c)"),
        ("$x._y$", "$x._y$"),
    ];
    for (text, canonical) in cases {
        let expr = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(expr.to_string(), canonical, "{text}");
        assert_eq!(canonical.parse::<Expr>(), Ok(expr), "{text}");
    }
}

/// Found by the `expression` fuzz target: escapes make the canonical text longer than the text it
/// came from (`'"'` prints as `"\""`), so an expression near
/// [`MAX_LEN`] can print to a text the parser refuses as too long. The round trip is promised only
/// within the limit; definitions keep their own text, never a printed one, so nothing reparses it.
#[test]
fn the_canonical_text_round_trips_only_within_the_length_limit() {
    let text = format!("'{}'", "\"".repeat(MAX_LEN - 2));
    let expr = Expr::parse(&text).expect("a string literal within the limit parses");
    let printed = expr.to_string();
    assert!(printed.len() > MAX_LEN, "{}", printed.len());
    assert_eq!(Expr::parse(&printed), Err(ExprError::TooLong));
    let short = Expr::parse("'\"\"'").unwrap();
    assert_eq!(Expr::parse(&short.to_string()), Ok(short));
}
