//! What an operator gives the command line and reads back (issue 25 item 2): every flag of
//! `tasks start` explained, JSON flags that take `@FILE` and `@-`, times in event details shown
//! like every other time, and an empty definition file called empty.

use shiftboss_core::InstanceId;
use shiftboss_core::workflow::WorkflowDef;
use shiftboss_sqlite::{OpenOptions, SqliteStore};
use shiftboss_store::{ClaimDueSteps, Store, SubmitTask};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shiftboss"));
    c.env_remove("SHIFTBOSS_DB").env_remove("SHIFTBOSS_CONFIG").stdin(Stdio::null()).arg("--db").arg(db);
    c
}

fn run(db: &Path, args: &[&str]) -> Output {
    bin(db).args(args).output().expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn ok(db: &Path, args: &[&str]) -> String {
    let o = run(db, args);
    assert!(o.status.success(), "shiftboss {args:?} failed: {}", text(&o));
    text(&o)
}

fn refused(db: &Path, args: &[&str]) -> String {
    let o = run(db, args);
    assert!(!o.status.success(), "shiftboss {args:?} should fail: {}", text(&o));
    text(&o)
}

fn show(db: &Path, task: &str) -> serde_json::Value {
    serde_json::from_str(&ok(db, &["tasks", "show", task, "--json"])).unwrap()
}

fn file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn at(p: &Path) -> String {
    format!("@{}", p.display())
}

const GATE: &str = r#"
name: gate
steps:
  - name: approval
    kind: wait
    signal: approve
  - name: done
    kind: terminate
    status: completed
    output: {by: "${approval.output.by}"}
"#;

#[test]
fn every_flag_of_tasks_start_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let help = ok(&dir.path().join("s.db"), &["tasks", "start", "--help"]);
    for flag in ["--key", "--input", "--version", "--priority", "--actor"] {
        let line =
            help.lines().find(|l| l.trim_start().starts_with(flag)).unwrap_or_else(|| panic!("no {flag} in:\n{help}"));
        let after_placeholder = line.trim_start().split_once("  ").map_or("", |(_, rest)| rest.trim());
        assert!(!after_placeholder.is_empty(), "{flag} has no help text:\n{help}");
    }
    assert!(help.contains("@FILE"), "--input says it takes @FILE:\n{help}");
}

