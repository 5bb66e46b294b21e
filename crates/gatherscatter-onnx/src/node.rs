//! One graph node: its op built from the node's attributes, validated under
//! the profile of its domain.

use gatherscatter::{
    DType, Error, FeatureLevel, Gather, GatherElements, GatherND, Op, Profile, Reduction, Scatter,
    ScatterElements, ScatterMode, ScatterND, Tensor, TensorScatter, TensorView,
};

use crate::error::{OnnxError, Result};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor_proto::tensor_from_proto;

/// The custom domain for MindSpore's `Tensor.gather` contracts.
pub const MINDSPORE_DOMAIN: &str = "mindspore";
/// The custom domain for DirectML's GatherElements contract.
pub const DIRECTML_DOMAIN: &str = "directml";
/// The DirectML feature level a `DmlGatherElements` node gets without a
/// `feature_level` attribute.
pub const DEFAULT_DIRECTML_FEATURE_LEVEL: &str = "4.1";

/// The ops a node can hold.
#[derive(Debug, Clone)]
pub(crate) enum NodeOp {
    /// One of the library's operators.
    Op(Op),
    /// The deprecated Scatter (opsets 9 and 11).
    Scatter(Scatter),
    Constant(Tensor),
}

/// A node ready to run.
#[derive(Debug, Clone)]
pub(crate) struct PreparedNode {
    /// The node's name, or `#N` for the N-th unnamed node.
    pub label: String,
    /// `op_type`, prefixed with `domain::` outside the default domain.
    pub op_name: String,
    pub op: NodeOp,
    /// Input names; `None` for an omitted optional input (empty name).
    pub inputs: Vec<Option<String>>,
    pub output: String,
}

/// The ops of each domain, for messages.
pub const SUPPORTED_OPS: &str = "Gather, GatherElements, Scatter, ScatterElements, GatherND, \
ScatterND, TensorScatter and Constant (ai.onnx); MsGather and MsGatherD (mindspore); \
DmlGatherElements (directml)";

