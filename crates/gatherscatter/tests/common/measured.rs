//! What the tuning report says of a measured choice.

use gatherscatter::tuning::{self, Tuning};

/// Under `auto`, the report names the class of `knob` that starts with
/// `class`, with both strategies timed at least twice and one kept. Under
/// a forced tuning (`GATHERSCATTER_TUNING`) and under Miri, which cannot
/// time, nothing is measured and nothing is checked.
pub fn assert_measured(knob: &str, class: &str) {
    if tuning::in_force() != Tuning::AUTO || cfg!(miri) {
        return;
    }
    let report = tuning::report();
    let line = report.to_string();
    let timing = report
        .measured
        .iter()
        .find(|t| t.knob == knob && t.class.starts_with(class))
        .unwrap_or_else(|| panic!("no {knob} {class} in {line}"));
    assert!(timing.calls.iter().all(|&c| c >= 2), "{line}");
    assert!(timing.chosen.is_some(), "{line}");
}
