//! Drives the built `gsx` binary: every subcommand on every dtype family
//! (expected outputs computed by numpy, see scripts/make_npy_fixtures.py),
//! `run` on a model of each op, the conformance corpus, and each exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gatherscatter::{DType, Tensor};
use gatherscatter_onnx::builder::{int_attribute, single_node_model, string_attribute};
use gatherscatter_onnx::{encode_tensor, read_tensor_file};
use gsx::npy;
use prost::Message;

const FAMILIES: [&str; 15] = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "unicode",
];

fn fixture(family: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(family)
        .join(file)
}

fn gsx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gsx"))
        .args(args)
        .output()
        .expect("gsx runs")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn read_tensor(path: &Path) -> Tensor {
    match path.extension().and_then(|e| e.to_str()) {
        Some("pb") => read_tensor_file(path).expect("valid .pb").1,
        _ => npy::read(path).expect("valid .npy"),
    }
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "gsx failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Runs one subcommand on one family and compares with numpy's result.
fn check_subcommand(family: &str, command: &str, inputs: &[&str], flags: &[&str], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.npy");
    let mut args = vec![command.to_string()];
    args.extend(
        inputs
            .iter()
            .map(|f| path_str(&fixture(family, f)).to_string()),
    );
    args.extend(flags.iter().map(|s| s.to_string()));
    args.extend(["-o".to_string(), path_str(&out_path).to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = gsx(&args);
    assert_success(&out);
    assert_eq!(
        read_tensor(&out_path),
        read_tensor(&fixture(family, expected)),
        "{command} on {family}"
    );
}

#[test]
fn every_subcommand_on_every_dtype_family_matches_numpy() {
    for family in FAMILIES {
        check_subcommand(
            family,
            "gather",
            &["data.npy", "gather_indices.npy"],
            &["--axis", "1"],
            "gather.npy",
        );
        check_subcommand(
            family,
            "gather-elements",
            &["data.npy", "elements_indices.npy"],
            &["--axis", "0"],
            "gather_elements.npy",
        );
        check_subcommand(
            family,
            "scatter-elements",
            &["data.npy", "scatter_indices.npy", "scatter_updates.npy"],
            &["--axis", "-1"],
            "scatter_elements.npy",
        );
        check_subcommand(
            family,
            "gather-nd",
            &["data.npy", "nd_indices.npy"],
            &[],
            "gather_nd.npy",
        );
        check_subcommand(
            family,
            "scatter-nd",
            &[
                "data.npy",
                "scatter_nd_indices.npy",
                "scatter_nd_updates.npy",
            ],
            &[],
            "scatter_nd.npy",
        );
    }
}

#[test]
fn scatter_reductions_with_duplicates_match_numpy_ufunc_at() {
    for reduction in ["add", "mul", "max", "min"] {
        check_subcommand(
            "reductions",
            "scatter-elements",
            &["data.npy", "indices.npy", "updates.npy"],
            &["--axis", "1", "--reduction", reduction],
            &format!("{reduction}.npy"),
        );
    }
}

#[test]
fn the_reader_handles_byte_order_fortran_order_and_bytes() {
    let c_order = read_tensor(&fixture("reader", "c_order.npy"));
    assert_eq!(read_tensor(&fixture("reader", "big_endian.npy")), c_order);
    assert_eq!(read_tensor(&fixture("reader", "fortran.npy")), c_order);
    assert_eq!(
        read_tensor(&fixture("reader", "big_endian_i32.npy")),
        Tensor::new(vec![2, 3], vec![0i32, 1, 2, 3, 4, 5]).unwrap()
    );
    assert_eq!(
        read_tensor(&fixture("reader", "bytes.npy")),
        Tensor::from_vec(vec!["ab".to_string(), "c".to_string()])
    );
}

#[test]
fn large_npy_inputs_are_read_whole_and_gathered_right() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.npy");
    let data: Vec<f32> = (0..(1u32 << 18)).map(|i| i as f32).collect();
    let tensor = Tensor::new(vec![data.len() / 4, 4], data).unwrap();
    std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
    assert_eq!(npy::read(&path).unwrap(), tensor);
    // ... and a gather on it gives the right rows.
    let idx = dir.path().join("idx.npy");
    std::fs::write(
        &idx,
        npy::encode(&Tensor::from_vec(vec![3i64, -1])).unwrap(),
    )
    .unwrap();
    let out = dir.path().join("out.npy");
    assert_success(&gsx(&[
        "gather",
        path_str(&path),
        path_str(&idx),
        "-o",
        path_str(&out),
    ]));
    let rows = tensor.shape()[0] as f32;
    assert_eq!(
        read_tensor(&out),
        Tensor::new(
            vec![2, 4],
            vec![
                12.0f32,
                13.0,
                14.0,
                15.0,
                (rows - 1.0) * 4.0,
                (rows - 1.0) * 4.0 + 1.0,
                (rows - 1.0) * 4.0 + 2.0,
                (rows - 1.0) * 4.0 + 3.0
            ]
        )
        .unwrap()
    );
}

#[test]
fn pb_inputs_and_outputs_work_like_npy() {
    let dir = tempfile::tempdir().unwrap();
    let data = Tensor::new(vec![2, 3], vec![1u16, 2, 3, 4, 5, 6]).unwrap();
    let idx = Tensor::from_vec(vec![1u64, 0]);
    std::fs::write(dir.path().join("d.pb"), encode_tensor(&data, "d").unwrap()).unwrap();
    std::fs::write(dir.path().join("i.pb"), encode_tensor(&idx, "i").unwrap()).unwrap();
    let out = dir.path().join("o.pb");
    let o = gsx(&[
        "gather",
        path_str(&dir.path().join("d.pb")),
        path_str(&dir.path().join("i.pb")),
        "-o",
        path_str(&out),
    ]);
    assert_success(&o);
    assert_eq!(
        read_tensor(&out),
        Tensor::new(vec![2, 3], vec![4u16, 5, 6, 1, 2, 3]).unwrap()
    );
}

#[test]
fn repeat_prints_one_json_line_with_n_timings() {
    let out = gsx(&[
        "gather",
        path_str(&fixture("float32", "data.npy")),
        path_str(&fixture("float32", "gather_indices.npy")),
        "--axis",
        "1",
        "--repeat",
        "7",
        "--threads",
        "2",
    ]);
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let json: serde_json::Value = serde_json::from_str(lines[0]).expect("valid JSON");
    let times = json["times_s"].as_array().expect("times_s array");
    assert_eq!(times.len(), 7);
    assert!(times.iter().all(|t| t.as_f64().is_some_and(|t| t >= 0.0)));
    assert_eq!(json["threads"], 2);
    assert_eq!(json["repeat"], 7);
    assert_eq!(json["op"], "gather");
}

/// Writes a model and its inputs (as .pb or .npy), runs `gsx run`, and
/// returns the decoded outputs or the failed process.
fn run_model(
    model: &gatherscatter_onnx::proto::ModelProto,
    inputs: &[Tensor],
    npy_inputs: bool,
) -> Result<Vec<Tensor>, Output> {
    let dir = tempfile::tempdir().unwrap();
    let model_path = dir.path().join("model.onnx");
    std::fs::write(&model_path, model.encode_to_vec()).unwrap();
    let in_dir = dir.path().join("in");
    std::fs::create_dir(&in_dir).unwrap();
    for (k, t) in inputs.iter().enumerate() {
        if npy_inputs {
            std::fs::write(
                in_dir.join(format!("input_{k}.npy")),
                npy::encode(t).unwrap(),
            )
            .unwrap();
        } else {
            std::fs::write(
                in_dir.join(format!("input_{k}.pb")),
                encode_tensor(t, "x").unwrap(),
            )
            .unwrap();
        }
    }
    let out_dir = dir.path().join("out");
    let out = gsx(&[
        "run",
        path_str(&model_path),
        "--input-dir",
        path_str(&in_dir),
        "--output-dir",
        path_str(&out_dir),
    ]);
    if !out.status.success() {
        return Err(out);
    }
    let outputs = model.graph.as_ref().unwrap().output.len();
    Ok((0..outputs)
        .map(|k| read_tensor(&out_dir.join(format!("output_{k}.pb"))))
        .collect())
}

fn f32s(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), values.to_vec()).unwrap()
}

