//! The corpus of Conductor definitions written for shiftboss from Conductor's documentation
//! (`tests/conductor/` here and `examples/conductor/`): the share that import, and that a test runs
//! to the end Conductor documents. Prints both; every definition must import, and every one must
//! be run by a test (its file named in one of the end-to-end tests), so that one added without a
//! run fails here.

use shiftboss_conductor::{from_conductor, from_conductor_with_tasks};
use std::path::{Path, PathBuf};

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_definition_of_the_corpus_imports_and_a_test_runs_it() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples = here.join("../../examples/conductor");
    // The tests that run them: this crate's end-to-end tests, and the importer's, which runs the
    // examples through the decider.
    let runners: String = [
        here.join("tests/conductor_e2e.rs"),
        here.join("tests/conductor_vocabulary.rs"),
        here.join("../shiftboss-conductor/tests/conductor.rs"),
        here.join("../shiftboss-engine/tests/workflows.rs"),
        here.join("../shiftboss-events/tests/conductor_event.rs"),
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
    .collect();

    let mut files = json_files(&here.join("tests/conductor"));
    files.extend(json_files(&examples).into_iter().filter(|p| !p.to_string_lossy().ends_with("_taskdefs.json")));
    let (mut imported, mut run, mut problems) = (0, 0, Vec::new());
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let defs = path.with_file_name(name.replace(".json", "_taskdefs.json"));
        let result = match std::fs::read_to_string(&defs) {
            Ok(d) => from_conductor_with_tasks(&text, &[d.as_str()]),
            Err(_) => from_conductor(&text),
        };
        match result {
            Ok(_) => imported += 1,
            Err(e) => problems.push(format!("{name}: does not import: {e}")),
        }
        if runners.contains(&format!("\"{name}\"")) || runners.contains(&format!("/{name}\"")) {
            run += 1;
        } else {
            problems.push(format!("{name}: no test runs it"));
        }
    }
    let n = files.len();
    println!("conductor corpus: {n} definitions; imported {imported} of {n}; run to their end by a test {run} of {n}");
    assert!(n >= 20, "the corpus holds {n} definitions");
    assert!(problems.is_empty(), "{problems:#?}");
}
