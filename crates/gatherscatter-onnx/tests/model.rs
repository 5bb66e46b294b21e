//! Graph loading and execution: order, initializers, Constant, opset
//! validation, and the errors for malformed or unsupported graphs.

use gatherscatter::{DType, Tensor, TensorView};
use gatherscatter_onnx::builder::{int_attribute, single_node_model, string_attribute, value_info};
use gatherscatter_onnx::proto::attribute_proto::AttributeType;
use gatherscatter_onnx::proto::{AttributeProto, ModelProto, NodeProto};
use gatherscatter_onnx::{tensor_to_proto, Encoding, Model, OnnxError};

fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        op_type: Some(op.to_string()),
        attribute: attrs,
        ..NodeProto::default()
    }
}

fn two_input_model(opset: u32) -> ModelProto {
    single_node_model(
        "",
        "Gather",
        opset,
        &[("data", Some(DType::F32)), ("indices", Some(DType::I64))],
        vec![],
    )
}

fn run(model: &Model, inputs: &[Tensor]) -> Result<Vec<Tensor>, OnnxError> {
    let views: Vec<TensorView<'_>> = inputs.iter().map(TensorView::from).collect();
    model.run(&views)
}

#[test]
fn nodes_run_in_dependency_order_with_initializers_and_constants() {
    // y = Gather(GatherElements(data, c), idx) with the nodes listed backwards,
    // `c` from a Constant node and `idx` an initializer.
    let mut m = two_input_model(13);
    let graph = m.graph.as_mut().unwrap();
    let c = Tensor::new(vec![1, 2], vec![1i64, 0]).unwrap();
    graph.node = vec![
        node(
            "Gather",
            &["ge", "idx"],
            "y",
            vec![int_attribute("axis", 1)],
        ),
        node(
            "GatherElements",
            &["data", "c"],
            "ge",
            vec![int_attribute("axis", 1)],
        ),
        node(
            "Constant",
            &[],
            "c",
            vec![AttributeProto {
                name: Some("value".into()),
                r#type: Some(AttributeType::Tensor as i32),
                t: Some(tensor_to_proto(&c, "c", Encoding::TypedFields).unwrap()),
                ..AttributeProto::default()
            }],
        ),
    ];
    graph.input.truncate(1);
    graph.initializer =
        vec![tensor_to_proto(&Tensor::from_vec(vec![1i64, 1, 0]), "idx", Encoding::Raw).unwrap()];
    let model = Model::from_proto(&m).unwrap();
    assert_eq!(model.inputs().len(), 1);
    let data = Tensor::new(vec![1, 3], vec![10.0f32, 20.0, 30.0]).unwrap();
    let out = run(&model, &[data]).unwrap();
    assert_eq!(
        out[0],
        Tensor::new(vec![1, 3], vec![10.0f32, 10.0, 20.0]).unwrap()
    );
}

#[test]
fn each_node_is_validated_under_the_models_opset() {
    // GatherND's batch_dims exists from opset 12.
    let m = single_node_model(
        "",
        "GatherND",
        11,
        &[("x", None), ("i", None)],
        vec![int_attribute("batch_dims", 1)],
    );
    let model = Model::from_proto(&m).unwrap();
    let x = Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let i = Tensor::new(vec![2, 1], vec![0i64, 1]).unwrap();
    let e = run(&model, &[x.clone(), i.clone()]).unwrap_err();
    assert_eq!(e.kind_name(), "bad_attribute", "{e}");
    let m = single_node_model(
        "",
        "GatherND",
        12,
        &[("x", None), ("i", None)],
        vec![int_attribute("batch_dims", 1)],
    );
    assert!(run(&Model::from_proto(&m).unwrap(), &[x, i]).is_ok());
    // ScatterElements reduction max needs opset 18.
    let three = [("x", None), ("i", None), ("u", None)];
    let m = single_node_model(
        "",
        "ScatterElements",
        16,
        &three,
        vec![string_attribute("reduction", "max")],
    );
    let model = Model::from_proto(&m).unwrap();
    let e = run(
        &model,
        &[
            Tensor::from_vec(vec![1.0f32]),
            Tensor::from_vec(vec![0i64]),
            Tensor::from_vec(vec![2.0f32]),
        ],
    )
    .unwrap_err();
    assert_eq!(e.kind_name(), "bad_reduction", "{e}");
    // Gather-1 has no bf16; Gather-13 has.
    let bf = Tensor::from_vec(vec![gatherscatter::bf16::ONE]);
    let idx = Tensor::from_vec(vec![0i64]);
    let m = single_node_model("", "Gather", 11, &[("x", None), ("i", None)], vec![]);
    assert_eq!(
        run(&Model::from_proto(&m).unwrap(), &[bf.clone(), idx.clone()])
            .unwrap_err()
            .kind_name(),
        "bad_dtype"
    );
    let m = single_node_model("", "Gather", 13, &[("x", None), ("i", None)], vec![]);
    assert!(run(&Model::from_proto(&m).unwrap(), &[bf, idx]).is_ok());
}

#[test]
fn inputs_are_checked_against_the_declared_types() {
    let model = Model::from_proto(&two_input_model(13)).unwrap();
    let e = run(
        &model,
        &[Tensor::from_vec(vec![1i32]), Tensor::from_vec(vec![0i64])],
    )
    .unwrap_err();
    assert_eq!(e.kind_name(), "bad_dtype");
    assert!(e.to_string().contains("\"data\" is declared float"), "{e}");
    let e = run(&model, &[Tensor::from_vec(vec![1.0f32])]).unwrap_err();
    assert!(e.to_string().contains("takes 2 inputs"), "{e}");
}

