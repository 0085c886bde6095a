//! `shiftboss tokens` as an operator runs it, on SQLite and on PostgreSQL: the secret is printed
//! once and only its hash is stored; list shows live and revoked tokens; revoke, and bad input.

mod common;

use common::bin;
use shiftboss_core::token::{Scope, hash_secret};
use shiftboss_store::Store;
use std::process::Output;

fn cli(db: &str, args: &[&str]) -> Output {
    bin().arg("--db").arg(db).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The whole life of two tokens through the binary, checked against the store itself.
async fn tokens_life(db: &str, store: &dyn Store) {
    let out = cli(db, &["tokens", "create", "--name", "ci-bot", "--scopes", "submit,read"]);
    assert!(out.status.success(), "{}", text(&out));
    let secret = stdout(&out).trim().to_owned();
    assert!(secret.starts_with("sbt_") && !secret.contains(char::is_whitespace), "the secret alone: {secret:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("shown only this once"), "{stderr}");

    let token = store.find_api_token(&hash_secret(&secret)).await.unwrap().expect("stored under the secret's hash");
    assert_eq!(token.name, "ci-bot");
    assert!(token.scopes.has(Scope::Read) && token.scopes.has(Scope::Submit) && !token.scopes.allows(Scope::Operate));
    assert_eq!(store.find_api_token(&secret).await.unwrap(), None, "the secret itself is not stored");

    let out = cli(db, &["tokens", "create", "--name", "admin", "--scopes", "admin"]);
    assert!(out.status.success(), "{}", text(&out));
    let admin_secret = stdout(&out).trim().to_owned();
    assert_ne!(admin_secret, secret);

    let out = cli(db, &["tokens", "create", "--name", "ci-bot", "--scopes", "read"]);
    assert_eq!(out.status.code(), Some(2), "a live name is taken: {}", text(&out));
    assert!(text(&out).contains("ci-bot"), "{}", text(&out));

    let out = cli(db, &["tokens", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let list = stdout(&out);
    let line = list.lines().find(|l| l.starts_with("ci-bot ")).unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains("read,submit") && line.trim_end().ends_with('-'), "live, with its scopes: {line}");
    assert!(!list.contains(&secret) && !list.contains(&hash_secret(&secret)), "no secret nor hash: {list}");

    let out = cli(db, &["tokens", "revoke", "ci-bot"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(store.find_api_token(&hash_secret(&secret)).await.unwrap(), None, "revoked: found no more");
    assert!(store.find_api_token(&hash_secret(&admin_secret)).await.unwrap().is_some());
    let out = cli(db, &["tokens", "revoke", "ci-bot"]);
    assert_eq!(out.status.code(), Some(2), "nothing live to revoke: {}", text(&out));

    let out = cli(db, &["tokens", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let ci = v.as_array().unwrap().iter().find(|t| t["name"] == "ci-bot").unwrap();
    assert!(ci["revoked_at"].is_string() || ci["revoked_at"].is_number(), "revoked: {ci}");
    assert_eq!(ci["scopes"], serde_json::json!(["read", "submit"]));
    assert!(ci.get("secret_hash").is_none());
    let table = stdout(&cli(db, &["tokens", "list"]));
    let line = table.lines().find(|l| l.starts_with("ci-bot ")).unwrap();
    assert!(!line.trim_end().ends_with('-'), "the revoked column holds a time: {line}");

    // The name of a revoked token may be taken again.
    let out = cli(db, &["tokens", "create", "--name", "ci-bot", "--scopes", "read"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test]
async fn tokens_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shiftboss.db");
    let db_arg = db.to_str().unwrap();
    // Listing does not create a store.
    let out = cli(db_arg, &["tokens", "list"]);
    assert!(!out.status.success() && !db.exists(), "{}", text(&out));
    // Creating does: a token may be made before the first serve.
    let out = cli(db_arg, &["tokens", "create", "--name", "first", "--scopes", "read"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = shiftboss_sqlite::SqliteStore::open(&db, &Default::default()).unwrap();
    tokens_life(db_arg, &store).await;
}

#[tokio::test]
async fn tokens_on_postgres() {
    let Some(url) = common::test_db() else { return };
    let (schema, store) = common::PgSchema::create(&url).await;
    tokens_life(&schema.db_url(), &store).await;
}

#[test]
fn bad_names_and_scopes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shiftboss.db");
    let db = db.to_str().unwrap();
    for (args, says) in [
        (vec!["--name", "x", "--scopes", "read,root"], "root"),
        (vec!["--name", "x", "--scopes", ""], "scope"),
        (vec!["--name", "two words", "--scopes", "read"], "visible ASCII"),
        (vec!["--name", &"n".repeat(65), "--scopes", "read"], "64"),
        (vec!["--scopes", "read"], "--name"),
    ] {
        let out = cli(db, &[&["tokens", "create"][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?} should mention {says:?}: {}", text(&out));
        assert!(stdout(&out).is_empty(), "no secret printed: {args:?}");
    }
    assert!(!std::path::Path::new(db).exists(), "bad input made no store");
}