fn i64s(shape: &[usize], values: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), values.to_vec()).unwrap()
}

#[test]
fn run_executes_a_model_of_each_op() {
    let data = f32s(&[3, 2], &[1.0, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let two = [("data", Some(DType::F32)), ("indices", Some(DType::I64))];
    let three = [
        ("data", Some(DType::F32)),
        ("indices", Some(DType::I64)),
        ("updates", Some(DType::F32)),
    ];
    // Gather, opset 13, ONNX example 1.
    let m = single_node_model("", "Gather", 13, &two, vec![int_attribute("axis", 0)]);
    let out = run_model(&m, &[data.clone(), i64s(&[2, 2], &[0, 1, 1, 2])], false).unwrap();
    assert_eq!(
        out[0],
        f32s(&[2, 2, 2], &[1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7])
    );
    // GatherElements, opset 11, ONNX example 1 shape.
    let m = single_node_model(
        "",
        "GatherElements",
        11,
        &two,
        vec![int_attribute("axis", 1)],
    );
    let out = run_model(&m, &[data.clone(), i64s(&[3, 1], &[1, 0, -1])], true).unwrap();
    assert_eq!(out[0], f32s(&[3, 1], &[1.2, 2.3, 5.7]));
    // Scatter (opset 9/10 name).
    let m = single_node_model("", "Scatter", 10, &three, vec![int_attribute("axis", 1)]);
    let out = run_model(
        &m,
        &[
            f32s(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            i64s(&[1, 2], &[1, 3]),
            f32s(&[1, 2], &[1.1, 2.1]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(out[0], f32s(&[1, 5], &[1.0, 1.1, 3.0, 2.1, 5.0]));
    // ScatterElements with add, opset 16.
    let m = single_node_model(
        "",
        "ScatterElements",
        16,
        &three,
        vec![
            int_attribute("axis", 1),
            string_attribute("reduction", "add"),
        ],
    );
    let out = run_model(
        &m,
        &[
            f32s(&[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            i64s(&[1, 2], &[1, 1]),
            f32s(&[1, 2], &[1.1, 2.1]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(
        out[0],
        f32s(&[1, 5], &[1.0, 2.0 + 1.1 + 2.1, 3.0, 4.0, 5.0])
    );
    // GatherND, opset 12 with batch_dims 1 (ONNX example 5).
    let m = single_node_model(
        "",
        "GatherND",
        12,
        &two,
        vec![int_attribute("batch_dims", 1)],
    );
    let out = run_model(
        &m,
        &[
            f32s(&[2, 2, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]),
            i64s(&[2, 1], &[1, 0]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(out[0], f32s(&[2, 2], &[2., 3., 4., 5.]));
    // ScatterND, opset 18 with max.
    let m = single_node_model(
        "",
        "ScatterND",
        18,
        &three,
        vec![string_attribute("reduction", "max")],
    );
    let out = run_model(
        &m,
        &[
            f32s(&[4], &[1., 2., 3., 4.]),
            i64s(&[2, 1], &[3, 3]),
            f32s(&[2], &[9., 10.]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(out[0], f32s(&[4], &[1., 2., 3., 10.]));
    // TensorScatter, opset 24, with write_indices.
    let m = single_node_model(
        "",
        "TensorScatter",
        24,
        &[
            ("past", Some(DType::F32)),
            ("update", Some(DType::F32)),
            ("write", Some(DType::I64)),
        ],
        vec![int_attribute("axis", 1)],
    );
    let out = run_model(
        &m,
        &[
            f32s(&[1, 3], &[0., 0., 0.]),
            f32s(&[1, 1], &[5.]),
            i64s(&[1], &[2]),
        ],
        false,
    )
    .unwrap();
    assert_eq!(out[0], f32s(&[1, 3], &[0., 0., 5.]));
}

#[test]
fn run_executes_the_custom_domain_ops() {
    let two = [("x", None), ("i", None)];
    // mindspore::MsGather with batch_dims.
    let m = single_node_model(
        "mindspore",
        "MsGather",
        13,
        &two,
        vec![int_attribute("axis", 1), int_attribute("batch_dims", 1)],
    );
    let data = i64s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let out = run_model(&m, &[data.clone(), i64s(&[2, 1], &[2, 0])], false).unwrap();
    assert_eq!(out[0], i64s(&[2, 1], &[3, 4]));
    // MindSpore refuses negative indices.
    let err = run_model(&m, &[data.clone(), i64s(&[2, 1], &[-1, 0])], false).unwrap_err();
    assert_eq!(err.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&err.stderr).contains("out_of_bounds"));
    // mindspore::MsGatherD(input, index), attribute dim.
    let m = single_node_model(
        "mindspore",
        "MsGatherD",
        13,
        &two,
        vec![int_attribute("dim", 1)],
    );
    let out = run_model(&m, &[data.clone(), i64s(&[2, 2], &[0, 0, 1, 0])], false).unwrap();
    assert_eq!(out[0], i64s(&[2, 2], &[1, 1, 5, 4]));
    // directml::DmlGatherElements: the seed's UINT32 example at the default 4.1 ...
    let m = single_node_model(
        "directml",
        "DmlGatherElements",
        13,
        &two,
        vec![int_attribute("axis", 0)],
    );
    let input = f32s(&[3, 3], &[0., 1., 2., 3., 4., 5., 6., 7., 8.]);
    let idx = Tensor::new(vec![2, 3], vec![3u32, 1, 2, 2, 0, 1]);
    let idx = idx.unwrap();
    // index 3 is out of range for axis 0 of size 3.
    let err = run_model(&m, &[input.clone(), idx], false).unwrap_err();
    assert_eq!(err.status.code(), Some(1));
    let ok_idx = Tensor::new(vec![3, 3], vec![2u32, 1, 0, 0, 2, 1, 1, 0, 2]).unwrap();
    let out = run_model(&m, &[input.clone(), ok_idx.clone()], false).unwrap();
    assert_eq!(out[0], f32s(&[3, 3], &[6., 4., 2., 0., 7., 5., 3., 1., 8.]));
    // ... and at feature level 2.1, which only takes rank 4.
    let m = single_node_model(
        "directml",
        "DmlGatherElements",
        13,
        &two,
        vec![
            int_attribute("axis", 0),
            string_attribute("feature_level", "2.1"),
        ],
    );
    let err = run_model(&m, &[input, ok_idx], false).unwrap_err();
    assert_eq!(err.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("rank_mismatch"),
        "{}",
        String::from_utf8_lossy(&err.stderr)
    );
}

fn expect_failure(out: &Output, code: i32, kind: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(kind), "{kind} not in {stderr:?}");
}

#[test]
fn each_error_kind_gives_its_exit_status_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, t: &Tensor| {
        let p = dir.path().join(name);
        std::fs::write(&p, npy::encode(t).unwrap()).unwrap();
        p
    };
    let data = write("data.npy", &f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]));
    let out = dir.path().join("out.npy");
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-o", path_str(&out)]);
        gsx(&all)
    };
    let bad_index = write("bad.npy", &i64s(&[1], &[7]));
    expect_failure(
        &run(&[
            "gather",
            path_str(&data),
            path_str(&bad_index),
            "--axis",
            "1",
        ]),
        1,
        "out_of_bounds",
    );
    expect_failure(
        &run(&[
            "gather",
            path_str(&data),
            path_str(&bad_index),
            "--axis",
            "2",
        ]),
        1,
        "bad_axis",
    );
    let float_index = write("fidx.npy", &f32s(&[1], &[0.]));
    expect_failure(
        &run(&["gather", path_str(&data), path_str(&float_index)]),
        1,
        "bad_dtype",
    );
    let rank1 = write("r1.npy", &i64s(&[2], &[0, 1]));
    expect_failure(
        &run(&["gather-elements", path_str(&data), path_str(&rank1)]),
        1,
        "rank_mismatch",
    );
    let idx = write("idx.npy", &i64s(&[1, 2], &[0, 1]));
    let upd = write("upd.npy", &f32s(&[1, 3], &[0., 0., 0.]));
    expect_failure(
        &run(&[
            "scatter-elements",
            path_str(&data),
            path_str(&idx),
            path_str(&upd),
        ]),
        1,
        "shape_mismatch",
    );
    // A reduction the profile's opset does not have.
    let upd_ok = write("upd_ok.npy", &f32s(&[1, 2], &[0., 0.]));
    expect_failure(
        &run(&[
            "scatter-elements",
            path_str(&data),
            path_str(&idx),
            path_str(&upd_ok),
            "--reduction",
            "max",
            "--profile",
            "onnx:16",
        ]),
        1,
        "bad_reduction",
    );
    // Unsupported: a datetime .npy, a bf16 result written to .npy, an unknown op.
    let datetime = fixture("reader", "datetime.npy");
    expect_failure(
        &run(&["gather", path_str(&datetime), path_str(&rank1)]),
        77,
        "unsupported",
    );
    let bf16_pb = dir.path().join("bf16.pb");
    std::fs::write(
        &bf16_pb,
        encode_tensor(&Tensor::from_vec(vec![gatherscatter::bf16::ONE]), "b").unwrap(),
    )
    .unwrap();
    let zero = write("zero.npy", &i64s(&[1], &[0]));
    expect_failure(
        &run(&["gather", path_str(&bf16_pb), path_str(&zero)]),
        77,
        "unsupported",
    );
    let m = single_node_model("", "Relu", 13, &[("x", None)], vec![]);
    let model_path = dir.path().join("relu.onnx");
    std::fs::write(&model_path, m.encode_to_vec()).unwrap();
    let o = gsx(&[
        "run",
        path_str(&model_path),
        "--output-dir",
        path_str(dir.path()),
    ]);
    expect_failure(&o, 77, "Relu");
    // An attribute the op does not have is unsupported, not ignored.
    let m = single_node_model(
        "",
        "Gather",
        13,
        &[("x", None), ("i", None)],
        vec![int_attribute("axis", 0), int_attribute("sorted", 1)],
    );
    std::fs::write(&model_path, m.encode_to_vec()).unwrap();
    let o = gsx(&[
        "run",
        path_str(&model_path),
        "--output-dir",
        path_str(dir.path()),
    ]);
    expect_failure(&o, 77, "\"sorted\"");
    // Truncated files are rejected naming the file.
    let truncated = fixture("reader", "truncated.npy");
    let o = run(&["gather", path_str(&truncated), path_str(&zero)]);
    expect_failure(&o, 1, "truncated.npy");
    let pb = dir.path().join("short.pb");
    let bytes = encode_tensor(&f32s(&[4], &[1., 2., 3., 4.]), "t").unwrap();
    std::fs::write(&pb, &bytes[..bytes.len() - 3]).unwrap();
    expect_failure(
        &run(&["gather", path_str(&pb), path_str(&zero)]),
        1,
        "short.pb",
    );
    // Usage errors.
    expect_failure(
        &gsx(&["gather", path_str(&data), path_str(&zero)]),
        2,
        "--output",
    );
    expect_failure(
        &gsx(&[
            "gather",
            path_str(&data),
            path_str(&zero),
            "-o",
            path_str(&data),
        ]),
        2,
        "refusing to overwrite",
    );
    assert!(!out.exists(), "no output file is written on failure");
}

#[test]
fn conformance_passes_the_builtin_corpus() {
    let out = gsx(&["conformance"]);
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().unwrap();
    assert_eq!(last, "29 passed, 0 failed", "{stdout}");
    for op in [
        "Gather",
        "GatherElements",
        "GatherND",
        "Scatter",
        "ScatterElements",
        "ScatterND",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(op)),
            "{op} row in {stdout}"
        );
    }
}

#[test]
fn a_tuning_variable_that_does_not_parse_stops_gsx_before_any_work() {
    let out = Command::new(env!("CARGO_BIN_EXE_gsx"))
        .env("GATHERSCATTER_TUNING", "word_gather=fast")
        .arg("conformance")
        .output()
        .expect("gsx runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("GATHERSCATTER_TUNING=\"word_gather=fast\""),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn conformance_on_a_directory_reports_a_wrong_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("test_gather_wrong");
    let set = case.join("test_data_set_0");
    std::fs::create_dir_all(&set).unwrap();
    let m = single_node_model(
        "",
        "Gather",
        13,
        &[("x", Some(DType::F32)), ("i", Some(DType::I64))],
        vec![],
    );
    std::fs::write(case.join("model.onnx"), m.encode_to_vec()).unwrap();
    std::fs::write(
        set.join("input_0.pb"),
        encode_tensor(&f32s(&[2], &[1., 2.]), "x").unwrap(),
    )
    .unwrap();
    std::fs::write(
        set.join("input_1.pb"),
        encode_tensor(&i64s(&[1], &[1]), "i").unwrap(),
    )
    .unwrap();
    std::fs::write(
        set.join("output_0.pb"),
        encode_tensor(&f32s(&[1], &[1.]), "y").unwrap(),
    )
    .unwrap();
    let out = gsx(&["conformance", path_str(dir.path())]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("FAIL  test_gather_wrong"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}

#[test]
fn headers_that_claim_more_data_than_the_file_holds_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // A .npy header claiming a billion float64 over 16 bytes of data.
    let mut bytes = npy::encode(&f32s(&[4], &[1., 2., 3., 4.])).unwrap();
    let header_end = bytes.iter().position(|&b| b == b'\n').unwrap();
    let header = String::from_utf8(bytes[10..header_end].to_vec()).unwrap();
    let claimed = header.replace("(4,)", "(999999999,)").replace("<f4", "<f8");
    let claimed = format!("{:<width$}", claimed.trim_end(), width = header_end - 10);
    bytes.splice(10..header_end, claimed.bytes());
    let big = dir.path().join("claims_more.npy");
    std::fs::write(&big, &bytes).unwrap();
    let zero = dir.path().join("zero.npy");
    std::fs::write(&zero, npy::encode(&i64s(&[1], &[0])).unwrap()).unwrap();
    let out = dir.path().join("out.npy");
    let o = gsx(&[
        "gather",
        path_str(&big),
        path_str(&zero),
        "-o",
        path_str(&out),
    ]);
    expect_failure(&o, 1, "claims_more.npy");
    assert!(String::from_utf8_lossy(&o.stderr).contains("999999999"));
    // A model whose initializer claims more elements than its raw_data holds.
    let mut m = single_node_model("", "Gather", 13, &[("x", None), ("i", None)], vec![]);
    let mut init = gatherscatter_onnx::tensor_to_proto(
        &i64s(&[1], &[0]),
        "i",
        gatherscatter_onnx::Encoding::Raw,
    )
    .unwrap();
    init.dims = vec![1 << 40];
    m.graph.as_mut().unwrap().initializer.push(init);
    let model_path = dir.path().join("lying_initializer.onnx");
    std::fs::write(&model_path, m.encode_to_vec()).unwrap();
    let o = gsx(&[
        "run",
        path_str(&model_path),
        "--output-dir",
        path_str(dir.path()),
    ]);
    expect_failure(&o, 1, "lying_initializer.onnx");
    assert!(String::from_utf8_lossy(&o.stderr).contains("raw_data holds 8 bytes"));
}

#[test]
fn a_failed_call_leaves_an_existing_output_and_the_inputs_intact() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.npy");
    let data_bytes = npy::encode(&f32s(&[2, 2], &[1., 2., 3., 4.])).unwrap();
    std::fs::write(&data, &data_bytes).unwrap();
    let idx = dir.path().join("idx.npy");
    std::fs::write(&idx, npy::encode(&i64s(&[2, 2], &[0, 9, 1, 0])).unwrap()).unwrap();
    let upd = dir.path().join("upd.npy");
    std::fs::write(
        &upd,
        npy::encode(&f32s(&[2, 2], &[5., 6., 7., 8.])).unwrap(),
    )
    .unwrap();
    let out = dir.path().join("out.npy");
    std::fs::write(&out, b"previous result").unwrap();
    let o = gsx(&[
        "scatter-elements",
        path_str(&data),
        path_str(&idx),
        path_str(&upd),
        "--axis",
        "1",
        "-o",
        path_str(&out),
    ]);
    expect_failure(&o, 1, "out_of_bounds");
    assert_eq!(std::fs::read(&out).unwrap(), b"previous result");
    assert_eq!(std::fs::read(&data).unwrap(), data_bytes);
    // Writing the result over an input is refused, whatever the spelling.
    let dotted = dir.path().join(".").join("data.npy");
    let o = gsx(&[
        "gather",
        path_str(&data),
        path_str(&idx),
        "-o",
        path_str(&dotted),
    ]);
    expect_failure(&o, 2, "refusing to overwrite");
    assert_eq!(std::fs::read(&data).unwrap(), data_bytes);
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn max_memory_is_accepted_anywhere_and_changes_no_result_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixture("float32", "data.npy");
    let indices = fixture("float32", "gather_indices.npy");
    let mut outputs = Vec::new();
    for (k, flags) in [&[][..], &["--max-memory", "64M"][..]].iter().enumerate() {
        let out = dir.path().join(format!("out{k}.npy"));
        let mut args: Vec<&str> = flags.to_vec();
        args.extend([
            "gather",
            path_str(&data),
            path_str(&indices),
            "-o",
            path_str(&out),
        ]);
        assert_success(&gsx(&args));
        outputs.push(read_tensor(&out));
    }
    let after = dir.path().join("after.npy");
    let args = [
        "gather",
        path_str(&data),
        path_str(&indices),
        "-o",
        path_str(&after),
        "--max-memory",
        "1G",
    ];
    assert_success(&gsx(&args));
    outputs.push(read_tensor(&after));
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);
    let bad = gsx(&[
        "--max-memory",
        "4X",
        "gather",
        path_str(&data),
        path_str(&indices),
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn tensor_scatter_writes_each_batch_at_its_index_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, t: &Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(t).unwrap()).unwrap();
        path
    };
    let cache = write("cache.npy", &f32s(&[2, 4, 1], &[0.0; 8]));
    let update = write("update.npy", &f32s(&[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]));
    let at = write("at.npy", &i64s(&[2], &[1, 3]));
    let out = dir.path().join("out.npy");
    let run = |extra: &[&str]| {
        let mut args = vec!["tensor-scatter", path_str(&cache), path_str(&update)];
        args.extend_from_slice(extra);
        args.extend(["-o", path_str(&out)]);
        gsx(&args)
    };
    // Circular: batch 1 writes positions 3 and 0.
    assert_success(&run(&[path_str(&at), "--mode", "circular"]));
    assert_eq!(
        read_tensor(&out),
        f32s(&[2, 4, 1], &[0.0, 1.0, 2.0, 0.0, 4.0, 0.0, 0.0, 3.0])
    );
    // Linear: batch 1's update would end past the cache.
    let failed = run(&[path_str(&at)]);
    expect_failure(&failed, 1, "out_of_bounds");
    // Without write indices every batch writes at 0.
    assert_success(&run(&["--axis", "1"]));
    assert_eq!(
        read_tensor(&out),
        f32s(&[2, 4, 1], &[1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0])
    );
}

/// `gsx scatter-reduce` on .npy files: PyTorch's documented example, with
/// `--include-self false`, and a profile that does not define the op.
#[test]
fn scatter_reduce_runs_pytorchs_example_and_refuses_onnx_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensor: Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
        path
    };
    let data = write("data.npy", Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]));
    let index = write("index.npy", Tensor::from_vec(vec![0i64, 1, 0, 1, 2, 1]));
    let src = write(
        "src.npy",
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    let out_path = dir.path().join("out.npy");
    let inputs = [path_str(&data), path_str(&index), path_str(&src)];
    let cases: [(&[&str], [f32; 4]); 3] = [
        (&["--reduce", "sum"], [5.0, 14.0, 8.0, 4.0]),
        (
            &["--reduce", "sum", "--include-self", "false"],
            [4.0, 12.0, 5.0, 4.0],
        ),
        (
            &["--reduce", "mean", "--include-self", "false"],
            [2.0, 4.0, 5.0, 4.0],
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["scatter-reduce"];
        args.extend(inputs);
        args.extend(flags);
        args.extend(["-o", path_str(&out_path)]);
        assert_success(&gsx(&args));
        assert_eq!(read_tensor(&out_path), Tensor::from_vec(expected.to_vec()));
    }
    let mut args = vec!["scatter-reduce"];
    args.extend(inputs);
    args.extend([
        "--reduce",
        "amax",
        "--profile",
        "onnx:18",
        "-o",
        path_str(&out_path),
    ]);
    let refused = gsx(&args);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("does not define it"), "{stderr}");
    let mut args = vec!["scatter-reduce"];
    args.extend(inputs);
    args.extend(["--reduce", "median", "-o", path_str(&out_path)]);
    assert!(!gsx(&args).status.success());
}

/// `gsx segment-csr` / `segment-coo` on .npy files: the values, `--fill` in
/// src's dtype, the winning rows with `--arg-output`, and bad boundaries
/// refused with nothing written.
#[test]
fn segment_subcommands_reduce_write_winning_rows_and_refuse_bad_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensor: Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
        path
    };
    let src = write(
        "src.npy",
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]),
    );
    let indptr = write("indptr.npy", Tensor::from_vec(vec![0i64, 2, 2, 5]));
    let ids = write("ids.npy", Tensor::from_vec(vec![0u8, 0, 2, 2, 2]));
    let (out, arg) = (dir.path().join("out.npy"), dir.path().join("arg.npy"));
    let run = |command: &str, boundaries: &Path, flags: &[&str]| {
        let mut args = vec![command, path_str(&src), path_str(boundaries)];
        args.extend(flags);
        args.extend(["-o", path_str(&out)]);
        gsx(&args)
    };
    assert_success(&run("segment-csr", &indptr, &[]));
    assert_eq!(read_tensor(&out), Tensor::from_vec(vec![3.0f32, 0.0, 12.0]));
    let flags = [
        "--reduce",
        "max",
        "--fill",
        "-inf",
        "--arg-output",
        path_str(&arg),
    ];
    assert_success(&run("segment-coo", &ids, &flags));
    assert_eq!(
        read_tensor(&out),
        Tensor::from_vec(vec![2.0f32, f32::NEG_INFINITY, 5.0])
    );
    assert_eq!(read_tensor(&arg), Tensor::from_vec(vec![1i64, 5, 4]));
    // A fill the dtype cannot hold, winning rows of a sum: refused.
    let failed = run("segment-csr", &indptr, &["--fill", "x"]);
    expect_failure(&failed, 1, "bad_attribute");
    let failed = run("segment-csr", &indptr, &["--arg-output", path_str(&arg)]);
    expect_failure(&failed, 1, "bad_reduction");
    // Decreasing boundaries: an error naming the entry, no output written.
    std::fs::remove_file(&out).unwrap();
    let bad = write("bad.npy", Tensor::from_vec(vec![0i64, 3, 2]));
    let failed = run("segment-csr", &bad, &[]);
    expect_failure(&failed, 1, "bad_segments");
    assert!(String::from_utf8_lossy(&failed.stderr).contains("indptr decreases at indptr[2]"));
    assert!(!out.exists());
    // The argument output may not replace an input or the output.
    let flags = ["--reduce", "max", "--arg-output", path_str(&out)];
    expect_failure(&run("segment-csr", &indptr, &flags), 2, "usage");
}

/// `gsx embedding-bag` on .npy files: PyTorch's example with offsets, the
/// winning rows of max, per-sample weights, and offsets that leave indices
/// out refused with nothing written.
#[test]
fn embedding_bag_runs_pytorchs_example_and_refuses_offsets_that_leave_indices_out() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensor: Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
        path
    };
    let weight = Tensor::new(vec![4, 3], (0..12).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
    let weight = write("weight.npy", weight);
    let indices = write("indices.npy", Tensor::from_vec(vec![0i64, 2, 1, 3, 2]));
    let offsets = write("offsets.npy", Tensor::from_vec(vec![0i32, 2, 2]));
    let psw = write(
        "psw.npy",
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0]),
    );
    let (out, arg) = (dir.path().join("out.npy"), dir.path().join("arg.npy"));
    let run = |flags: &[&str]| {
        let mut args = vec!["embedding-bag", path_str(&weight), path_str(&indices)];
        args.extend(flags);
        args.extend(["-o", path_str(&out)]);
        gsx(&args)
    };
    let bags = |values: [f32; 9]| Tensor::new(vec![3, 3], values.to_vec()).unwrap();
    assert_success(&run(&["--offsets", path_str(&offsets), "--mode", "sum"]));
    assert_eq!(
        read_tensor(&out),
        bags([6., 8., 10., 0., 0., 0., 18., 21., 24.])
    );
    let flags = [
        "--offsets",
        path_str(&offsets),
        "--mode",
        "max",
        "--arg-output",
        path_str(&arg),
    ];
    assert_success(&run(&flags));
    assert_eq!(
        read_tensor(&out),
        bags([6., 7., 8., 0., 0., 0., 9., 10., 11.])
    );
    assert_eq!(
        read_tensor(&arg),
        Tensor::new(vec![3, 3], vec![2i64, 2, 2, 4, 4, 4, 3, 3, 3]).unwrap()
    );
    let flags = [
        "--offsets",
        path_str(&offsets),
        "--mode",
        "sum",
        "--per-sample-weights",
        path_str(&psw),
    ];
    assert_success(&run(&flags));
    assert_eq!(
        read_tensor(&out),
        bags([12., 15., 18., 0., 0., 0., 75., 87., 99.])
    );
    std::fs::remove_file(&out).unwrap();
    let flags = ["--offsets", path_str(&offsets), "--include-last-offset"];
    let failed = run(&flags);
    expect_failure(&failed, 1, "bad_segments");
    assert!(!out.exists());
    expect_failure(&run(&[]), 1, "shape_mismatch");
}

