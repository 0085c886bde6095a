//! Secrets: `${secret.NAME}` in a header value or a field of a step's config, resolved at call time.
//!
//! The definition (and so the stored config, the events and every API) holds only the reference;
//! the value is read when a request is built, from the environment (`SHIFTBOSS_SECRET_NAME`) or
//! from the file `NAME` in the secrets directory, and lives only in that request. The callers keep
//! the values they resolved ([`Resolved`]) so that they can scrub them from anything they return
//! (a response echoing a header, an error text), which therefore never carries them either.

use std::path::{Path, PathBuf};

/// The marker that opens a reference.
const OPEN: &str = "${secret.";

/// Longest secret name; longest value read from a file (a key or a token, not a document).
const MAX_NAME: usize = 64;
const MAX_FILE: u64 = 64 * 1024;

/// Why a reference could not be resolved. Never holds a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("secret reference {0:?}: a name is letters, digits and _, at most 64, and the reference ends with }}")]
    BadReference(String),
    #[error("secret {name} is not set (neither SHIFTBOSS_SECRET_{name} nor a file {name} in the secrets directory)")]
    Missing { name: String },
    #[error("secret {name}: reading {path}: {problem}")]
    Unreadable { name: String, path: String, problem: String },
}

/// Where secrets come from.
#[derive(Debug, Clone)]
pub struct Secrets {
    /// Look in the environment first (`SHIFTBOSS_SECRET_<NAME>`).
    pub env: bool,
    /// Then a directory of one file per secret, named like it (as container runtimes mount them).
    pub dir: Option<PathBuf>,
}

impl Default for Secrets {
    fn default() -> Self {
        Secrets { env: true, dir: None }
    }
}

/// The values one request used, to scrub from what it returns.
#[derive(Default)]
pub struct Resolved {
    values: Vec<String>,
}

impl Resolved {
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every resolved value replaced by `[secret]`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for v in &self.values {
            if !v.is_empty() && out.contains(v.as_str()) {
                out = out.replace(v.as_str(), "[secret]");
            }
        }
        out
    }

    pub fn contains_any(&self, text: &str) -> bool {
        self.values.iter().any(|v| !v.is_empty() && text.contains(v.as_str()))
    }
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Resolved({} values)", self.values.len())
    }
}

/// The names a text refers to, checked: what registration checks, without reading any value.
pub fn references(text: &str) -> Result<Vec<&str>, SecretError> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let end = after.find('}').ok_or_else(|| SecretError::BadReference(shown(&rest[at..])))?;
        let name = &after[..end];
        if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(SecretError::BadReference(shown(&rest[at..])));
        }
        names.push(name);
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// The start of a bad reference, short: it is checked before resolution, so it holds no value.
fn shown(s: &str) -> String {
    s.chars().take(MAX_NAME + OPEN.len() + 1).collect()
}

impl Secrets {
    /// `text` with its references replaced by their values, which `used` keeps.
    pub fn resolve(&self, text: &str, used: &mut Resolved) -> Result<String, SecretError> {
        if !text.contains(OPEN) {
            return Ok(text.to_owned());
        }
        references(text)?;
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(OPEN) {
            out.push_str(&rest[..at]);
            let after = &rest[at + OPEN.len()..];
            let end = after.find('}').unwrap_or(after.len());
            let value = self.value(&after[..end])?;
            out.push_str(&value);
            used.values.push(value);
            rest = after.get(end + 1..).unwrap_or("");
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Resolves the references in every string of a JSON value (a config's body).
    pub fn resolve_json(&self, v: &serde_json::Value, used: &mut Resolved) -> Result<serde_json::Value, SecretError> {
        use serde_json::Value;
        Ok(match v {
            Value::String(s) => Value::String(self.resolve(s, used)?),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.resolve_json(x, used)).collect::<Result<_, _>>()?),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| Ok((k.clone(), self.resolve_json(x, used)?))).collect::<Result<
                    _,
                    SecretError,
                >>(
                )?)
            }
            other => other.clone(),
        })
    }

    fn value(&self, name: &str) -> Result<String, SecretError> {
        if self.env
            && let Ok(v) = std::env::var(format!("SHIFTBOSS_SECRET_{name}"))
        {
            return Ok(v);
        }
        if let Some(dir) = &self.dir {
            return read_file(name, &dir.join(name));
        }
        Err(SecretError::Missing { name: name.to_owned() })
    }
}

fn read_file(name: &str, path: &Path) -> Result<String, SecretError> {
    use std::io::Read;
    let unreadable =
        |problem: String| SecretError::Unreadable { name: name.to_owned(), path: path.display().to_string(), problem };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SecretError::Missing { name: name.to_owned() });
        }
        Err(e) => return Err(unreadable(e.kind().to_string())),
    };
    let mut text = String::new();
    file.take(MAX_FILE + 1).read_to_string(&mut text).map_err(|e| unreadable(e.kind().to_string()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(unreadable(format!("larger than {MAX_FILE} bytes")));
    }
    // Files written by editors and `echo` end with a newline that is not part of the secret.
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_checked_and_resolved_from_a_directory() {
        assert_eq!(references("Bearer ${secret.API_TOKEN} and ${secret.b}").unwrap(), vec!["API_TOKEN", "b"]);
        for bad in ["${secret.}", "${secret.a-b}", "${secret.open", "${secret.a b}"] {
            assert!(matches!(references(bad), Err(SecretError::BadReference(_))), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("API_TOKEN"), "tok-123\n").unwrap();
        let s = Secrets { env: false, dir: Some(dir.path().to_owned()) };
        let mut used = Resolved::default();
        assert_eq!(s.resolve("Bearer ${secret.API_TOKEN}!", &mut used).unwrap(), "Bearer tok-123!");
        assert_eq!(s.resolve("plain", &mut used).unwrap(), "plain");
        assert_eq!(used.scrub("echo: tok-123"), "echo: [secret]");
        let e = s.resolve("${secret.NOPE}", &mut used).unwrap_err();
        assert_eq!(e, SecretError::Missing { name: "NOPE".into() });
        assert!(!e.to_string().contains("tok-123"));
        let body = serde_json::json!({"a": ["${secret.API_TOKEN}", 1], "b": {"c": "x"}});
        assert_eq!(
            s.resolve_json(&body, &mut used).unwrap(),
            serde_json::json!({"a": ["tok-123", 1], "b": {"c": "x"}})
        );
    }

    #[test]
    fn the_environment_is_read_first() {
        // PATH is set in every test process; a secret named so is read from SHIFTBOSS_SECRET_PATH,
        // which is not, so this checks the name the variable is looked up by.
        let s = Secrets { env: true, dir: None };
        assert_eq!(
            s.resolve("${secret.PATH}", &mut Resolved::default()).unwrap_err(),
            SecretError::Missing { name: "PATH".into() }
        );
    }
}