#[test]
fn json_flags_take_a_file_or_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    ok(&db, &["workflows", "apply", file(dir.path(), "gate.yaml", GATE).to_str().unwrap()]);

    // Larger than Linux lets one command-line argument be (128 KiB).
    let blob = "x".repeat(300_000);
    let input = file(dir.path(), "input.json", &serde_json::json!({"blob": blob}).to_string());
    ok(&db, &["tasks", "start", "gate", "--key", "big", "--input", &at(&input)]);
    assert_eq!(show(&db, "big")["input"]["blob"].as_str().map(str::len), Some(300_000));

    let mut child = bin(&db)
        .args(["tasks", "start", "gate", "--key", "piped", "--input", "@-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"from": "stdin"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(show(&db, "piped")["input"]["from"], "stdin");

    let answer = file(dir.path(), "answer.json", r#"{"ok": true, "by": "ann"}"#);
    ok(&db, &["tasks", "signal", "big", "approve", "--data", &at(&answer)]);
    let big = show(&db, "big");
    assert_eq!((big["state"].as_str(), &big["output"]["by"]), (Some("completed"), &"ann".into()));

    let params = file(dir.path(), "params.json", r#"{"to": "ann@example.com"}"#);
    let out = ok(&db, &["jobs", "enqueue", "mail", "--params", &at(&params), "--key", "mail-1"]);
    assert!(out.contains("enqueued"), "{out}");

    // What goes wrong names the flag and the file.
    let empty = file(dir.path(), "empty.json", "\n");
    let e = refused(&db, &["tasks", "signal", "piped", "approve", "--data", &at(&empty)]);
    assert!(e.contains("--data") && e.contains(&format!("{} is empty", empty.display())), "{e}");
    let e = refused(&db, &["tasks", "start", "gate", "--key", "k", "--input", "@/no/such/input.json"]);
    assert!(e.contains("/no/such/input.json"), "{e}");
}

#[tokio::test]
async fn tasks_show_prints_times_in_event_details_as_rfc3339() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&db, &OpenOptions::default()).unwrap();
        let wf = WorkflowDef::from_json(r#"{"name":"one","steps":[{"name":"a","agent":"svc"}]}"#).unwrap();
        store.register_workflow(&wf).await.unwrap();
        let t = SubmitTask {
            domains: Default::default(),
            correlation_id: None,
            notify: None,
            key: "claimed".into(),
            workflow: "one".into(),
            version: None,
            input: serde_json::json!({}),
            priority: 0,
            actor: "test".into(),
        };
        store.submit_task(t).await.unwrap();
        // A claim writes a `step.claimed` event whose detail holds its complete-by.
        let p = ClaimDueSteps {
            instance: InstanceId::new("tester").unwrap(),
            limit: 1,
            agents: vec!["svc".into()],
            buckets: None,
            domains: Vec::new(),
            limits: Vec::new(),
        };
        assert_eq!(store.claim_due_work(p).await.unwrap().steps.len(), 1);
    }
    let out = ok(&db, &["tasks", "show", "claimed"]);
    let claimed = out.lines().find(|l| l.contains("step.claimed")).unwrap_or_else(|| panic!("no claim in:\n{out}"));
    let stored = show(&db, "claimed")["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "step.claimed")
        .map(|e| e["detail"]["complete_by"].as_i64().expect("--json keeps the stored milliseconds"))
        .unwrap();
    let rfc3339 = shiftboss_core::Timestamp(stored).to_string();
    assert!(claimed.contains(&format!("\"complete_by\":\"{rfc3339}\"")), "complete_by as {rfc3339}: {claimed}");
}

#[test]
fn an_empty_definition_file_is_called_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    for (name, body) in [("empty.yaml", ""), ("blank.json", "  \n\n")] {
        let f = file(dir.path(), name, body);
        let e = refused(&db, &["workflows", "apply", f.to_str().unwrap()]);
        assert!(e.contains(&format!("{}: the file is empty", f.display())), "{e}");
        assert!(!e.contains("invalid type"), "{e}");
    }
}

/// `tasks list` with the filters and cursor of the store's listing: key prefix, workflow, state,
/// `--before` for the next page; no wildcard in a prefix.
#[test]
fn tasks_list_filters_by_key_prefix_and_pages_with_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    ok(&db, &["workflows", "apply", file(dir.path(), "gate.yaml", GATE).to_str().unwrap()]);
    for key in ["order-1", "order-2", "order-3", "refund-1", "order_x"] {
        ok(&db, &["tasks", "start", "gate", "--key", key]);
    }
    let keys = |out: &str| -> Vec<String> {
        out.lines().skip(1).filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned)).collect()
    };
    let orders = ok(&db, &["tasks", "list", "--key-prefix", "order-"]);
    assert_eq!(keys(&orders), ["order-3", "order-2", "order-1"], "newest first:\n{orders}");
    let first = ok(&db, &["tasks", "list", "--key-prefix", "order-", "--limit", "2"]);
    assert_eq!(keys(&first), ["order-3", "order-2"]);
    let last_id = first.lines().nth(2).unwrap().split_whitespace().next().unwrap().to_owned();
    let next = ok(&db, &["tasks", "list", "--key-prefix", "order-", "--limit", "2", "--before", &last_id]);
    assert_eq!(keys(&next), ["order-1"]);
    assert_eq!(keys(&ok(&db, &["tasks", "list", "--key-prefix", "order_"])), ["order_x"], "no wildcard");
    let none = ok(&db, &["tasks", "list", "--workflow", "other", "--archived"]);
    assert!(none.contains("(no tasks)"), "{none}");
    assert_eq!(keys(&ok(&db, &["tasks", "list", "--state", "running", "--workflow", "gate"])).len(), 5);
}

