//! Conductor's APIs (issue 17) proven with Conductor's own Python SDK (conductor-python, from
//! PyPI), unchanged, against a real `shiftboss serve` over loopback, on SQLite and on PostgreSQL:
//! `examples/conductor_sdk.py` trades a key and secret for a token, registers task and workflow
//! definitions, starts workflows that the SDK's worker runner completes, reads status and output
//! back, searches, pauses, resumes and terminates, and sees a stale update refused.
//!
//! The SDK is found with `SHIFTBOSS_CONDUCTOR_PYTHON` (a Python with conductor-python), else
//! `python3`. Without it the test is skipped with a message; under CI it fails.

mod common;

use common::{PgSchema, Serve, test_db, under_ci};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the whole SDK script may take before the test fails.
const SCRIPT_LIMIT: Duration = Duration::from_secs(240);

/// The Python that has the SDK, or None (after saying so) when the test is to be skipped.
fn sdk_python() -> Option<String> {
    let python = std::env::var("SHIFTBOSS_CONDUCTOR_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_sdk = Command::new(&python)
        .args(["-c", "import conductor.client.automator.task_handler"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has_sdk {
        return Some(python);
    }
    assert!(!under_ci(), "conductor-python is not importable by {python} (.ci/run installs it from PyPI)");
    let test = std::thread::current().name().unwrap_or("the Conductor SDK test").to_owned();
    eprintln!(
        "\n\
         ************************************************************************\n\
         SKIPPED {test}: {python} cannot import conductor-python, so Conductor's\n\
         APIs were NOT tested with Conductor's SDK. `pip install conductor-python`,\n\
         or set SHIFTBOSS_CONDUCTOR_PYTHON to a Python that has it.\n\
         ************************************************************************\n"
    );
    None
}

async fn the_python_sdk_runs_unchanged(db: String, logs: &Path) {
    let Some(python) = sdk_python() else { return };
    let mut p = Serve::new(db, "conductor-sdk").api().arg("--remote-agent").arg("greet,shout,slow").spawn(logs);
    p.wait_ready().await;
    let give_up = Instant::now() + Duration::from_secs(10);
    while p.api_url().is_none() && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    let base = p.api_url().unwrap_or_else(|| panic!("serve announced no API:\n{}", p.log()));
    let secret = p.admin_token().expect("serve wrote the first admin token");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/conductor_sdk.py");
    let out_path = logs.join("sdk.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(&python)
        .arg(script)
        .current_dir(logs)
        .env("CONDUCTOR_SERVER_URL", format!("{base}/api"))
        .env("SHIFTBOSS_KEY_ID", shiftboss_server::bootstrap::BOOTSTRAP_NAME)
        .env("SHIFTBOSS_KEY_SECRET", &secret)
        // The SDK's worker processes log through a queue; keep it quiet but for warnings.
        .env("CONDUCTOR_LOG_LEVEL", "WARNING")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("the SDK's Python starts");
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
    the_python_sdk_runs_unchanged(db, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_on_postgres() {
    let Some(url) = test_db() else { return };
    let (schema, _store) = PgSchema::create(&url).await;
    let dir = tempfile::tempdir().unwrap();
    the_python_sdk_runs_unchanged(schema.db_url(), dir.path()).await;
}
