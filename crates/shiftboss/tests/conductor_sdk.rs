//! Conductor's APIs (issue 17) proven with Conductor's own SDKs, unchanged, against a real
//! `shiftboss serve` over loopback, on SQLite and on PostgreSQL:
//! - conductor-python (PyPI), `examples/conductor_sdk.py`: trades a key and secret for a token,
//!   registers task and workflow definitions, starts workflows that the SDK's worker runner
//!   completes, reads status and output back, searches, pauses, resumes and terminates, and sees a
//!   stale update refused;
//! - the JavaScript SDK (`@io-orkes/conductor-javascript` from npm), `examples/conductor_js/`: the
//!   same flows, and a worker process that holds a task past its response window by the SDK's
//!   lease extensions, is killed with SIGKILL, and whose task another worker completes after the
//!   supervisor takes it back; the killed worker's late update is refused.
//!
//! The Python SDK is found with `SHIFTBOSS_CONDUCTOR_PYTHON` (a Python with conductor-python),
//! else `python3`; the JavaScript one in `examples/conductor_js/node_modules` (`npm ci` there), run
//! by `node`. Without them the test is skipped with a message; under CI it fails.

mod common;

use common::{PgSchema, Serve, test_db, under_ci};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the whole SDK script may take before the test fails.
const SCRIPT_LIMIT: Duration = Duration::from_secs(240);

/// One SDK's check script and how to run it.
struct Sdk {
    program: String,
    script: PathBuf,
    /// The serve's base URL is given with this suffix (the Python SDK wants `/api`).
    api_suffix: &'static str,
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn skipped(what: &str, how: &str) -> Option<Sdk> {
    assert!(!under_ci(), "{what} ({how})");
    let test = std::thread::current().name().unwrap_or("the Conductor SDK test").to_owned();
    eprintln!(
        "\n\
         ************************************************************************\n\
         SKIPPED {test}: {what}, so Conductor's APIs were NOT tested\n\
         with this SDK. {how}.\n\
         ************************************************************************\n"
    );
    None
}

/// The Python that has the SDK, or None (after saying so) when the test is to be skipped.
fn python_sdk() -> Option<Sdk> {
    let python = std::env::var("SHIFTBOSS_CONDUCTOR_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_sdk = Command::new(&python)
        .args(["-c", "import conductor.client.automator.task_handler"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_sdk {
        return skipped(
            &format!("{python} cannot import conductor-python"),
            "`pip install conductor-python` (.ci/run does), or set SHIFTBOSS_CONDUCTOR_PYTHON",
        );
    }
    Some(Sdk { program: python, script: examples().join("conductor_sdk.py"), api_suffix: "/api" })
}

/// Node and the JavaScript SDK installed beside the script, or None (after saying so).
fn javascript_sdk() -> Option<Sdk> {
    let dir = examples().join("conductor_js");
    let has_node = Command::new("node").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if !has_node || !dir.join("node_modules/@io-orkes/conductor-javascript").exists() {
        return skipped(
            "node or Conductor's JavaScript SDK is missing",
            "`npm ci --prefix examples/conductor_js` (.ci/run does)",
        );
    }
    Some(Sdk { program: "node".into(), script: dir.join("sdk_check.mjs"), api_suffix: "" })
}

async fn the_sdk_runs_unchanged(sdk: Option<Sdk>, db: String, logs: &Path) {
    let Some(sdk) = sdk else { return };
    let mut p = Serve::new(db, "conductor-sdk").api().arg("--remote-agent").arg("greet,shout,slow").spawn(logs);
    p.wait_ready().await;
    let give_up = Instant::now() + Duration::from_secs(10);
    while p.api_url().is_none() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    let base = p.api_url().unwrap_or_else(|| panic!("serve announced no API:\n{}", p.log()));
    let secret = p.admin_token().expect("serve wrote the first admin token");

    let out_path = logs.join("sdk.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(&sdk.program)
        .arg(&sdk.script)
        .current_dir(logs)
        .env("CONDUCTOR_SERVER_URL", format!("{base}{}", sdk.api_suffix))
        .env("SHIFTBOSS_KEY_ID", shiftboss_server::bootstrap::BOOTSTRAP_NAME)
        .env("SHIFTBOSS_KEY_SECRET", &secret)
        // The SDK's worker processes log through a queue; keep it quiet but for warnings.
        .env("CONDUCTOR_LOG_LEVEL", "WARNING")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("the SDK's program starts");
    let deadline = Instant::now() + SCRIPT_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut output = String::new();
    std::fs::File::open(&out_path).unwrap().read_to_string(&mut output).unwrap();
    match status {
        Some(s) if s.success() => assert!(output.contains("all checks held"), "{output}"),
        Some(s) => panic!("the SDK script failed ({s}):\n{output}\n--- serve's log:\n{}", p.log()),
        None => panic!("the SDK script took more than {SCRIPT_LIMIT:?}:\n{output}\n--- serve's log:\n{}", p.log()),
    }
    // The secret never reaches the log, though the SDK sent it as keySecret and X-Authorization.
    assert!(!p.log().contains(&secret), "the token's secret is in serve's log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db").display().to_string();
    the_sdk_runs_unchanged(python_sdk(), db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    the_sdk_runs_unchanged(python_sdk(), schema.db_url(), dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db").display().to_string();
    the_sdk_runs_unchanged(javascript_sdk(), db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    the_sdk_runs_unchanged(javascript_sdk(), schema.db_url(), dir.path()).await;
}
