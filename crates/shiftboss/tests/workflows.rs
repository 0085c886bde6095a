//! `shiftboss workflows` and the task commands of issue 4, as a user runs them: apply a YAML
//! definition and Conductor's, start a task, signal it, and bad files refused with their place.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shiftboss"))
        .env_remove("SHIFTBOSS_DB")
        .stdin(Stdio::null())
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn ok(db: &Path, args: &[&str]) -> String {
    let o = run(db, args);
    assert!(o.status.success(), "shiftboss {args:?} failed: {}", text(&o));
    text(&o)
}

fn show(db: &Path, task: &str) -> serde_json::Value {
    serde_json::from_str(&ok(db, &["tasks", "show", task, "--json"])).unwrap()
}

fn repo(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

const GATE: &str = r#"
name: gate
description: waits for a person, then ends by their answer
steps:
  - name: approval
    kind: wait
    signal: approve
  - name: verdict
    kind: switch
    expression: "${approval.output.ok}"
    cases:
      "true": [{name: done, kind: terminate, status: completed, output: {by: "${approval.output.by}"}}]
    default: [{name: refused, kind: terminate, status: failed}]
"#;

fn file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn a_yaml_workflow_is_applied_started_and_released_by_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let gate = file(dir.path(), "gate.yaml", GATE);
    let gate = gate.to_str().unwrap();
    assert!(ok(&db, &["workflows", "apply", gate]).contains("workflow gate v1: registered"));
    assert!(ok(&db, &["workflows", "apply", gate]).contains("unchanged"));
    assert!(ok(&db, &["workflows", "list"]).contains("waits for a person"));
    let def: serde_json::Value = serde_json::from_str(&ok(&db, &["workflows", "show", "gate"])).unwrap();
    assert_eq!(def["steps"][1]["kind"], "switch");

    assert!(ok(&db, &["tasks", "start", "gate", "--key", "g-1", "--input", "{}"]).contains("started"));
    let t = show(&db, "g-1");
    assert_eq!((t["state"].as_str(), t["steps"][0]["state"].as_str()), (Some("running"), Some("processing")));

    let wrong = run(&db, &["tasks", "signal", "g-1", "reject"]);
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(text(&wrong).contains("no wait step is waiting for \"reject\""), "{}", text(&wrong));

    let out =
        ok(&db, &["tasks", "signal", "g-1", "approve", "--data", r#"{"ok": true, "by": "ann"}"#, "--actor", "bob"]);
    assert!(out.contains("now completed"), "{out}");
    let t = show(&db, "g-1");
    assert_eq!(t["output"], serde_json::json!({"by": "ann"}));
    let ended = t["events"].as_array().unwrap().iter().find(|e| e["kind"] == "wait.ended").expect("recorded");
    assert_eq!(ended["actor"], "bob");

    ok(&db, &["tasks", "start", "gate", "--key", "g-2"]);
    ok(&db, &["tasks", "signal", "g-2", "approve", "--data", r#"{"ok": false}"#]);
    assert_eq!(show(&db, "g-2")["state"], "failed", "the default case terminates as failed");
}

#[test]
fn a_bad_definition_names_its_place_and_registers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    ok(&db, &["migrate"]);
    let cases = [
        ("misplaced.yaml", GATE.replace("signal: approve", "signal: approve\n    agent: x"), "steps[0].agent"),
        ("typo.yaml", GATE.replace("expression:", "expresion:"), "expresion"),
        ("expr.yaml", GATE.replace("${approval.output.ok}", "${approval.output.ok &&}"), "steps[1].expression"),
        ("unknown.yaml", GATE.replace("${approval.output.by}", "${aproval.output.by}"), "aproval"),
        ("syntax.yaml", "name: [unclosed".to_owned(), "line 1"),
        ("syntax.json", "{\"name\": \"x\", \"steps\": [}".to_owned(), "line 1 column"),
    ];
    for (name, body, place) in cases {
        let f = file(dir.path(), name, &body);
        let o = run(&db, &["workflows", "apply", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains(place), "{name} should name {place:?}: {}", text(&o));
    }
    assert!(ok(&db, &["workflows", "list"]).contains("(no workflows)"));
}

#[test]
fn conductor_definitions_apply_with_their_task_defs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    for f in ["order_fulfillment.json", "monthly_report.json", "legacy_approval.json"] {
        let out = ok(&db, &["workflows", "apply", &repo(&format!("examples/conductor/{f}"))]);
        assert!(out.contains(": registered"), "{f}: {out}");
    }
    let pipeline = repo("examples/conductor/image_pipeline.json");
    let defs = repo("examples/conductor/image_pipeline_taskdefs.json");
    let dry = ok(&db, &["workflows", "apply", &pipeline, "--task-defs", &defs, "--dry-run"]);
    assert!(dry.contains("nothing registered"), "{dry}");
    ok(&db, &["workflows", "apply", &pipeline, "--task-defs", &defs]);
    let list = ok(&db, &["workflows", "list"]);
    assert_eq!(list.lines().count(), 5, "a header and four workflows: {list}");
    let unsupported = file(
        dir.path(),
        "dyn.json",
        r#"{"name": "d", "tasks": [{"name": "x", "taskReferenceName": "x", "type": "KAFKA_PUBLISH"}]}"#,
    );
    let o = run(&db, &["workflows", "apply", unsupported.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("tasks[0].type"), "{}", text(&o));
}
