//! API tokens (issue 16): what a token may do (its scopes), how its secret is made, and the hash
//! the store keeps instead of the secret.
//!
//! The store never holds a secret, only `hash_secret(secret)`: a token is looked up by the hash of
//! what the caller presents, so a leaked database gives no usable token. The secret carries 256
//! random bits, so a plain SHA-256 (no salt, no slow hash) is enough: there is nothing to guess.
//!
//! `mint_secret` is the one place in this crate that draws random numbers of its own (from the
//! operating system, through getrandom): a secret that a caller could choose would be no secret.
//! Everything else here is pure; `secret_from_bytes` is the same rule over given bytes, for tests.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read tasks, steps, events, workflows and jobs.
    Read,
    /// Submit tasks and enqueue jobs.
    Submit,
    /// Operator actions on tasks, steps and jobs (cancel, retry, resubmit...), bulk ones included.
    Operate,
    /// Claim steps and report their results, as a remote agent.
    Agent,
    /// Everything, token management included: it implies every other scope.
    Admin,
}

impl Scope {
    /// Every scope, in the order they are listed.
    pub const ALL: [Scope; 5] = [Scope::Read, Scope::Submit, Scope::Operate, Scope::Agent, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Submit => "submit",
            Scope::Operate => "operate",
            Scope::Agent => "agent",
            Scope::Admin => "admin",
        }
    }

    /// The scope of this name (lower case, as `as_str` writes it).
    pub fn parse(s: &str) -> Result<Scope, TokenError> {
        Scope::ALL.into_iter().find(|x| x.as_str() == s).ok_or_else(|| TokenError::UnknownScope(s.to_owned()))
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = TokenError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::parse(s)
    }
}

/// A set of scopes. Written as a comma-separated list (`read,submit`) in the store and on the
/// command line, and as a list of names in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(into = "Vec<Scope>", from = "Vec<Scope>")]
pub struct Scopes(u8);

impl Scopes {
    /// No scope at all.
    pub const NONE: Scopes = Scopes(0);

    /// The scopes given (repeats are one).
    pub fn of(scopes: impl IntoIterator<Item = Scope>) -> Scopes {
        Scopes(scopes.into_iter().fold(0, |m, s| m | s.bit()))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the token was given exactly this scope (admin does not count here).
    pub fn has(self, s: Scope) -> bool {
        self.0 & s.bit() != 0
    }

    /// Whether the token may do what `s` guards: it has `s`, or it has admin.
    pub fn allows(self, s: Scope) -> bool {
        self.has(s) || self.has(Scope::Admin)
    }

    /// The scopes held, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.has(*s))
    }

    /// A comma-separated list (`read, submit` or `read,submit`); blanks around names are ignored,
    /// an empty list or an unknown name is an error.
    pub fn parse_list(s: &str) -> Result<Scopes, TokenError> {
        let scopes = s.split(',').map(|x| Scope::parse(x.trim())).collect::<Result<Vec<_>, _>>()?;
        let set = Scopes::of(scopes);
        if set.is_empty() {
            return Err(TokenError::NoScope);
        }
        Ok(set)
    }
}

impl fmt::Display for Scopes {
    /// `read,submit`: what `parse_list` reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(","))
    }
}

impl FromStr for Scopes {
    type Err = TokenError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scopes::parse_list(s)
    }
}

impl From<Scopes> for Vec<Scope> {
    fn from(s: Scopes) -> Vec<Scope> {
        s.iter().collect()
    }
}

impl From<Vec<Scope>> for Scopes {
    fn from(v: Vec<Scope>) -> Scopes {
        Scopes::of(v)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("unknown scope {0:?} (scopes: read, submit, operate, agent, admin)")]
    UnknownScope(String),
    #[error("a token needs at least one scope (read, submit, operate, agent, admin)")]
    NoScope,
    #[error("a token's name must be 1 to {MAX_TOKEN_NAME} visible ASCII characters (no spaces)")]
    BadName,
}