#[test]
fn malformed_and_unsupported_graphs_are_named() {
    // A cycle.
    let mut m = two_input_model(13);
    let g = m.graph.as_mut().unwrap();
    g.node = vec![
        node("Gather", &["data", "b"], "a", vec![]),
        node("Gather", &["a", "indices"], "b", vec![]),
    ];
    g.output = vec![value_info("a", None)];
    assert!(Model::from_proto(&m)
        .unwrap_err()
        .to_string()
        .contains("cycle"));
    // A dangling input.
    let mut m = two_input_model(13);
    m.graph.as_mut().unwrap().node[0].input[1] = "nowhere".into();
    assert!(Model::from_proto(&m)
        .unwrap_err()
        .to_string()
        .contains("\"nowhere\""));
    // An op outside the family, an unknown domain, an unknown attribute.
    let m = single_node_model("", "MatMul", 13, &[("a", None), ("b", None)], vec![]);
    let e = Model::from_proto(&m).unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("MatMul"),
        "{e}"
    );
    let m = single_node_model(
        "com.example",
        "Gather",
        13,
        &[("a", None), ("b", None)],
        vec![],
    );
    assert!(Model::from_proto(&m)
        .unwrap_err()
        .to_string()
        .contains("com.example::Gather"));
    let m = single_node_model(
        "",
        "GatherElements",
        13,
        &[("a", None), ("b", None)],
        vec![int_attribute("axes", 0)],
    );
    let e = Model::from_proto(&m).unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("\"axes\""),
        "{e}"
    );
    // A wrongly typed attribute is a bad attribute.
    let m = single_node_model(
        "",
        "Gather",
        13,
        &[("a", None), ("b", None)],
        vec![string_attribute("axis", "0")],
    );
    assert_eq!(
        Model::from_proto(&m).unwrap_err().kind_name(),
        "bad_attribute"
    );
    // Wrong arity.
    let m = single_node_model("", "ScatterND", 13, &[("a", None), ("b", None)], vec![]);
    assert!(Model::from_proto(&m)
        .unwrap_err()
        .to_string()
        .contains("takes 3"));
    // No default-domain opset.
    let mut m = two_input_model(13);
    m.opset_import.clear();
    assert!(Model::from_proto(&m)
        .unwrap_err()
        .to_string()
        .contains("imports no opset"));
}

#[test]
fn directml_feature_level_defaults_to_4_1() {
    let two = [("x", None), ("i", None)];
    let m = single_node_model(
        "directml",
        "DmlGatherElements",
        13,
        &two,
        vec![int_attribute("axis", 1)],
    );
    let model = Model::from_proto(&m).unwrap();
    // Rank 2 with uint64 indices and f64 data: only valid from 4.1.
    let x = Tensor::new(vec![1, 2], vec![1.0f64, 2.0]).unwrap();
    let i = Tensor::new(vec![1, 2], vec![1u64, 0]).unwrap();
    assert_eq!(
        run(&model, &[x.clone(), i.clone()]).unwrap()[0],
        Tensor::new(vec![1, 2], vec![2.0f64, 1.0]).unwrap()
    );
    let m = single_node_model(
        "directml",
        "DmlGatherElements",
        13,
        &two,
        vec![
            int_attribute("axis", 1),
            string_attribute("feature_level", "3.0"),
        ],
    );
    let e = run(&Model::from_proto(&m).unwrap(), &[x, i]).unwrap_err();
    assert_eq!(e.kind_name(), "bad_dtype", "{e}");
}

#[test]
fn arbitrary_bytes_as_a_model_are_an_error_not_a_panic() {
    for bytes in [
        &b""[..],
        b"\x08",
        b"\x3a\x02\x0a\x00",
        b"\xff\xff\xff\xff",
        b"\x3a\x06\x0a\x04\x0a\x01a\x12",
    ] {
        let _ = Model::from_bytes(bytes);
    }
    assert!(
        Model::from_bytes(b"").is_err(),
        "an empty model has no graph"
    );
}

#[test]
fn a_data_set_with_two_files_for_one_input_is_refused() {
    use gatherscatter_onnx::conformance::{CaseFile, DataSet};
    let file = |name: &str| CaseFile {
        name: name.to_string(),
        bytes: Vec::new(),
    };
    let err = DataSet::from_files(
        "test_data_set_0".into(),
        vec![file("input_0.pb"), file("input_00.pb"), file("output_0.pb")],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "test_data_set_0: input_0.pb and input_00.pb both give input_0"
    );
}

#[test]
fn intermediates_are_dropped_after_their_last_reader_and_outputs_stay_right() {
    // a -> b -> c -> y in a chain, plus `b` also a graph output, listed
    // twice: every value must still come out right while the chain's dead
    // intermediates are dropped as it goes.
    let mut m = two_input_model(13);
    let graph = m.graph.as_mut().unwrap();
    graph.node = vec![
        node("Gather", &["data", "indices"], "b", vec![]),
        node("Gather", &["b", "indices"], "c", vec![]),
        node("Gather", &["c", "indices"], "y", vec![]),
    ];
    graph.output = vec![
        value_info("y", Some(DType::F32)),
        value_info("b", Some(DType::F32)),
        value_info("b", Some(DType::F32)),
    ];
    let model = Model::from_proto(&m).unwrap();
    let data = Tensor::new(vec![3], vec![10.0f32, 20.0, 30.0]).unwrap();
    let indices = Tensor::new(vec![3], vec![2i64, 0, 1]).unwrap();
    let out = run(&model, &[data, indices]).unwrap();
    let b = Tensor::new(vec![3], vec![30.0f32, 10.0, 20.0]).unwrap();
    let y = Tensor::new(vec![3], vec![10.0f32, 20.0, 30.0]).unwrap();
    assert_eq!(out, vec![y, b.clone(), b]);
}
