//! One jq filter, compiled with jaq and run over one input: what a worker process does per
//! request. Bounded in output (bytes of JSON and number of results); bounded in time and memory
//! by the process it runs in (see `pool.rs`), since jaq has no interrupt of its own.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use std::collections::HashMap;

type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// Natives left out: they read the process's environment. (`debug` and `stderr` write to the
/// worker's stderr, which goes nowhere; there are no `inputs` to read.)
const REFUSED_NATIVES: &[&str] = &["env"];

/// The most results one filter may give.
pub const MAX_RESULTS: usize = 10_000;

/// Compiled filters by text, so that a filter run again is not compiled again.
#[derive(Default)]
pub struct Filters {
    compiled: HashMap<String, Filter>,
}

/// The most compiled filters kept; past it the cache starts afresh.
const CACHE_CAP: usize = 256;

impl Filters {
    /// Runs `filter` over `input` (JSON text) and gives its results, or why it failed.
    pub fn run(&mut self, filter: &str, input: &str, max_output: usize) -> Result<Vec<serde_json::Value>, String> {
        if !self.compiled.contains_key(filter) {
            let compiled = compile(filter)?;
            if self.compiled.len() >= CACHE_CAP {
                self.compiled.clear();
            }
            self.compiled.insert(filter.to_owned(), compiled);
        }
        let Some(f) = self.compiled.get(filter) else {
            return Err("the filter was not compiled".into());
        };
        let input =
            jaq_json::read::parse_single(input.as_bytes()).map_err(|e| format!("the input is not JSON: {e}"))?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&f.lut, Vars::new([]));
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for v in f.id.run((ctx, input)).map(unwrap_valr) {
            let v = v.map_err(|e| e.to_string())?;
            let text = v.to_string();
            bytes = bytes.saturating_add(text.len());
            if bytes > max_output {
                return Err(format!("the results passed {max_output} bytes of JSON"));
            }
            if out.len() >= MAX_RESULTS {
                return Err(format!("the filter gave more than {MAX_RESULTS} results"));
            }
            // jaq writes NaN and infinities as JSON can't hold; those become null.
            out.push(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null));
        }
        Ok(out)
    }
}

/// Compiles `filter` and says why it does not compile, if it does not.
pub fn check(filter: &str) -> Result<(), String> {
    compile(filter).map(|_| ())
}

fn compile(code: &str) -> Result<Filter, String> {
    let defs = jaq_core::defs().chain(jaq_std::defs()).chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !REFUSED_NATIVES.contains(name));
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader.load(&arena, File { code, path: () }).map_err(|errs| {
        let mut text = String::from("the filter does not parse: ");
        for (_, e) in errs {
            text.push_str(&format!("{e:?}"));
        }
        shorten(text)
    })?;
    Compiler::default().with_funs(funs).compile(modules).map_err(|errs| {
        let mut names = Vec::new();
        for (_, list) in errs {
            for (name, kind) in list {
                names.push(format!("{name} ({kind:?})"));
            }
        }
        shorten(format!("the filter uses what is not defined: {}", names.join(", ")))
    })
}

fn shorten(mut text: String) -> String {
    if text.len() > 400 {
        let mut end = 400;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}
