//! Loading a `ModelProto` and running its graph.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use gatherscatter::{DType, ErrorKind, Tensor, TensorView};
use prost::Message;

use crate::error::{OnnxError, Result};
use crate::node::{declared_dtype, PreparedNode};
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{ModelProto, ValueInfoProto};
use crate::tensor_proto::{onnx_type_name, tensor_from_proto};

/// A graph input or output as the model declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueSpec {
    /// The value's name.
    pub name: String,
    /// The declared element type, when the model declares a supported one.
    pub dtype: Option<DType>,
    /// The declared dims, `None` for a symbolic or unknown dim; `None` overall
    /// when the rank is not declared.
    pub shape: Option<Vec<Option<usize>>>,
}

/// A loaded model: its nodes sorted and prepared, its initializers decoded.
///
/// ```
/// use gatherscatter::Tensor;
/// use gatherscatter_onnx::Model;
///
/// let model = Model::from_bytes(&gatherscatter_onnx::builder::gather_model_bytes(13, 0))?;
/// let data = Tensor::new(vec![3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7])?;
/// let indices = Tensor::new(vec![2, 2], vec![0i64, 1, 1, 2])?;
/// let outputs = model.run(&[(&data).into(), (&indices).into()])?;
/// assert_eq!(outputs[0].shape(), &[2, 2, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Model {
    onnx_opset: Option<u32>,
    nodes: Vec<PreparedNode>,
    initializers: HashMap<String, Tensor>,
    inputs: Vec<ValueSpec>,
    outputs: Vec<ValueSpec>,
}

impl Model {
    /// Read and prepare a `.onnx` file. Errors name the file; only a
    /// regular file is read (see [`crate::file::read_file`]).
    pub fn load(path: &Path) -> Result<Model> {
        Model::load_limited(path, u64::MAX)
    }

    /// [`Model::load`] of a file of at most `max_bytes` bytes.
    pub fn load_limited(path: &Path, max_bytes: u64) -> Result<Model> {
        let bytes = crate::file::read_file(path, max_bytes)?;
        Model::from_bytes(&bytes).map_err(|e| e.in_file(path))
    }