/// The longest token name accepted.
pub const MAX_TOKEN_NAME: usize = 64;

/// Refuses a name that is empty, longer than [`MAX_TOKEN_NAME`], or holds anything but visible
/// ASCII: names are typed on command lines and printed in tables and logs.
pub fn check_name(name: &str) -> Result<(), TokenError> {
    if name.is_empty() || name.len() > MAX_TOKEN_NAME || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::BadName);
    }
    Ok(())
}

/// What every secret starts with, so that one found in a log or a repository is recognised.
pub const SECRET_PREFIX: &str = "sbt_";

/// A new secret: `sbt_` and 32 random bytes from the operating system, in hex.
///
/// Panics only if the operating system has no random source to read: no secret can be made
/// safely then, and nothing a caller sends can cause it.
pub fn mint_secret() -> String {
    secret_from_bytes(&random_bytes())
}

/// 32 random bytes from the operating system, for secrets (API tokens, webhook signing keys).
///
/// Panics only if the operating system has no random source to read: no secret can be made
/// safely then, and nothing a caller sends can cause it.
pub fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut bytes) {
        panic!("the operating system's random source failed ({e}); no secret can be made");
    }
    bytes
}

/// The secret made of these bytes: [`SECRET_PREFIX`] and their hex.
pub fn secret_from_bytes(bytes: &[u8; 32]) -> String {
    format!("{SECRET_PREFIX}{}", hex(bytes))
}

/// What the store keeps of a secret: its SHA-256, in lower-case hex (64 characters).
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_read_and_write_back() {
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Ok(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert!(Scope::parse("Read").is_err(), "lower case only");
        let set = Scopes::parse_list(" submit, read ,read").unwrap();
        assert_eq!(set.to_string(), "read,submit");
        assert_eq!(Scopes::parse_list(&set.to_string()), Ok(set));
        assert_eq!(serde_json::to_string(&set).unwrap(), r#"["read","submit"]"#);
        assert_eq!(serde_json::from_str::<Scopes>(r#"["submit","read"]"#).unwrap(), set);
        assert_eq!(Scopes::parse_list(""), Err(TokenError::UnknownScope(String::new())));
        assert!(matches!(Scopes::parse_list("read,root"), Err(TokenError::UnknownScope(s)) if s == "root"));
    }

    #[test]
    fn admin_implies_every_scope_and_others_only_themselves() {
        let admin = Scopes::of([Scope::Admin]);
        assert!(Scope::ALL.iter().all(|s| admin.allows(*s)));
        assert!(!admin.has(Scope::Read), "has() is what was given");
        let read = Scopes::of([Scope::Read]);
        assert!(read.allows(Scope::Read));
        for s in [Scope::Submit, Scope::Operate, Scope::Agent, Scope::Admin] {
            assert!(!read.allows(s), "{s}");
        }
        assert!(!Scopes::NONE.allows(Scope::Read));
    }

    #[test]
    fn names_are_visible_ascii_up_to_64() {
        assert!(check_name("ci-deploy_1.bot@x").is_ok());
        assert!(check_name(&"a".repeat(64)).is_ok());
        for bad in ["", "two words", "tab\there", "é", "nul\0", &"a".repeat(65)] {
            assert_eq!(check_name(bad), Err(TokenError::BadName), "{bad:?}");
        }
    }

    #[test]
    fn secrets_are_prefixed_random_hex_and_hash_to_sha256() {
        let a = mint_secret();
        let b = mint_secret();
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == 4 + 64, "{a}");
        assert!(a[4..].bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(secret_from_bytes(&[0xab; 32]), format!("sbt_{}", "ab".repeat(32)));
        // SHA-256 of "abc" (FIPS 180-2's example).
        assert_eq!(hash_secret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(hash_secret(&a), hash_secret(&a));
        assert_ne!(hash_secret(&a), hash_secret(&b));
    }
}
