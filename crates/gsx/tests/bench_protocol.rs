//! Drives the built `gsx-bench` binary through the external-program
//! protocol of `../shared/bench/peers.py`: the checked output, the JSON
//! line of timings in each mode, and the exit code for an unknown op.

use std::path::Path;
use std::process::{Command, Output};

use gatherscatter::Tensor;
use gsx::npy;

/// A workload folder as `make_inputs.py` writes it: a manifest naming the
/// op and its attributes, and the inputs as `.npy`.
fn write_workload(dir: &Path, manifest: &str, data: &Tensor, indices: &Tensor) {
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    std::fs::write(dir.join("data.npy"), npy::encode(data).unwrap()).unwrap();
    std::fs::write(dir.join("indices.npy"), npy::encode(indices).unwrap()).unwrap();
}

const GATHER_ROWS: &str = r#"{"op": "Gather", "axis": 0, "reduction": "none",
  "files": {"data": "data.npy", "indices": "indices.npy"}}"#;

fn gather_rows_workload(dir: &Path) {
    let data = Tensor::new(vec![3, 2], (0..6).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
    let indices = Tensor::from_vec(vec![2i64, -3, 2, 1]);
    write_workload(dir, GATHER_ROWS, &data, &indices);
}

fn gsx_bench(dir: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gsx-bench"))
        .env_remove("GATHERSCATTER_TUNING")
        .arg("--workload-dir")
        .arg(dir)
        .arg("--out")
        .arg(dir.join("out.npy"))
        .args(["--reps", "5", "--warmup", "1"])
        .args(extra)
        .output()
        .expect("gsx-bench runs")
}

/// The last stdout line, which the protocol reads as JSON.
fn result_line(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let last = stdout.lines().last().expect("a result line");
    serde_json::from_str(last).expect("valid JSON")
}

#[test]
fn every_mode_writes_the_gathered_rows_and_one_time_per_sample() {
    let dir = tempfile::tempdir().unwrap();
    gather_rows_workload(dir.path());
    let modes: [(&[&str], &str); 4] = [
        (&[], "(fresh)"),
        (&["--into", "--threads", "2"], "(into)"),
        (
            &["--cold-cache-mib", "1"],
            "(fresh, 1 MiB read before each call)",
        ),
        (
            &["--into", "--cold-cache-mib", "2"],
            "(into, 2 MiB read before each call)",
        ),
    ];
    for (flags, mode) in modes {
        std::fs::remove_file(dir.path().join("out.npy")).ok();
        let json = result_line(&gsx_bench(dir.path(), flags));
        let times = json["times_s"].as_array().expect("times_s");
        assert_eq!(times.len(), 5, "{flags:?}");
        assert!(times.iter().all(|t| t.as_f64().is_some_and(|t| t >= 0.0)));
        let version = json["version"].as_str().unwrap();
        assert!(version.ends_with(mode), "{flags:?}: {version}");
        if flags.contains(&"--cold-cache-mib") {
            // A batch of calls would let every call after the first find
            // its bytes cached.
            assert_eq!(json["inner"], 1, "{flags:?}");
        }
        let written = npy::read(&dir.path().join("out.npy")).unwrap();
        assert_eq!(written.shape(), &[4, 2], "{flags:?}");
        assert_eq!(
            written.data::<f32>().unwrap(),
            &[4.0, 5.0, 0.0, 1.0, 4.0, 5.0, 2.0, 3.0],
            "{flags:?}"
        );
    }
}

#[test]
fn a_forced_tuning_writes_the_same_rows_and_is_named_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    gather_rows_workload(dir.path());
    let forced = "stores=streaming,word_gather=scalar,block_order=source";
    for flags in [&[][..], &["--tuning", forced][..]] {
        std::fs::remove_file(dir.path().join("out.npy")).ok();
        let json = result_line(&gsx_bench(dir.path(), flags));
        let line = json["tuning"].as_str().expect("a tuning report");
        let in_force = if flags.is_empty() {
            "tuning stores=auto,"
        } else {
            "tuning stores=streaming,"
        };
        assert!(line.starts_with(in_force), "{flags:?}: {line}");
        assert!(line.contains("last-level cache"), "{line}");
        let written = npy::read(&dir.path().join("out.npy")).unwrap();
        assert_eq!(
            written.data::<f32>().unwrap(),
            &[4.0, 5.0, 0.0, 1.0, 4.0, 5.0, 2.0, 3.0],
            "{flags:?}"
        );
    }
    let out = gsx_bench(dir.path(), &["--tuning", "stores=fast"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"fast\" is not one of"));
}

#[test]
fn a_tuning_variable_that_does_not_parse_is_a_usage_error_not_auto() {
    let dir = tempfile::tempdir().unwrap();
    gather_rows_workload(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_gsx-bench"))
        .env("GATHERSCATTER_TUNING", "stores=fast")
        .arg("--workload-dir")
        .arg(dir.path())
        .arg("--out")
        .arg(dir.path().join("out.npy"))
        .output()
        .expect("gsx-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("GATHERSCATTER_TUNING=\"stores=fast\""),
        "{stderr}"
    );
    assert!(!dir.path().join("out.npy").exists());
}

#[test]
fn an_op_it_does_not_know_exits_with_status_3() {
    let dir = tempfile::tempdir().unwrap();
    gather_rows_workload(dir.path());
    let manifest = GATHER_ROWS.replace("\"Gather\"", "\"Unique\"");
    std::fs::write(dir.path().join("manifest.json"), manifest).unwrap();
    let out = gsx_bench(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported: op \"Unique\""));
}

#[test]
fn a_cold_cache_sweep_too_large_to_allocate_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    gather_rows_workload(dir.path());
    for mib in [usize::MAX, usize::MAX >> 20] {
        let out = gsx_bench(dir.path(), &["--cold-cache-mib", &mib.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mib}: {stderr}");
        assert!(stderr.contains("cannot allocate that much"), "{stderr}");
    }
}
