//! JSON given on the command line (`--input`, `--data`, `--output`, `--params`): the text itself,
//! or, as curl has it, `@FILE` for a file's contents and `@-` for standard input, for values too
//! large (or too awkward to quote) for a command line. No JSON text starts with `@`, so the two
//! never mix.

use anyhow::{Context, bail};
use serde_json::Value;
use std::io::Read;

/// The most a JSON argument may hold, read from a file or standard input (the store refuses far
/// less; this only keeps a wrong file from being read whole).
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Reads the JSON `flag` was given: inline, `@FILE` or `@-`.
pub fn read(flag: &str, arg: &str) -> anyhow::Result<Value> {
    let Some(source) = arg.strip_prefix('@') else {
        return serde_json::from_str(arg)
            .with_context(|| format!("{flag} must be JSON (or @FILE, or @- for standard input)"));
    };
    let (text, from) = if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("{flag} @-: reading standard input"))?;
        (text, "standard input".to_owned())
    } else {
        if source.is_empty() {
            bail!("{flag} @: name a file after the @ (or @- for standard input)");
        }
        let file = std::fs::File::open(source).with_context(|| format!("{flag} @{source}: cannot open the file"))?;
        let mut text = String::new();
        file.take(MAX_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("{flag} @{source}: reading the file"))?;
        (text, source.to_owned())
    };
    if text.len() as u64 > MAX_BYTES {
        bail!("{flag} @{source}: {from} holds more than {MAX_BYTES} bytes");
    }
    if text.trim().is_empty() {
        bail!("{flag} @{source}: {from} is empty");
    }
    serde_json::from_str(&text).with_context(|| format!("{flag} @{source}: {from} is not JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_text_and_files_read_alike() {
        assert_eq!(read("--input", r#"{"a":1}"#).unwrap(), serde_json::json!({"a": 1}));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("in.json");
        std::fs::write(&f, "{\"a\": [1, 2]}\n").unwrap();
        assert_eq!(read("--input", &format!("@{}", f.display())).unwrap(), serde_json::json!({"a": [1, 2]}));
        std::fs::write(&f, " \n").unwrap();
        let e = format!("{:#}", read("--data", &format!("@{}", f.display())).unwrap_err());
        assert!(e.contains("is empty") && e.contains("--data"), "{e}");
        let e = format!("{:#}", read("--data", "@/no/such/file.json").unwrap_err());
        assert!(e.contains("/no/such/file.json"), "{e}");
        let e = format!("{:#}", read("--data", "{nope").unwrap_err());
        assert!(e.contains("--data must be JSON"), "{e}");
    }
}