/// `tasks bulk`: a dry run counts and changes nothing; the action lists the task it could not act
/// on and acts on the others.
#[test]
fn tasks_bulk_counts_first_then_cancels_listing_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    ok(&db, &["workflows", "apply", file(dir.path(), "gate.yaml", GATE).to_str().unwrap()]);
    for key in ["b-1", "b-2", "b-3", "keep"] {
        ok(&db, &["tasks", "start", "gate", "--key", key]);
    }
    ok(&db, &["tasks", "signal", "b-2", "approve"]);
    assert_eq!(show(&db, "b-2")["state"], "completed");

    let dry = ok(&db, &["tasks", "bulk", "cancel", "--key-prefix", "b-", "--dry-run"]);
    assert!(dry.contains("3 tasks match; nothing changed"), "{dry}");
    assert_eq!(show(&db, "b-1")["state"], "running");

    let out = ok(&db, &["tasks", "bulk", "cancel", "--key-prefix", "b-", "--reason", "bad batch", "--actor", "ann"]);
    assert!(out.contains("3 tasks matched, 2 done, 1 refused"), "{out}");
    let b2 = show(&db, "b-2")["id"].as_str().unwrap().to_owned();
    assert!(out.contains(&format!("task {b2}: ")), "the refused task is named: {out}");
    for key in ["b-1", "b-3"] {
        let v = show(&db, key);
        assert_eq!(v["state"], "cancelled", "{key}");
        let by_ann = v["events"].as_array().unwrap().iter().any(|e| e["actor"] == "ann");
        assert!(by_ann, "{key}: {v}");
    }
    assert_eq!(show(&db, "keep")["state"], "running");

    let capped = ok(&db, &["tasks", "bulk", "retry", "--key-prefix", "b-", "--limit", "1", "--dry-run"]);
    assert!(capped.contains("1 tasks match") && capped.contains("more tasks match"), "{capped}");
    let e = refused(&db, &["tasks", "bulk", "cancel", "--limit", "10001"]);
    assert!(e.contains("10001"), "{e}");
    let e = refused(&db, &["tasks", "bulk", "archive"]);
    assert!(e.contains("cancel") && e.contains("resubmit"), "the actions are named: {e}");
}

/// `serve` with a bad `[alerts]` sink stops before it starts anything: exit 2, a message naming
/// the sink and the rule, and neither the url (a chat webhook's path is its password) nor the
/// secret in what it prints.
#[test]
fn serve_refuses_a_bad_alert_sink_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let cases = [
        (
            "kind = \"slack\"\nname = \"ops\"\nurl = \"https://bot:hunter2@hooks.example.com/T0/B0\"",
            "no user or password",
        ),
        ("kind = \"webhook\"\nname = \"ops\"\nurl = \"https://hooks.example.com/x\"\nsecret = \"hunter2\"", "whsec_"),
        ("kind = \"slack\"\nname = \"ops\"\nurl = \"not a url hunter2\"", "does not parse"),
        ("kind = \"pager\"\nurl = \"https://hooks.example.com/hunter2\"", "pager"),
    ];
    for (i, (sink, rule)) in cases.iter().enumerate() {
        let config = file(dir.path(), &format!("c{i}.toml"), &format!("[[alerts.sinks]]\n{sink}\n"));
        let mut child = bin(&db)
            .arg("--config")
            .arg(&config)
            .args(["serve", "--listen", "off"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > give_up {
                child.kill().unwrap();
                panic!("serve with a bad sink ({sink}) went on running");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{sink}: {said}");
        assert!(said.contains(rule), "{sink}: {said}");
        assert!(!said.contains("hunter2") && !said.contains("hooks.example"), "{sink} echoed: {said}");
    }
}