impl PreparedNode {
    /// Build a node's op. `onnx_opset` is the model's default-domain version.
    pub fn prepare(node: &NodeProto, position: usize, onnx_opset: Option<u32>) -> Result<Self> {
        let label = match node.name() {
            "" => format!("#{position}"),
            name => name.to_string(),
        };
        let domain = match node.domain() {
            "ai.onnx" => "",
            d => d,
        };
        let op_type = node.op_type();
        let op_name = if domain.is_empty() {
            op_type.to_string()
        } else {
            format!("{domain}::{op_type}")
        };
        let mut attrs = Attributes::new(&node.attribute, &label, &op_name);
        let onnx_profile = || -> Result<Profile> {
            onnx_opset
                .map(|opset| Profile::Onnx { opset })
                .ok_or_else(|| {
                    OnnxError::Malformed(format!(
                        "node {label:?} ({op_name}) is in the default ONNX domain, but the model \
                     imports no opset for it"
                    ))
                })
        };
        let (op, arity) = match (domain, op_type) {
            ("", "Gather") => (
                NodeOp::Op(Op::Gather(
                    Gather::new(attrs.int("axis", 0)?).profile(onnx_profile()?),
                )),
                2..=2,
            ),
            ("", "GatherElements") => (
                NodeOp::Op(Op::GatherElements(
                    GatherElements::new(attrs.int("axis", 0)?).profile(onnx_profile()?),
                )),
                2..=2,
            ),
            ("", "Scatter") => (
                NodeOp::Scatter(Scatter::new(attrs.int("axis", 0)?).profile(onnx_profile()?)),
                3..=3,
            ),
            ("", "ScatterElements") => (
                NodeOp::Op(Op::ScatterElements(
                    ScatterElements::new(attrs.int("axis", 0)?)
                        .reduction(attrs.reduction()?)
                        .profile(onnx_profile()?),
                )),
                3..=3,
            ),
            ("", "GatherND") => (
                NodeOp::Op(Op::GatherND(
                    GatherND::new()
                        .batch_dims(attrs.count("batch_dims")?)
                        .profile(onnx_profile()?),
                )),
                2..=2,
            ),
            ("", "ScatterND") => (
                NodeOp::Op(Op::ScatterND(
                    ScatterND::new()
                        .reduction(attrs.reduction()?)
                        .profile(onnx_profile()?),
                )),
                3..=3,
            ),
            ("", "TensorScatter") => {
                let mode: ScatterMode = attrs
                    .string("mode", "linear")?
                    .parse()
                    .map_err(|e| attrs.op_error(e))?;
                (
                    NodeOp::Op(Op::TensorScatter(
                        TensorScatter::new()
                            .axis(attrs.int("axis", -2)?)
                            .mode(mode)
                            .profile(onnx_profile()?),
                    )),
                    2..=3,
                )
            }
            ("", "Constant") => (NodeOp::Constant(attrs.constant_value()?), 0..=0),
            (MINDSPORE_DOMAIN, "MsGather") => (
                NodeOp::Op(Op::Gather(
                    Gather::new(attrs.int("axis", 0)?)
                        .batch_dims(attrs.count("batch_dims")?)
                        .profile(Profile::MindSpore),
                )),
                2..=2,
            ),
            (MINDSPORE_DOMAIN, "MsGatherD") => (
                NodeOp::Op(Op::GatherElements(
                    GatherElements::new(attrs.int("dim", 0)?).profile(Profile::MindSpore),
                )),
                2..=2,
            ),
            (DIRECTML_DOMAIN, "DmlGatherElements") => {
                let level: FeatureLevel = attrs
                    .string("feature_level", DEFAULT_DIRECTML_FEATURE_LEVEL)?
                    .parse()
                    .map_err(|e| attrs.op_error(e))?;
                (
                    NodeOp::Op(Op::GatherElements(
                        GatherElements::new(attrs.int("axis", 0)?)
                            .profile(Profile::DirectMl { level }),
                    )),
                    2..=2,
                )
            }
            _ => {
                return Err(OnnxError::Unsupported(format!(
                "node {label:?}: op {op_name} is not supported; supported ops are {SUPPORTED_OPS}"
            )))
            }
        };
        attrs.finish()?;
        let inputs: Vec<Option<String>> = node
            .input
            .iter()
            .map(|name| (!name.is_empty()).then(|| name.clone()))
            .collect();
        // Trailing omitted optional inputs may be dropped or given as "".
        let given = inputs
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |p| p + 1);
        if !arity.contains(&given) || inputs.len() > *arity.end() {
            return Err(OnnxError::Malformed(format!(
                "node {label:?} ({op_name}) has {} inputs; it takes {}",
                node.input.len(),
                if arity.start() == arity.end() {
                    arity.start().to_string()
                } else {
                    format!("{} to {}", arity.start(), arity.end())
                }
            )));
        }
        if inputs[..*arity.start()].iter().any(Option::is_none) {
            return Err(OnnxError::Malformed(format!(
                "node {label:?} ({op_name}) omits a required input"
            )));
        }
        let output = match node.output.as_slice() {
            [one] if !one.is_empty() => one.clone(),
            _ => {
                return Err(OnnxError::Malformed(format!(
                    "node {label:?} ({op_name}) must have exactly one named output, it has {:?}",
                    node.output
                )))
            }
        };
        Ok(PreparedNode {
            label,
            op_name,
            op,
            inputs,
            output,
        })
    }

    /// Run on the node's inputs (`None` for an omitted optional input).
    pub fn run(&self, inputs: &[Option<TensorView<'_>>]) -> Result<Tensor> {
        let required = |i: usize| inputs.get(i).copied().flatten();
        // The arity check at preparation guarantees the required inputs exist;
        // a missing one here would be an executor bug, reported, not a panic.
        let arg = |i: usize| {
            required(i).ok_or_else(|| {
                OnnxError::Malformed(format!("node {:?}: input {i} is missing", self.label))
            })
        };
        let result = match &self.op {
            NodeOp::Op(op) => {
                // The inputs given, up to the first omitted optional one.
                let mut views = Vec::with_capacity(op.inputs().len());
                for i in 0..op.inputs().len() {
                    match required(i) {
                        None if i >= op.required_inputs() => break,
                        _ => views.push(arg(i)?),
                    }
                }
                op.run(&views)
            }
            NodeOp::Scatter(op) => op.run(arg(0)?, arg(1)?, arg(2)?),
            NodeOp::Constant(value) => Ok(value.clone()),
        };
        result.map_err(|source| OnnxError::Op {
            node: self.label.clone(),
            op: self.op_name.clone(),
            source: Box::new(source),
        })
    }

    /// True for ops whose float outputs are sums or products (compared with
    /// a tolerance by the conformance runner).
    pub fn accumulates(&self) -> bool {
        match &self.op {
            NodeOp::Op(Op::ScatterElements(op)) => {
                matches!(op.reduction, Reduction::Add | Reduction::Mul)
            }
            NodeOp::Op(Op::ScatterND(op)) => {
                matches!(op.reduction, Reduction::Add | Reduction::Mul)
            }
            _ => false,
        }
    }
}

/// Attribute lookup that remembers which attributes were read, so an
/// attribute nobody read is reported as unsupported instead of ignored.
struct Attributes<'a> {
    attrs: &'a [AttributeProto],
    used: Vec<bool>,
    label: &'a str,
    op_name: &'a str,
}

impl<'a> Attributes<'a> {
    fn new(attrs: &'a [AttributeProto], label: &'a str, op_name: &'a str) -> Self {
        Attributes {
            attrs,
            used: vec![false; attrs.len()],
            label,
            op_name,
        }
    }

    fn op_error(&self, source: Error) -> OnnxError {
        OnnxError::Op {
            node: self.label.to_string(),
            op: self.op_name.to_string(),
            source: Box::new(source),
        }
    }

    fn bad(&self, message: String) -> OnnxError {
        self.op_error(Error::BadAttribute { message })
    }