    /// Decode and prepare a serialized `ModelProto`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Model> {
        let proto = ModelProto::decode(bytes).map_err(|source| OnnxError::Decode {
            what: "ModelProto".to_string(),
            source,
        })?;
        Model::from_proto(&proto)
    }

    /// Prepare a decoded `ModelProto`: check opsets, build every node's op
    /// (unsupported ops and attributes are reported here, before any input is
    /// read) and sort the nodes topologically.
    pub fn from_proto(proto: &ModelProto) -> Result<Model> {
        let graph = proto
            .graph
            .as_ref()
            .ok_or_else(|| OnnxError::Malformed("the model has no graph".to_string()))?;
        let mut onnx_opset = None;
        for import in &proto.opset_import {
            if matches!(import.domain(), "" | "ai.onnx") {
                let version = u32::try_from(import.version()).map_err(|_| {
                    OnnxError::Malformed(format!(
                        "opset_import version {} is not a valid opset",
                        import.version()
                    ))
                })?;
                onnx_opset = Some(version);
            }
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(OnnxError::Unsupported(
                "sparse initializers are not supported".to_string(),
            ));
        }
        let mut initializers = HashMap::new();
        for init in &graph.initializer {
            let tensor = tensor_from_proto(init)?;
            if initializers
                .insert(init.name().to_string(), tensor)
                .is_some()
            {
                return Err(OnnxError::Malformed(format!(
                    "initializer {:?} is defined twice",
                    init.name()
                )));
            }
        }
        let inputs = graph
            .input
            .iter()
            .filter(|v| !initializers.contains_key(v.name()))
            .map(value_spec)
            .collect::<Result<Vec<_>>>()?;
        let outputs = graph
            .output
            .iter()
            .map(value_spec)
            .collect::<Result<Vec<_>>>()?;
        let prepared = graph
            .node
            .iter()
            .enumerate()
            .map(|(i, node)| PreparedNode::prepare(node, i, onnx_opset))
            .collect::<Result<Vec<_>>>()?;
        let available: HashSet<&str> = inputs
            .iter()
            .map(|v| v.name.as_str())
            .chain(initializers.keys().map(String::as_str))
            .collect();
        let nodes = topological_order(prepared, &available)?;
        let produced: HashSet<&str> = nodes
            .iter()
            .map(|n| n.output.as_str())
            .chain(available.iter().copied())
            .collect();
        if let Some(missing) = outputs.iter().find(|o| !produced.contains(o.name.as_str())) {
            return Err(OnnxError::Malformed(format!(
                "graph output {:?} is produced by no node, input or initializer",
                missing.name
            )));
        }
        Ok(Model {
            onnx_opset,
            nodes,
            initializers,
            inputs,
            outputs,
        })
    }

    /// The default-domain opset the nodes are validated against.
    pub fn onnx_opset(&self) -> Option<u32> {
        self.onnx_opset
    }

    /// The graph inputs a caller must supply (initializers excluded), in order.
    pub fn inputs(&self) -> &[ValueSpec] {
        &self.inputs
    }

    /// The graph outputs, in order.
    pub fn outputs(&self) -> &[ValueSpec] {
        &self.outputs
    }

    /// The op names of the nodes, in execution order (`domain::Op` outside
    /// the default domain).
    pub fn op_names(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.op_name.as_str())
    }

    /// True if some node sums or multiplies floats, so its outputs are
    /// compared with a tolerance rather than bit for bit.
    pub fn accumulates(&self) -> bool {
        self.nodes.iter().any(PreparedNode::accumulates)
    }

    /// Run with the inputs in [`Model::inputs`] order.
    pub fn run(&self, inputs: &[TensorView<'_>]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(OnnxError::Input {
                kind: ErrorKind::ShapeMismatch,
                message: format!(
                    "the model takes {} inputs ({}), {} were given",
                    self.inputs.len(),
                    self.inputs
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    inputs.len()
                ),
            });
        }
        let named: Vec<(&str, TensorView<'_>)> = self
            .inputs
            .iter()
            .map(|spec| spec.name.as_str())
            .zip(inputs.iter().copied())
            .collect();
        self.run_named(&named)
    }

    /// Run with inputs given by name; every graph input must be given once.
    pub fn run_named(&self, inputs: &[(&str, TensorView<'_>)]) -> Result<Vec<Tensor>> {
        let mut views: HashMap<&str, TensorView<'_>> = HashMap::new();
        for &(name, view) in inputs {
            let spec =
                self.inputs
                    .iter()
                    .find(|s| s.name == name)
                    .ok_or_else(|| OnnxError::Input {
                        kind: ErrorKind::ShapeMismatch,
                        message: format!("the model has no input named {name:?}"),
                    })?;
            check_input(spec, view)?;
            if views.insert(name, view).is_some() {
                return Err(OnnxError::Input {
                    kind: ErrorKind::ShapeMismatch,
                    message: format!("input {name:?} is given twice"),
                });
            }
        }
        if let Some(missing) = self
            .inputs
            .iter()
            .find(|s| !views.contains_key(s.name.as_str()))
        {
            return Err(OnnxError::Input {
                kind: ErrorKind::ShapeMismatch,
                message: format!("input {:?} is not given", missing.name),
            });
        }
        for (name, tensor) in &self.initializers {
            views.entry(name.as_str()).or_insert_with(|| tensor.into());
        }
        // A value no later node reads and no graph output names is dropped
        // as soon as its last reader has run, so a chain of nodes holds
        // at most the tensors still needed, not every intermediate.
        let mut last_reader: HashMap<&str, usize> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for name in node.inputs.iter().flatten() {
                last_reader.insert(name.as_str(), i);
            }
        }
        let mut dead_after: Vec<Vec<&str>> = vec![Vec::new(); self.nodes.len()];
        let is_output: HashSet<&str> = self.outputs.iter().map(|o| o.name.as_str()).collect();
        for (&name, &i) in &last_reader {
            if !is_output.contains(name) {
                dead_after[i].push(name);
            }
        }
        let mut computed: HashMap<&str, Tensor> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let args: Vec<Option<TensorView<'_>>> = node
                .inputs
                .iter()
                .map(|name| {
                    name.as_deref().map(|n| match computed.get(n) {
                        Some(t) => TensorView::from(t),
                        // Sorting guarantees every input is an input, an
                        // initializer or an earlier output.
                        None => views[n],
                    })
                })
                .collect();
            let out = node.run(&args)?;
            drop(args);
            for name in &dead_after[i] {
                computed.remove(name);
            }
            // An output nobody reads and no graph output names is dropped
            // at once.
            let output = node.output.as_str();
            if last_reader.contains_key(output) || is_output.contains(output) {
                computed.insert(output, out);
            }
        }
        // Each computed output is moved out at its last mention in the
        // output list (a name may be listed twice), copied before that.
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for (k, o) in self.outputs.iter().enumerate() {
            let name = o.name.as_str();
            let listed_again = self.outputs[k + 1..].iter().any(|later| later.name == name);
            let tensor = if listed_again {
                computed.get(name).cloned()
            } else {
                computed.remove(name)
            };
            outputs.push(match tensor {
                Some(t) => t,
                None => views[name].to_owned(),
            });
        }
        Ok(outputs)
    }
}

