//! Every input of the committed fuzz corpus (`fuzz/corpus/TARGET/`), run
//! through its target's body (`fuzz/src`, shared by path) in an ordinary
//! test build: never a panic, and every success equal to the naive
//! reference. A regression suite for what the fuzzers found and covered;
//! new inputs come from fuzzing proper (`fuzz/run_all.sh 600`: nightly,
//! cargo-fuzz, AddressSanitizer), which CI's 30 minutes leave no room for.

#[path = "../../../fuzz/src/lib.rs"]
mod bodies;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// Run `body` on every file of `dir`; the files on which it panicked.
fn replay(dir: &Path, body: fn(&[u8])) -> (usize, Vec<PathBuf>) {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    let failed = files
        .iter()
        .filter(|file| {
            let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            std::panic::catch_unwind(|| body(&bytes)).is_err()
        })
        .cloned()
        .collect();
    (files.len(), failed)
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let dirs: BTreeSet<String> = std::fs::read_dir(corpus_root())
        .expect("fuzz/corpus exists")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let targets: BTreeSet<String> = bodies::TARGETS
        .iter()
        .map(|(name, _)| name.to_string())
        .collect();
    assert_eq!(dirs, targets);
}

/// The targets side by side (one thread each): the replay is CPU-bound and
/// its largest corpora (ScatterElements, ScatterND) set its length.
#[test]
fn every_corpus_input_runs_without_a_panic_and_matches_the_reference() {
    let root = corpus_root();
    let results: Vec<(&str, usize, Vec<PathBuf>)> = std::thread::scope(|scope| {
        let runs: Vec<_> = bodies::TARGETS
            .iter()
            .map(|&(name, body)| {
                let dir = root.join(name);
                scope.spawn(move || {
                    let (ran, failed) = replay(&dir, body);
                    (name, ran, failed)
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    for (name, ran, failed) in &results {
        assert!(*ran > 0, "fuzz/corpus/{name} is empty");
        assert!(failed.is_empty(), "{name}: these inputs fail: {failed:?}");
    }
}
