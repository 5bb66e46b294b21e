//! Small helpers to build single-node models, for tests, examples and tools.

use gatherscatter::DType;
use prost::Message;

use crate::proto::attribute_proto::AttributeType;
use crate::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use crate::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TypeProto,
    ValueInfoProto,
};

/// An integer attribute.
pub fn int_attribute(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..AttributeProto::default()
    }
}

/// A string attribute.
pub fn string_attribute(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec()),
        ..AttributeProto::default()
    }
}

/// A graph value declared with an element type and unknown shape.
pub fn value_info(name: &str, dtype: Option<DType>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: dtype.map(|d| TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(d.onnx_id()),
                shape: None,
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// A model with one node `domain::op_type` reading `inputs` (graph inputs of
/// the given declared dtypes, `None` for undeclared) and writing one output
/// `y`, importing `onnx_opset` for the default domain and version 1 for any
/// other domain.
pub fn single_node_model(
    domain: &str,
    op_type: &str,
    onnx_opset: u32,
    inputs: &[(&str, Option<DType>)],
    attributes: Vec<AttributeProto>,
) -> ModelProto {
    let node = NodeProto {
        input: inputs.iter().map(|(n, _)| n.to_string()).collect(),
        output: vec!["y".to_string()],
        name: Some(format!("{op_type}_node")),
        op_type: Some(op_type.to_string()),
        domain: Some(domain.to_string()),
        attribute: attributes,
        ..NodeProto::default()
    };
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(i64::from(onnx_opset)),
    }];
    if !domain.is_empty() {
        opset_import.push(OperatorSetIdProto {
            domain: Some(domain.to_string()),
            version: Some(1),
        });
    }
    ModelProto {
        ir_version: Some(10),
        producer_name: Some("gatherscatter-onnx".to_string()),
        opset_import,
        graph: Some(GraphProto {
            node: vec![node],
            name: Some(format!("{op_type}_graph")),
            input: inputs.iter().map(|&(n, d)| value_info(n, d)).collect(),
            output: vec![value_info("y", None)],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
}

/// A serialized one-node ONNX `Gather` model with inputs `data` (float) and
/// `indices` (int64), for examples.
pub fn gather_model_bytes(opset: u32, axis: i64) -> Vec<u8> {
    single_node_model(
        "",
        "Gather",
        opset,
        &[("data", Some(DType::F32)), ("indices", Some(DType::I64))],
        vec![int_attribute("axis", axis)],
    )
    .encode_to_vec()
}
