//! What the tuning report says of a measured choice.

use gatherscatter::tuning::{self, Tuning};

/// Under `auto`, the report names a class of `knob` that starts with
/// `class`, with both strategies timed at least twice and one kept. A
/// prefix may name several classes (outputs on cache lines and across
/// them, which a fresh output's address decides): one of them is enough,
/// as the calls may be shared unevenly among them. Under a forced tuning
/// (`GATHERSCATTER_TUNING`) and under Miri, which cannot time, nothing is
/// measured and nothing is checked.
pub fn assert_measured(knob: &str, class: &str) {
    if tuning::in_force() != Tuning::AUTO || cfg!(miri) {
        return;
    }
    let report = tuning::report();
    let line = report.to_string();
    let mut named = report
        .measured
        .iter()
        .filter(|t| t.knob == knob && t.class.starts_with(class))
        .peekable();
    assert!(named.peek().is_some(), "no {knob} {class} in {line}");
    let decided = |t: &&tuning::CallTiming| t.calls.iter().all(|&c| c >= 2) && t.chosen.is_some();
    assert!(named.any(|t| decided(&t)), "{line}");
}

/// The `word_gather` choice for GatherElements' `class` of calls on
/// `word_bytes`-byte words by `index_bytes`-byte indices, under `auto`:
/// where the first-use measurement found the CPU's vector loop far behind
/// the scalar one (1- and 2-byte words go by the 4-byte words'
/// measurement), no call times it and the class is never measured; else
/// the class is measured as [`assert_measured`] says. Returns whether the
/// class was measured.
pub fn assert_word_loop_measured(class: &str, word_bytes: usize, index_bytes: usize) -> bool {
    if tuning::in_force() != Tuning::AUTO || cfg!(miri) {
        return false;
    }
    let report = tuning::report();
    let far_behind = report
        .word_gather
        .iter()
        .find(|t| t.word_bytes == word_bytes.max(4) && t.index_bytes == index_bytes)
        .is_some_and(|t| t.vector_far_behind);
    if !far_behind {
        assert_measured("word_gather", class);
        return true;
    }
    let line = report.to_string();
    assert!(
        !report
            .measured
            .iter()
            .any(|t| t.knob == "word_gather" && t.class.starts_with(class)),
        "the vector loop was far behind, yet {class} was timed: {line}"
    );
    false
}
