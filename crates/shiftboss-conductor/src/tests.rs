//! Unit tests of the Conductor importer's pieces; whole documents are tested in
//! `tests/conductor.rs`.

use super::document::is_empty;
use super::durations::{parse_duration, parse_until};
use super::expressions::{Seg, is_root_name, parse_ref, render};
use super::importer::{Importer, RefInfo};
use super::javascript::translate_js;
use super::task_def::{MAX_RETRIES, retry_policy};
use super::task_type::Type;
use serde_json::{Map, Value, json};
use shiftboss_core::expr::Expr;
use shiftboss_core::retry::RetryDecision;
use std::time::Duration;

fn no_paths(root: &str, segs: &[Seg]) -> Result<String, String> {
    Ok(render(&format!("r_{root}"), segs))
}

fn js(src: &str) -> Result<String, String> {
    translate_js(src, &mut no_paths).map(|o| o.text)
}

#[test]
fn durations_read_in_conductor_units() {
    let secs = Duration::from_secs;
    assert_eq!(parse_duration("10s"), Ok(secs(10)));
    assert_eq!(parse_duration("2 minutes"), Ok(secs(120)));
    assert_eq!(parse_duration("1d"), Ok(secs(86_400)));
    assert_eq!(parse_duration("1 days 2 hours 30 mins"), Ok(secs(86_400 + 7_200 + 1_800)));
    assert_eq!(parse_duration("1h, 5m"), Ok(secs(3_900)));
    for bad in ["", "soon", "10", "10 fortnights", "s10", "99999999999999999999d"] {
        assert!(parse_duration(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn until_dates_become_rfc3339_in_utc() {
    assert_eq!(parse_until("2030-01-31 09:00 UTC").as_deref(), Ok("2030-01-31T09:00:00Z"));
    assert_eq!(parse_until("2030-01-31 09:00 GMT").as_deref(), Ok("2030-01-31T09:00:00Z"));
    assert_eq!(parse_until("2030-01-31 09:00").as_deref(), Ok("2030-01-31T09:00:00Z"));
    assert_eq!(parse_until("2030-01-31").as_deref(), Ok("2030-01-31T00:00:00Z"));
    assert_eq!(parse_until("2030-01-31T09:00:05Z").as_deref(), Ok("2030-01-31T09:00:05Z"));
    for bad in ["2030-01-31 09:00 PST", "tomorrow", "2030-13-01", "2030-01-31 9"] {
        assert!(parse_until(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn references_parse_in_dot_and_bracket_forms() {
    let (root, segs) = parse_ref("charge.output.items[0]['unit-price']").unwrap();
    assert_eq!(root, "charge");
    assert_eq!(
        segs,
        [Seg::Name("output".into()), Seg::Name("items".into()), Seg::Index(0), Seg::Name("unit-price".into())]
    );
    assert_eq!(render(&root, &segs), r#"charge.output.items[0]["unit-price"]"#);
    assert!(Expr::parse(&render(&root, &segs)).is_ok());
    for bad in ["", "a..b", "a.b[*]", "a.b + 1", "a[?(@.x)]", "$.a"] {
        assert!(parse_ref(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn expression_names_are_what_the_expression_language_reads() {
    assert!(is_root_name("charge_2"));
    for bad in ["charge-2", "a.b", "2a", "true", "null", ""] {
        assert!(!is_root_name(bad), "{bad:?}");
    }
}

#[test]
fn javascript_of_the_trivial_kinds_translates() {
    assert_eq!(js("$.x == 'a' ? 'A' : 'B'").as_deref(), Ok(r#"r_x == "a" ? "A" : "B""#));
    assert_eq!(js("$.x === 1 && $.y !== null;").as_deref(), Ok("r_x == 1 && r_y != null"));
    assert_eq!(js("$.list.length > 2").as_deref(), Ok("len(r_list) > 2"));
    assert_eq!(js("$['x']['y'] < 2.5").as_deref(), Ok("r_x.y < 2.5"));
    assert_eq!(js("if ($.x > 1) { true; } else { false; }").as_deref(), Ok("r_x > 1"));
    assert_eq!(js("if ($.x > 1) { return false; } else { return true; }").as_deref(), Ok("! ( r_x > 1 )"));
    assert_eq!(js("$.s == \"it's\" || $.t == undefined").as_deref(), Ok(r#"r_s == "it's" || r_t == null"#));
    for bad in [
        "Math.max($.x, 1)",
        "$.x.trim()",
        "var y = 1; y",
        "$.x = 1",
        "if ($.x) { 'a'; } else { 'b'; }",
        "$.x == 0x10",
        "[1, 2]",
        "$",
        "'open",
        "",
    ] {
        assert!(js(bad).is_err(), "{bad:?} gave {:?}", js(bad));
    }
}

#[test]
fn iteration_bounds_are_found_only_in_the_plain_form() {
    let bound = |src: &str| translate_js(src, &mut no_paths).unwrap().bound.map(|b| (b.root, b.inclusive, b.n));
    assert_eq!(bound("$.loop['iteration'] < 3"), Some(("loop".into(), false, 3)));
    assert_eq!(bound("if ($.loop['iteration'] <= 7) { true; } else { false; }"), Some(("loop".into(), true, 7)));
    assert_eq!(bound("$.loop['iteration'] < 3 && $.x"), None);
    assert_eq!(bound("$.loop['count'] < 3"), None);
}

#[test]
fn templates_keep_text_and_escapes_and_rewrite_references() {
    let mut imp = Importer::new(vec![]).unwrap();
    imp.refs.insert("charge".into(), RefInfo { ty: Type::Simple, loops: vec![] });
    let t = |imp: &mut Importer, s: &str| imp.text(s, "p", &[]);
    assert_eq!(t(&mut imp, "id ${workflow.input.id}!").as_deref(), Ok("id ${task.input.id}!"));
    assert_eq!(t(&mut imp, "$${literal} and $5").as_deref(), Ok("$${literal} and $5"));
    assert_eq!(t(&mut imp, "${charge.output['a b']}").as_deref(), Ok(r#"${charge.output["a b"]}"#));
    assert!(t(&mut imp, "${charge.output").is_err());
    // What comes out parses as our template and renders as Conductor would.
    let out = t(&mut imp, "$${x} costs ${charge.output.amount}").unwrap();
    let scope: Map<String, Value> = [("charge".to_owned(), json!({"output": {"amount": 5}}))].into_iter().collect();
    assert_eq!(shiftboss_core::expr::render(&Value::String(out), &scope).unwrap(), json!("${x} costs 5"));
}

#[test]
fn retry_logic_follows_conductors_delays() {
    let plan = |count, logic, delay, scale| {
        let (p, note) = retry_policy(count, logic, delay, scale).unwrap();
        p.validate().unwrap();
        let mut out = Vec::new();
        for n in 1..=count as u32 + 2 {
            match p.after_failure(n, 0.0) {
                RetryDecision::RetryAfter(d) => out.push(d.as_secs()),
                RetryDecision::GiveUp => break,
            }
        }
        (out, note)
    };
    assert_eq!(plan(3, "FIXED", 60, 1), (vec![60, 60, 60], None));
    assert_eq!(plan(3, "LINEAR_BACKOFF", 5, 3), (vec![15, 30, 45], None));
    assert_eq!(plan(5, "EXPONENTIAL_BACKOFF", 1, 1), (vec![1, 2, 4, 8, 16], None));
    assert_eq!(plan(0, "EXPONENTIAL_BACKOFF", 1, 1), (vec![], None));
    let (delays, note) = plan(40, "EXPONENTIAL_BACKOFF", 60, 1);
    assert_eq!(delays.len(), 40);
    assert_eq!(delays.last(), Some(&(7 * 86_400)), "capped");
    assert!(note.is_some());
    assert_eq!(retry_policy(3, "SOMETIMES", 1, 1).unwrap_err().0, "retryLogic");
    assert_eq!(retry_policy(3, "LINEAR_BACKOFF", 1, 0).unwrap_err().0, "backoffScaleFactor");
    assert_eq!(retry_policy(MAX_RETRIES + 1, "FIXED", 1, 1).unwrap_err().0, "retryCount");
}

#[test]
fn empty_values_are_those_of_conductor_exports() {
    for v in [json!(null), json!(false), json!(0), json!(""), json!([]), json!({})] {
        assert!(is_empty(&v), "{v}");
    }
    for v in [json!(true), json!(1), json!("x"), json!([0]), json!({"a": null})] {
        assert!(!is_empty(&v), "{v}");
    }
}
