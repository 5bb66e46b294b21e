//! The hostile inputs of issue #35, each as a test: every one exits with a
//! documented code and a clear message, creates or changes no file but the
//! intended output, and needs no memory beyond its inputs, its output and a
//! bounded overhead.
//!
//! Setup as in the report: `d.npy` is a 3×4 float32 array, `i.npy` is `[0]`
//! as int64.

use std::path::Path;
use std::process::{Command, Output};

use gatherscatter::{DType, Tensor};
use gatherscatter_onnx::builder::{int_attribute, single_node_model, value_info};
use gatherscatter_onnx::encode_tensor;
use gatherscatter_onnx::proto::{NodeProto, TensorProto};
use gsx::npy;
use prost::Message;

fn gsx_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gsx"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("gsx runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit `code` with `error[kind]` on stderr.
fn expect(out: &Output, code: i32, kind: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(&format!("error[{kind}]")), "stderr: {err}");
}

/// A directory with `d.npy` (3×4 f32) and `i.npy` (`[0]`, int64).
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = Tensor::new(vec![3, 4], (0..12).map(|v| v as f32).collect()).unwrap();
    std::fs::write(dir.path().join("d.npy"), npy::encode(&d).unwrap()).unwrap();
    let i = Tensor::new(vec![1], vec![0i64]).unwrap();
    std::fs::write(dir.path().join("i.npy"), npy::encode(&i).unwrap()).unwrap();
    dir
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A `.npy` file with a hand-written header and `data` after it.
fn raw_npy(path: &Path, descr: &str, shape: &str, data: &[u8]) {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

// 1. An input overwritten through the temporary file.

#[test]
#[cfg(unix)]
fn a_symlink_planted_at_the_old_temporary_name_is_never_followed() {
    let dir = setup();
    let before = std::fs::read(dir.path().join("d.npy")).unwrap();
    // The report's reproduction: the old name was `.o.npy.PID.tmp`.
    let out = Command::new("bash")
        .current_dir(dir.path())
        .args([
            "-c",
            &format!(
                "ln -s d.npy .o.npy.$$.tmp; exec {} gather d.npy i.npy -o o.npy",
                env!("CARGO_BIN_EXE_gsx")
            ),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(dir.path().join("d.npy")).unwrap(), before);
    let o = npy::read(&dir.path().join("o.npy")).unwrap();
    assert_eq!(o.shape(), &[1, 4]);
    // The planted link is still a link to d.npy; nothing else was added.
    let names = listing(dir.path());
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names
        .iter()
        .any(|n| n.starts_with(".o.npy.") && n.ends_with(".tmp")));
}

#[test]
#[cfg(unix)]
fn outputs_get_the_mode_of_a_plain_create_and_no_temporary_file_is_left() {
    use std::os::unix::fs::PermissionsExt;
    let dir = setup();
    let out = gsx_in(dir.path(), &["gather", "d.npy", "i.npy", "-o", "o.npy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mode = std::fs::metadata(dir.path().join("o.npy"))
        .unwrap()
        .permissions()
        .mode();
    // 0666 less a umask, which never takes the owner's read and write.
    assert_eq!(mode & 0o600, 0o600, "{mode:o}");
    assert_eq!(mode & 0o111, 0, "{mode:o}");
    // A failing call (bad index) leaves nothing either.
    let bad = Tensor::new(vec![1], vec![9i64]).unwrap();
    std::fs::write(dir.path().join("bad.npy"), npy::encode(&bad).unwrap()).unwrap();
    let out = gsx_in(dir.path(), &["gather", "d.npy", "bad.npy", "-o", "p.npy"]);
    expect(&out, 1, "out_of_bounds");
    assert_eq!(listing(dir.path()), ["bad.npy", "d.npy", "i.npy", "o.npy"]);
}

// 2. A 128-byte .npy that claims 10^9 zero-width strings.

#[test]
fn zero_width_string_elements_are_refused_before_any_allocation() {
    let dir = setup();
    for (descr, shape) in [
        ("<U0", "(1000000000,)"),
        ("|S0", "(1000000000,)"),
        ("<U0", "(100000000,)"),
    ] {
        raw_npy(&dir.path().join("s.npy"), descr, shape, &[]);
        let out = gsx_in(dir.path(), &["gather", "s.npy", "i.npy", "-o", "o.npy"]);
        expect(&out, 1, "bad_file");
        assert!(stderr(&out).contains("zero-width"), "{}", stderr(&out));
    }
    // An empty array of zero-width strings is fine.
    raw_npy(&dir.path().join("e.npy"), "<U0", "(0, 3)", &[]);
    let e = npy::read(&dir.path().join("e.npy")).unwrap();
    assert_eq!(e.shape(), &[0, 3]);
    assert!(!dir.path().join("o.npy").exists());
}

// 3. A string tensor padded to 40 GB as .npy.

#[test]
fn strings_whose_npy_padding_exceeds_the_budget_are_refused_and_pb_works() {
    let dir = setup();
    let mut strings = vec![String::new(); 10_000];
    strings[0] = "x".repeat(1_000_000);
    let data = Tensor::new(vec![10_000], strings).unwrap();
    std::fs::write(dir.path().join("s.pb"), encode_tensor(&data, "s").unwrap()).unwrap();
    let all: Vec<i64> = (0..10_000).collect();
    let idx = Tensor::new(vec![10_000], all).unwrap();
    std::fs::write(dir.path().join("all.npy"), npy::encode(&idx).unwrap()).unwrap();
    // 10,000 × 1,000,000 code points × 4 bytes = 40 GB as .npy.
    let out = gsx_in(
        dir.path(),
        &[
            "--max-memory",
            "1G",
            "gather",
            "s.pb",
            "all.npy",
            "-o",
            "o.npy",
        ],
    );
    expect(&out, 1, "out_of_memory");
    assert!(
        stderr(&out).contains("40000000000 bytes"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("o.npy").exists());
    let out = gsx_in(dir.path(), &["gather", "s.pb", "all.npy", "-o", "o.pb"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Within the budget, the padded .npy is streamed and reads back.
    let out = gsx_in(dir.path(), &["gather", "s.pb", "i.npy", "-o", "one.npy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let one = npy::read(&dir.path().join("one.npy")).unwrap();
    assert_eq!(one.data::<String>().unwrap()[0].len(), 1_000_000);
}

// 4. --repeat sized a vector blindly.

#[test]
fn repeat_counts_outside_one_to_a_million_are_usage_errors() {
    let dir = setup();
    for n in ["18446744073709551615", "1000000000000", "1000001", "0"] {
        let out = gsx_in(dir.path(), &["gather", "d.npy", "i.npy", "--repeat", n]);
        assert_eq!(out.status.code(), Some(2), "--repeat {n}: {}", stderr(&out));
    }
    let out = gsx_in(dir.path(), &["gather", "d.npy", "i.npy", "--repeat", "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

// 5. SIGBUS when a mapped input was truncated while read.

#[test]
#[cfg(unix)]
fn an_input_truncated_while_it_is_read_is_an_error_never_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = setup();
    let big = dir.path().join("r.npy");
    let rows = Tensor::new(vec![200, 1 << 16], vec![1.0f32; 200 << 16]).unwrap();
    let bytes = npy::encode(&rows).unwrap();
    let idx = Tensor::new(vec![2], vec![0i64, 199]).unwrap();
    std::fs::write(dir.path().join("ix.npy"), npy::encode(&idx).unwrap()).unwrap();
    for delay_ms in [0u64, 2, 5, 10, 20] {
        std::fs::write(&big, &bytes).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gsx"))
            .current_dir(dir.path())
            .args(["gather", "r.npy", "ix.npy", "--threads", "1", "-o", "o.npy"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(8192)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.signal(),
            None,
            "killed by a signal: {:?}",
            out.status
        );
        // Read whole before the cut (0), or refused after it (1).
        match out.status.code() {
            Some(0) => {}
            Some(1) => {
                let err = stderr(&out);
                assert!(
                    err.contains("error[bad_file]") || err.contains("error[io]"),
                    "{err}"
                );
            }
            other => panic!("exit {other:?}: {}", stderr(&out)),
        }
    }
}

// 6. --threads 65535 hung, 4000 exited 70.

#[test]
fn thread_counts_above_four_per_core_are_usage_errors() {
    let dir = setup();
    for t in ["65535", "4000"] {
        let out = gsx_in(
            dir.path(),
            &["gather", "d.npy", "i.npy", "--threads", t, "-o", "o.npy"],
        );
        expect(&out, 2, "usage");
        assert!(stderr(&out).contains("4 per core"), "{}", stderr(&out));
    }
    let cores = std::thread::available_parallelism().unwrap().get();
    let most = (4 * cores).to_string();
    let out = gsx_in(
        dir.path(),
        &[
            "gather",
            "d.npy",
            "i.npy",
            "--threads",
            &most,
            "-o",
            "o.npy",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

// 7. Partial outputs: run wrote outputs one at a time; SIGTERM left the
// temporary file.

/// A model with two outputs: Gather(data, indices) and the data itself.
fn two_output_model() -> Vec<u8> {
    let mut model = single_node_model(
        "",
        "Gather",
        13,
        &[("data", Some(DType::F32)), ("indices", Some(DType::I64))],
        vec![],
    );
    let graph = model.graph.as_mut().unwrap();
    graph.output.push(value_info("data", Some(DType::F32)));
    model.encode_to_vec()
}

#[test]
fn run_renames_no_output_unless_every_output_was_written() {
    let dir = setup();
    std::fs::write(dir.path().join("m.onnx"), two_output_model()).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    // The second output's name is taken by a directory.
    std::fs::create_dir(out_dir.join("output_1.pb")).unwrap();
    let args = [
        "run",
        "m.onnx",
        "--input",
        "data=d.npy",
        "--input",
        "indices=i.npy",
        "--output-dir",
        "out",
    ];
    let out = gsx_in(dir.path(), &args);
    expect(&out, 2, "usage");
    assert_eq!(
        listing(&out_dir),
        ["output_1.pb"],
        "output_0.pb not written"
    );
    std::fs::remove_dir(out_dir.join("output_1.pb")).unwrap();
    let out = gsx_in(dir.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(listing(&out_dir), ["output_0.pb", "output_1.pb"]);
}

#[test]
#[cfg(unix)]
fn sigterm_during_a_large_write_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = setup();
    let data = Tensor::new(vec![1, 1 << 22], vec![2.5f32; 1 << 22]).unwrap();
    std::fs::write(dir.path().join("big.npy"), npy::encode(&data).unwrap()).unwrap();
    // 64 rows of 16 MiB: a 1 GiB output, written for a while.
    let idx = Tensor::new(vec![64], vec![0i64; 64]).unwrap();
    std::fs::write(dir.path().join("ix.npy"), npy::encode(&idx).unwrap()).unwrap();
    let mut terminated = 0;
    for delay_ms in [300u64, 600, 900] {
        let child = Command::new(env!("CARGO_BIN_EXE_gsx"))
            .current_dir(dir.path())
            .args(["gather", "big.npy", "ix.npy", "-o", "o.npy"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.signal(), None, "{:?}", out.status);
        match out.status.code() {
            Some(143) => terminated += 1,
            Some(0) => {}
            other => panic!("exit {other:?}: {}", stderr(&out)),
        }
        let names = listing(dir.path());
        assert!(
            names.iter().all(|n| !n.ends_with(".tmp")),
            "a temporary file is left: {names:?}"
        );
        if let Ok(meta) = std::fs::metadata(dir.path().join("o.npy")) {
            assert_eq!(meta.len(), 128 + (64u64 << 24), "a complete output or none");
            std::fs::remove_file(dir.path().join("o.npy")).unwrap();
        }
    }
    assert!(terminated > 0, "no run was still going when SIGTERM came");
}

// 8. Unbounded reads of devices.

#[test]
#[cfg(unix)]
fn devices_fifos_and_directories_are_refused_as_inputs() {
    let dir = setup();
    std::os::unix::fs::symlink("/dev/urandom", dir.path().join("x.pb")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("z.npy")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("z.onnx")).unwrap();
    std::fs::create_dir(dir.path().join("dir.npy")).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(dir.path().join("f.npy"))
        .status()
        .unwrap();
    assert!(fifo.success());
    for input in ["x.pb", "z.npy", "dir.npy", "f.npy"] {
        let out = gsx_in(dir.path(), &["gather", input, "i.npy", "-o", "o.npy"]);
        expect(&out, 1, "bad_file");
        assert!(
            stderr(&out).contains("not a regular file"),
            "{}",
            stderr(&out)
        );
    }
    let out = gsx_in(dir.path(), &["run", "z.onnx", "--output-dir", "out"]);
    expect(&out, 1, "bad_file");
    assert!(!dir.path().join("o.npy").exists());
}

// Also misleading or inconsistent.

#[test]
fn a_pb_that_is_not_a_tensor_proto_is_a_bad_file() {
    let dir = setup();
    std::fs::write(dir.path().join("empty.pb"), b"").unwrap();
    std::fs::write(dir.path().join("model.pb"), two_output_model()).unwrap();
    for file in ["empty.pb", "model.pb"] {
        let out = gsx_in(dir.path(), &["gather", file, "i.npy", "-o", "o.npy"]);
        expect(&out, 1, "bad_file");
        assert!(stderr(&out).contains(file), "{}", stderr(&out));
    }
}

#[test]
fn an_unsupported_pb_element_type_names_the_file() {
    let dir = setup();
    let proto = TensorProto {
        dims: vec![1],
        data_type: Some(17), // FLOAT8E4M3FN
        raw_data: Some(vec![0]),
        ..TensorProto::default()
    };
    std::fs::write(dir.path().join("f8.pb"), proto.encode_to_vec()).unwrap();
    let out = gsx_in(dir.path(), &["gather", "f8.pb", "i.npy", "-o", "o.npy"]);
    expect(&out, 77, "unsupported");
    assert!(stderr(&out).contains("f8.pb: "), "{}", stderr(&out));
}

#[test]
fn an_output_larger_than_the_budget_is_out_of_memory_not_size_overflow() {
    let dir = setup();
    let row = Tensor::new(vec![1, 1 << 20], vec![1u8; 1 << 20]).unwrap();
    std::fs::write(dir.path().join("row.npy"), npy::encode(&row).unwrap()).unwrap();
    let idx = Tensor::new(vec![200], vec![0i64; 200]).unwrap();
    std::fs::write(dir.path().join("ix.npy"), npy::encode(&idx).unwrap()).unwrap();
    // 200 MiB of output against a 64 MiB budget.
    let out = gsx_in(
        dir.path(),
        &[
            "--max-memory",
            "64M",
            "gather",
            "row.npy",
            "ix.npy",
            "-o",
            "o.npy",
        ],
    );
    expect(&out, 1, "out_of_memory");
    // An input larger than the budget is refused before it is read.
    let out = gsx_in(
        dir.path(),
        &[
            "--max-memory",
            "512K",
            "gather",
            "row.npy",
            "i.npy",
            "-o",
            "o.npy",
        ],
    );
    expect(&out, 1, "out_of_memory");
    assert!(stderr(&out).contains("row.npy"), "{}", stderr(&out));
}

#[test]
fn a_short_file_with_the_npy_magic_is_a_truncated_header() {
    let dir = setup();
    for len in 6..10 {
        let mut bytes = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        bytes.truncate(len);
        std::fs::write(dir.path().join("short.npy"), &bytes).unwrap();
        let out = gsx_in(dir.path(), &["gather", "short.npy", "i.npy", "-o", "o.npy"]);
        expect(&out, 1, "bad_file");
        assert!(
            stderr(&out).contains("truncated header"),
            "{len}: {}",
            stderr(&out)
        );
    }
    std::fs::write(dir.path().join("short.npy"), b"\x93NU").unwrap();
    let out = gsx_in(dir.path(), &["gather", "short.npy", "i.npy", "-o", "o.npy"]);
    assert!(
        stderr(&out).contains("no \\x93NUMPY magic"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_shape_of_two_million_dims_is_elided_in_messages() {
    let dir = setup();
    let shape = format!("({})", vec!["1"; 2_000_000].join(", "));
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let mut header = dict.into_bytes();
    while (12 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&header);
    // No data: the header claims 4 bytes.
    std::fs::write(dir.path().join("deep.npy"), bytes).unwrap();
    let out = gsx_in(dir.path(), &["gather", "deep.npy", "i.npy", "-o", "o.npy"]);
    expect(&out, 1, "bad_file");
    let err = stderr(&out);
    assert!(err.len() < 500, "{} bytes of stderr", err.len());
    assert!(err.contains("(2000000 dims)"), "{err}");
}

#[test]
fn a_zero_dim_makes_an_empty_tensor_whatever_the_other_dims() {
    let dir = setup();
    let big = 1u64 << 32;
    for shape in [
        format!("({big}, {big}, 0)"),
        format!("(0, {}, {})", u64::MAX, u64::MAX),
    ] {
        raw_npy(&dir.path().join("e.npy"), "<f4", &shape, &[]);
        let e = npy::read(&dir.path().join("e.npy")).unwrap();
        assert_eq!(e.len(), 0, "{shape}");
    }
    // Without a zero, an overflowing product is refused.
    raw_npy(
        &dir.path().join("e.npy"),
        "<f4",
        &format!("({big}, {big})"),
        &[],
    );
    let err = npy::read(&dir.path().join("e.npy")).unwrap_err();
    assert_eq!(err.kind.as_str(), "bad_file");
    assert!(err.message.contains("overflows"), "{}", err.message);
}

#[test]
fn conformance_refuses_two_files_for_one_input() {
    let dir = setup();
    let case = dir.path().join("case");
    let set = case.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(case.join("model.onnx"), two_output_model()).unwrap();
    let t = Tensor::new(vec![1], vec![0i64]).unwrap();
    for name in ["input_0.pb", "input_00.pb", "output_0.pb"] {
        std::fs::write(set.join(name), encode_tensor(&t, "t").unwrap()).unwrap();
    }
    let out = gsx_in(dir.path(), &["conformance", "case"]);
    let err = stderr(&out);
    assert!(
        err.contains("input_0.pb and input_00.pb both give input_0"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
}

#[test]
fn an_input_named_twice_is_a_usage_error() {
    let dir = setup();
    std::fs::write(dir.path().join("m.onnx"), two_output_model()).unwrap();
    let out = gsx_in(
        dir.path(),
        &[
            "run",
            "m.onnx",
            "--input",
            "data=d.npy",
            "--input",
            "data=i.npy",
            "--input",
            "indices=i.npy",
            "--output-dir",
            "out",
        ],
    );
    expect(&out, 2, "usage");
    assert!(stderr(&out).contains("more than once"), "{}", stderr(&out));
}

#[test]
#[cfg(unix)]
fn a_hard_link_of_an_input_is_not_replaced() {
    let dir = setup();
    std::fs::hard_link(dir.path().join("d.npy"), dir.path().join("link.npy")).unwrap();
    let before = std::fs::read(dir.path().join("d.npy")).unwrap();
    let out = gsx_in(dir.path(), &["gather", "d.npy", "i.npy", "-o", "link.npy"]);
    expect(&out, 2, "usage");
    assert!(stderr(&out).contains("hard link"), "{}", stderr(&out));
    assert_eq!(std::fs::read(dir.path().join("link.npy")).unwrap(), before);
}

/// A model of `nodes` Gathers in a chain: node k gathers `x{k}` at the
/// graph input `indices` (of `index_dtype`) along the axis `axis(k)` gives.
fn gather_chain(
    nodes: usize,
    indices: &str,
    index_dtype: DType,
    axis: impl Fn(usize) -> i64,
) -> Vec<u8> {
    let mut model = single_node_model(
        "",
        "Gather",
        13,
        &[("x0", Some(DType::F32)), (indices, Some(index_dtype))],
        vec![],
    );
    let graph = model.graph.as_mut().unwrap();
    graph.node = (0..nodes)
        .map(|k| NodeProto {
            input: vec![format!("x{k}"), indices.into()],
            output: vec![format!("x{}", k + 1)],
            op_type: Some("Gather".into()),
            attribute: vec![int_attribute("axis", axis(k))],
            ..NodeProto::default()
        })
        .collect();
    graph.output = vec![value_info(&format!("x{nodes}"), Some(DType::F32))];
    model.encode_to_vec()
}

/// Gathers chained so that every node doubles the tensor: node k gathers
/// `[[0], [0]]` along axis k, whose size is 1.
fn doubling_chain(nodes: usize) -> Vec<u8> {
    gather_chain(nodes, "two", DType::I64, |k| k as i64)
}

/// A chain of `nodes` Gathers, each permuting the previous result.
fn permutation_chain(nodes: usize) -> Vec<u8> {
    gather_chain(nodes, "perm", DType::I32, |_| 0)
}

#[test]
fn a_chain_of_doubling_gathers_stops_at_the_budget_with_a_clear_error() {
    let dir = setup();
    std::fs::write(dir.path().join("m.onnx"), doubling_chain(60)).unwrap();
    let x0 = Tensor::new(vec![1], vec![1.0f32]).unwrap();
    let two = Tensor::new(vec![2, 1], vec![0i64, 0]).unwrap();
    std::fs::write(dir.path().join("x0.npy"), npy::encode(&x0).unwrap()).unwrap();
    std::fs::write(dir.path().join("two.npy"), npy::encode(&two).unwrap()).unwrap();
    let out = gsx_in(
        dir.path(),
        &[
            "--max-memory",
            "256M",
            "run",
            "m.onnx",
            "--input",
            "x0=x0.npy",
            "--input",
            "two=two.npy",
            "--output-dir",
            "out",
        ],
    );
    expect(&out, 1, "out_of_memory");
    assert!(!dir.path().join("out").join("output_0.pb").exists());
}

#[test]
fn intermediates_are_freed_so_a_long_chain_runs_in_a_budget_it_would_exceed() {
    let dir = setup();
    let n = 1usize << 21; // 8 MiB of f32 and 8 MiB of i32 indices
    let x0 = Tensor::new(vec![n], (0..n).map(|v| v as f32).collect()).unwrap();
    let perm = Tensor::new(vec![n], (0..n as i32).rev().collect()).unwrap();
    std::fs::write(dir.path().join("x0.npy"), npy::encode(&x0).unwrap()).unwrap();
    std::fs::write(dir.path().join("perm.npy"), npy::encode(&perm).unwrap()).unwrap();
    // Twelve intermediates of 8 MiB: 96 MiB kept, 16 MiB live when freed.
    std::fs::write(dir.path().join("m.onnx"), permutation_chain(12)).unwrap();
    let out = gsx_in(
        dir.path(),
        &[
            "--max-memory",
            "80M",
            "run",
            "m.onnx",
            "--input",
            "x0=x0.npy",
            "--input",
            "perm=perm.npy",
            "--output-dir",
            "out",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // An even number of reversals is the identity.
    let y = gatherscatter_onnx::read_tensor_file(&dir.path().join("out/output_0.pb"))
        .unwrap()
        .1;
    assert_eq!(y, x0);
}