/// `gsx index-select`, `index-add` and `index-copy`: PyTorch's examples on
/// .npy files, and an out-of-range index refused.
#[test]
fn index_subcommands_run_pytorchs_examples() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensor: Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
        path
    };
    let data = write(
        "data.npy",
        Tensor::new(vec![5, 3], vec![1.0f32; 15]).unwrap(),
    );
    let index = write("index.npy", Tensor::from_vec(vec![0i64, 4, 2]));
    let source = (1..=9).map(|v| v as f32).collect::<Vec<_>>();
    let source = write("source.npy", Tensor::new(vec![3, 3], source).unwrap());
    let out = dir.path().join("out.npy");
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-o", path_str(&out)]);
        gsx(&all)
    };
    let (d, i, s) = (path_str(&data), path_str(&index), path_str(&source));
    assert_success(&run(&["index-add", d, i, s]));
    let added: [f32; 15] = [2., 3., 4., 1., 1., 1., 8., 9., 10., 1., 1., 1., 5., 6., 7.];
    assert_eq!(
        read_tensor(&out),
        Tensor::new(vec![5, 3], added.to_vec()).unwrap()
    );
    assert_success(&run(&["index-copy", d, i, s]));
    let copied: [f32; 15] = [1., 2., 3., 1., 1., 1., 7., 8., 9., 1., 1., 1., 4., 5., 6.];
    assert_eq!(
        read_tensor(&out),
        Tensor::new(vec![5, 3], copied.to_vec()).unwrap()
    );
    let columns = write("columns.npy", Tensor::from_vec(vec![2i64, 0]));
    assert_success(&run(&["index-select", s, path_str(&columns), "--dim", "1"]));
    let selected = Tensor::new(vec![3, 2], vec![3.0f32, 1., 6., 4., 9., 7.]).unwrap();
    assert_eq!(read_tensor(&out), selected);
    expect_failure(&run(&["index-select", s, i]), 1, "out_of_bounds");
}