    fn find(&mut self, name: &str) -> Result<Option<&'a AttributeProto>> {
        let mut found = None;
        for (i, a) in self.attrs.iter().enumerate() {
            if a.name() == name {
                if found.is_some() {
                    return Err(self.bad(format!("attribute {name:?} is given twice")));
                }
                if a.ref_attr_name.is_some() {
                    return Err(OnnxError::Unsupported(format!(
                        "node {:?} ({}): attribute {name:?} refers to a function attribute, \
                         which is not supported",
                        self.label, self.op_name
                    )));
                }
                self.used[i] = true;
                found = Some(a);
            }
        }
        Ok(found)
    }

    fn check_type(&self, a: &AttributeProto, expected: AttributeType) -> Result<()> {
        // Old models may leave `type` unset; the value field then decides.
        if a.r#type.is_some() && a.r#type() != expected {
            return Err(self.bad(format!(
                "attribute {:?} must be {}, not {}",
                a.name(),
                expected.as_str_name(),
                a.r#type().as_str_name()
            )));
        }
        Ok(())
    }

    fn int(&mut self, name: &str, default: i64) -> Result<i64> {
        let Some(a) = self.find(name)? else {
            return Ok(default);
        };
        self.check_type(a, AttributeType::Int)?;
        a.i.ok_or_else(|| self.bad(format!("attribute {name:?} has no integer value")))
    }

    /// A non-negative integer attribute such as `batch_dims`.
    fn count(&mut self, name: &str) -> Result<usize> {
        let value = self.int(name, 0)?;
        usize::try_from(value).map_err(|_| {
            self.bad(format!(
                "attribute {name:?} is {value}; it must be 0 or more"
            ))
        })
    }

    fn string(&mut self, name: &str, default: &str) -> Result<String> {
        let Some(a) = self.find(name)? else {
            return Ok(default.to_string());
        };
        self.check_type(a, AttributeType::String)?;
        let bytes =
            a.s.as_deref()
                .ok_or_else(|| self.bad(format!("attribute {name:?} has no string value")))?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| self.bad(format!("attribute {name:?} is not UTF-8")))
    }

    fn reduction(&mut self) -> Result<Reduction> {
        let text = self.string("reduction", "none")?;
        text.parse().map_err(|e| self.op_error(e))
    }

    /// The one value attribute of a `Constant` node.
    fn constant_value(&mut self) -> Result<Tensor> {
        let present: Vec<&'a AttributeProto> = self.attrs.iter().collect();
        let [a] = present.as_slice() else {
            return Err(self.bad(format!(
                "a Constant node needs exactly one value attribute, it has {}",
                present.len()
            )));
        };
        let name = a.name().to_string();
        let value = match name.as_str() {
            "value" => {
                self.check_type(a, AttributeType::Tensor)?;
                let proto =
                    a.t.as_ref()
                        .ok_or_else(|| self.bad("attribute \"value\" has no tensor".to_string()))?;
                tensor_from_proto(proto)?
            }
            "value_float" => {
                self.check_type(a, AttributeType::Float)?;
                Tensor::scalar(a.f.unwrap_or_default())
            }
            "value_floats" => {
                self.check_type(a, AttributeType::Floats)?;
                Tensor::from_vec(a.floats.clone())
            }
            "value_int" => {
                self.check_type(a, AttributeType::Int)?;
                Tensor::scalar(a.i.unwrap_or_default())
            }
            "value_ints" => {
                self.check_type(a, AttributeType::Ints)?;
                Tensor::from_vec(a.ints.clone())
            }
            "value_string" => {
                self.check_type(a, AttributeType::String)?;
                let s = String::from_utf8(a.s.clone().unwrap_or_default())
                    .map_err(|_| self.bad("value_string is not UTF-8".to_string()))?;
                Tensor::scalar(s)
            }
            "value_strings" => {
                self.check_type(a, AttributeType::Strings)?;
                let strings = a
                    .strings
                    .iter()
                    .map(|s| String::from_utf8(s.clone()))
                    .collect::<std::result::Result<Vec<String>, _>>()
                    .map_err(|_| self.bad("value_strings is not UTF-8".to_string()))?;
                Tensor::from_vec(strings)
            }
            other => {
                return Err(OnnxError::Unsupported(format!(
                    "node {:?} (Constant): attribute {other:?} is not supported",
                    self.label
                )))
            }
        };
        self.used.fill(true);
        Ok(value)
    }

    /// Every attribute must have been read: an unknown one is not ignored.
    fn finish(self) -> Result<()> {
        match self.used.iter().position(|used| !used) {
            None => Ok(()),
            Some(i) => Err(OnnxError::Unsupported(format!(
                "node {:?} ({}): attribute {:?} is not supported",
                self.label,
                self.op_name,
                self.attrs[i].name()
            ))),
        }
    }
}

/// The element type a graph declares for a value, if it declares one.
pub(crate) fn declared_dtype(elem_type: i32) -> Option<DType> {
    DType::from_onnx_id(elem_type)
}