fn value_spec(info: &ValueInfoProto) -> Result<ValueSpec> {
    let mut spec = ValueSpec {
        name: info.name().to_string(),
        dtype: None,
        shape: None,
    };
    let Some(value) = info.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Ok(spec);
    };
    let TypeValue::TensorType(tensor_type) = value else {
        return Err(OnnxError::Unsupported(format!(
            "graph value {:?} is not a dense tensor (sequences, maps, optionals and sparse \
             tensors are not supported)",
            spec.name
        )));
    };
    if let Some(elem) = tensor_type.elem_type {
        spec.dtype = declared_dtype(elem);
        if spec.dtype.is_none() && elem != 0 {
            return Err(OnnxError::Unsupported(format!(
                "graph value {:?} has element type {}, which is not supported",
                spec.name,
                onnx_type_name(elem)
            )));
        }
    }
    if let Some(shape) = &tensor_type.shape {
        use crate::proto::tensor_shape_proto::dimension::Value as Dim;
        spec.shape = Some(
            shape
                .dim
                .iter()
                .map(|d| match d.value {
                    Some(Dim::DimValue(v)) => usize::try_from(v).ok(),
                    _ => None,
                })
                .collect(),
        );
    }
    Ok(spec)
}

fn check_input(spec: &ValueSpec, view: TensorView<'_>) -> Result<()> {
    if let Some(dtype) = spec.dtype {
        if view.dtype() != dtype {
            return Err(OnnxError::Input {
                kind: ErrorKind::BadDType,
                message: format!(
                    "input {:?} is declared {dtype} but a {} tensor was given",
                    spec.name,
                    view.dtype()
                ),
            });
        }
    }
    if let Some(dims) = &spec.shape {
        if dims.len() != view.rank() {
            return Err(OnnxError::Input {
                kind: ErrorKind::RankMismatch,
                message: format!(
                    "input {:?} is declared with rank {} but a tensor of shape {:?} was given",
                    spec.name,
                    dims.len(),
                    view.shape()
                ),
            });
        }
        for (axis, (want, &got)) in dims.iter().zip(view.shape()).enumerate() {
            if want.is_some_and(|w| w != got) {
                return Err(OnnxError::Input {
                    kind: ErrorKind::ShapeMismatch,
                    message: format!(
                        "input {:?} is declared with dim {} = {} but a tensor of shape {:?} was given",
                        spec.name,
                        axis,
                        want.unwrap_or_default(),
                        view.shape()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Kahn's algorithm over data dependencies; ties keep the file's order.
fn topological_order(
    nodes: Vec<PreparedNode>,
    available: &HashSet<&str>,
) -> Result<Vec<PreparedNode>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        if available.contains(node.output.as_str()) || producer.insert(&node.output, i).is_some() {
            return Err(OnnxError::Malformed(format!(
                "value {:?} is assigned more than once (node {:?})",
                node.output, node.label
            )));
        }
    }
    let mut pending = vec![0usize; nodes.len()];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        for name in node.inputs.iter().flatten() {
            match producer.get(name.as_str()) {
                Some(&p) => {
                    pending[i] += 1;
                    consumers[p].push(i);
                }
                None if available.contains(name.as_str()) => {}
                None => {
                    return Err(OnnxError::Malformed(format!(
                    "node {:?} ({}) reads {name:?}, which no input, initializer or node provides",
                    node.label, node.op_name
                )))
                }
            }
        }
    }
    let mut ready: VecDeque<usize> = (0..nodes.len()).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &c in &consumers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.push_back(c);
            }
        }
    }
    if order.len() != nodes.len() {
        return Err(OnnxError::Malformed("the graph has a cycle".to_string()));
    }
    let mut slots: Vec<Option<PreparedNode>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}