/// `--mode` on the gathers and scatters: clip, fill with `--fill-value` in
/// data's dtype, drop; a mode an op does not take, and a fill value
/// without fill, refused.
#[test]
fn mode_flags_change_what_an_out_of_range_index_does() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensor: Tensor| {
        let path = dir.path().join(name);
        std::fs::write(&path, npy::encode(&tensor).unwrap()).unwrap();
        path
    };
    let data = write("data.npy", Tensor::from_vec(vec![10i32, 20, 30]));
    let indices = write("indices.npy", Tensor::from_vec(vec![-4i64, 1, 5]));
    let updates = write("updates.npy", Tensor::from_vec(vec![1i32, 2, 3]));
    let out = dir.path().join("out.npy");
    let run = |command: &str, extra: &[&Path], flags: &[&str]| {
        let mut args = vec![command, path_str(&data), path_str(&indices)];
        args.extend(extra.iter().map(|p| path_str(p)));
        args.extend(flags);
        args.extend(["-o", path_str(&out)]);
        gsx(&args)
    };
    assert_success(&run("gather", &[], &["--mode", "clip"]));
    assert_eq!(read_tensor(&out), Tensor::from_vec(vec![10i32, 20, 30]));
    assert_success(&run(
        "gather",
        &[],
        &["--mode", "fill", "--fill-value", "-1"],
    ));
    assert_eq!(read_tensor(&out), Tensor::from_vec(vec![-1i32, 20, -1]));
    assert_success(&run("scatter-elements", &[&updates], &["--mode", "drop"]));
    assert_eq!(read_tensor(&out), Tensor::from_vec(vec![10i32, 2, 30]));
    expect_failure(&run("gather", &[], &["--mode", "drop"]), 1, "bad_attribute");
    let flags = ["--mode", "clip", "--fill-value", "0"];
    expect_failure(&run("gather", &[], &flags), 1, "bad_attribute");
    expect_failure(&run("gather", &[], &[]), 1, "out_of_bounds");
}
