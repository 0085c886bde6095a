//! API tokens (issue 16): stored by the hash of their secret, found only while live, listed
//! without a hash, revoked by name.

use crate::Fixture;
use crate::support::*;
use shiftboss_core::token::{Scope, Scopes, hash_secret, mint_secret};
use shiftboss_store::{NewApiToken, Store, StoreError};

fn new_token(name: &str, scopes: &[Scope], secret: &str) -> NewApiToken {
    NewApiToken { name: name.into(), scopes: Scopes::of(scopes.iter().copied()), secret_hash: hash_secret(secret) }
}

pub async fn create_find_list_and_revoke<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    assert!(h.store.list_api_tokens().await.expect("list").is_empty());
    let (s1, s2) = (mint_secret(), mint_secret());
    let ci = h.store.create_api_token(new_token("ci", &[Scope::Read, Scope::Submit], &s1)).await.expect("create ci");
    assert_eq!((ci.name.as_str(), ci.created_at, ci.revoked_at), ("ci", T0, None));
    assert_eq!(ci.scopes, Scopes::of([Scope::Submit, Scope::Read]));
    h.advance(secs(1));
    let ops = h.store.create_api_token(new_token("ops@team", &[Scope::Admin], &s2)).await.expect("create ops");
    assert_ne!(ci.id, ops.id);

    // Found by the hash of the secret only: not by the secret itself, nor by another hash.
    let found = h.store.find_api_token(&hash_secret(&s1)).await.expect("find").expect("found");
    assert_eq!(found, ci);
    assert_eq!(h.store.find_api_token(&s1).await.expect("find by secret"), None, "the secret is not a key");
    assert_eq!(h.store.find_api_token(&hash_secret("sbt_guess")).await.expect("find"), None);
    assert!(found.scopes.allows(Scope::Submit) && !found.scopes.allows(Scope::Operate));

    h.advance(secs(1));
    assert!(h.store.revoke_api_token("ci").await.expect("revoke"));
    assert!(!h.store.revoke_api_token("ci").await.expect("revoke again"), "already revoked");
    assert!(!h.store.revoke_api_token("nobody").await.expect("revoke unknown"));
    assert_eq!(h.store.find_api_token(&hash_secret(&s1)).await.expect("find"), None, "a revoked token is not found");
    assert!(h.store.find_api_token(&hash_secret(&s2)).await.expect("find").is_some(), "the other still is");

    let list = h.store.list_api_tokens().await.expect("list");
    let names: Vec<_> = list.iter().map(|t| (t.name.as_str(), t.revoked_at)).collect();
    assert_eq!(names, vec![("ci", Some(T0.plus(secs(2)))), ("ops@team", None)], "oldest first, revoked included");
}

pub async fn a_live_name_is_taken_and_a_revoked_one_is_free<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let first = h.store.create_api_token(new_token("deploy", &[Scope::Operate], &mint_secret())).await.expect("create");
    let again = h.store.create_api_token(new_token("deploy", &[Scope::Read], &mint_secret())).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let secret = mint_secret();
    h.store.create_api_token(new_token("other", &[Scope::Read], &secret)).await.expect("create other");
    let same_secret = h.store.create_api_token(new_token("third", &[Scope::Read], &secret)).await;
    assert!(matches!(same_secret, Err(StoreError::Conflict(_))), "one hash, one token: {same_secret:?}");
    assert_eq!(h.store.list_api_tokens().await.expect("list").len(), 2, "refusals wrote nothing");

    assert!(h.store.revoke_api_token("deploy").await.expect("revoke"));
    let second = h.store.create_api_token(new_token("deploy", &[Scope::Read], &mint_secret())).await.expect("reuse");
    assert_ne!(second.id, first.id);
    let deploys: Vec<_> =
        h.store.list_api_tokens().await.expect("list").into_iter().filter(|t| t.name == "deploy").collect();
    assert_eq!(deploys.iter().filter(|t| t.is_live()).count(), 1);
    assert_eq!(deploys.len(), 2);
}

pub async fn bad_tokens_are_invalid_input_and_change_nothing<F: Fixture>(f: F) {
    let h = Harness::open(&f).await;
    let secret = mint_secret();
    let bad = [
        new_token("", &[Scope::Read], &secret),
        new_token("two words", &[Scope::Read], &secret),
        new_token(&"n".repeat(65), &[Scope::Read], &secret),
        new_token("caf\u{e9}", &[Scope::Read], &secret),
        new_token("no-scope", &[], &secret),
        // The secret itself where its hash belongs: refused, so that no store keeps a secret.
        NewApiToken { secret_hash: secret.clone(), ..new_token("raw", &[Scope::Read], &secret) },
        NewApiToken { secret_hash: hash_secret(&secret).to_uppercase(), ..new_token("upper", &[Scope::Read], &secret) },
    ];
    for p in bad {
        let r = h.store.create_api_token(p.clone()).await;
        assert!(matches!(r, Err(StoreError::InvalidInput(_))), "{p:?}: {r:?}");
    }
    assert!(h.store.list_api_tokens().await.expect("list").is_empty());
    let ok = h.store.create_api_token(new_token(&"n".repeat(64), &[Scope::Agent], &secret)).await.expect("64 is fine");
    assert_eq!(ok.name.len(), 64);
}
