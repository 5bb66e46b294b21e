//! The ONNX backend-test layout: a directory with `model.onnx` and
//! `test_data_set_N/{input_K.pb, output_K.pb}`, run and compared.

use std::path::{Path, PathBuf};

use gatherscatter::{bf16, f16, Complex32, Complex64, Tensor, TensorView};
use prost::Message;

use crate::error::{OnnxError, Result};
use crate::model::Model;
use crate::proto::ModelProto;
use crate::tensor_proto::decode_tensor;

/// One serialized file of a test case: its name and bytes.
#[derive(Debug, Clone)]
pub struct CaseFile {
    /// The file name, such as `input_0.pb`.
    pub name: String,
    /// The serialized `TensorProto`.
    pub bytes: Vec<u8>,
}

/// One `test_data_set_N` directory.
#[derive(Debug, Clone)]
pub struct DataSet {
    /// The directory name.
    pub name: String,
    /// `input_K.pb` in K order.
    pub inputs: Vec<CaseFile>,
    /// `output_K.pb` in K order.
    pub outputs: Vec<CaseFile>,
}

/// A test case: a model and its data sets, from disk or embedded.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's name (its directory name).
    pub name: String,
    /// The serialized `ModelProto`.
    pub model: Vec<u8>,
    /// The data sets.
    pub data_sets: Vec<DataSet>,
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every output of every data set matched.
    Passed,
    /// Something differed or failed; the text says what and where.
    Failed(String),
    /// The model uses an op, attribute or dtype this implementation does not
    /// offer; the text names it.
    Unsupported(String),
}

/// A case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// The ops of the model (`domain::Op` outside the default domain), joined
    /// with `+`; `Constant` is left out.
    pub ops: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// Every directory under `root` (itself included) that holds a `model.onnx`,
/// sorted by path.
pub fn discover(root: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if dir.join("model.onnx").is_file() {
            found.push(dir);
            continue;
        }
        for entry in read_dir(&dir)? {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    crate::file::read_file(path, u64::MAX)
}

impl DataSet {
    /// A data set from its files: `input_K.pb` and `output_K.pb` are put in K
    /// order (numerically: `input_10` after `input_9`); other files are
    /// ignored; a gap in the numbering is an error.
    pub fn from_files(name: String, files: Vec<CaseFile>) -> Result<DataSet> {
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        for file in files {
            let numbered = |prefix: &str| {
                file.name
                    .strip_prefix(prefix)
                    .and_then(|rest| rest.strip_suffix(".pb"))
                    .and_then(|k| k.parse::<usize>().ok())
            };
            if let Some(k) = numbered("input_") {
                inputs.push((k, file));
            } else if let Some(k) = numbered("output_") {
                outputs.push((k, file));
            }
        }
        let order = |mut files: Vec<(usize, CaseFile)>, prefix: &str| -> Result<Vec<CaseFile>> {
            files.sort_by(|(a, fa), (b, fb)| (a, &fa.name).cmp(&(b, &fb.name)));
            if let Some(pair) = files.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(OnnxError::Malformed(format!(
                    "{name}: {} and {} both give {prefix}{}",
                    pair[0].1.name, pair[1].1.name, pair[0].0
                )));
            }
            if let Some(gap) = files.iter().enumerate().position(|(i, (k, _))| i != *k) {
                return Err(OnnxError::Malformed(format!(
                    "{name}: {prefix}{gap}.pb is missing"
                )));
            }
            Ok(files.into_iter().map(|(_, f)| f).collect())
        };
        Ok(DataSet {
            inputs: order(inputs, "input_")?,
            outputs: order(outputs, "output_")?,
            name,
        })
    }

    /// Read a `test_data_set_N` directory.
    pub fn load(dir: &Path) -> Result<DataSet> {
        let name = dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let mut files = Vec::new();
        for entry in read_dir(dir)? {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pb") && path.is_file() {
                files.push(CaseFile {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    bytes: read(&path)?,
                });
            }
        }
        DataSet::from_files(name, files)
    }
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>> {
    let entries = std::fs::read_dir(dir).map_err(|source| OnnxError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    entries
        .map(|e| {
            e.map_err(|source| OnnxError::Io {
                path: dir.to_path_buf(),
                source,
            })
        })
        .collect()
}

impl Case {
    /// Read a case directory.
    pub fn load(dir: &Path) -> Result<Case> {
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let model = read(&dir.join("model.onnx"))?;
        let mut sets: Vec<PathBuf> = read_dir(dir)?
            .into_iter()
            .map(|e| e.path())
            .filter(|p| {
                p.is_dir()
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
            })
            .collect();
        // test_data_set_10 after test_data_set_9.
        sets.sort_by_key(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let number = name.rsplit('_').next().and_then(|n| n.parse::<u64>().ok());
            (number, name)
        });
        let data_sets = sets
            .iter()
            .map(|set| DataSet::load(set))
            .collect::<Result<Vec<_>>>()?;
        Ok(Case {
            name,
            model,
            data_sets,
        })
    }

    /// Run every data set and compare: bit for bit, except float outputs of
    /// models that add or multiply, which get a tolerance (see [`compare`]).
    pub fn run(&self) -> CaseResult {
        let ops = op_label(&self.model);
        let outcome = match self.run_inner() {
            Ok(()) => Outcome::Passed,
            Err(Failure::Unsupported(m)) => Outcome::Unsupported(m),
            Err(Failure::Failed(m)) => Outcome::Failed(m),
        };
        CaseResult {
            name: self.name.clone(),
            ops,
            outcome,
        }
    }

    fn run_inner(&self) -> std::result::Result<(), Failure> {
        let model = Model::from_bytes(&self.model).map_err(Failure::from)?;
        if self.data_sets.is_empty() {
            return Err(Failure::Failed(
                "the case has no test_data_set_N directory".into(),
            ));
        }
        for set in &self.data_sets {
            let decode = |f: &CaseFile| {
                decode_tensor(&f.bytes, &format!("{}/{}", set.name, f.name)).map(|(_, t)| t)
            };
            let inputs = set.inputs.iter().map(decode).collect::<Result<Vec<_>>>()?;
            let expected = set.outputs.iter().map(decode).collect::<Result<Vec<_>>>()?;
            let views: Vec<TensorView<'_>> = inputs.iter().map(TensorView::from).collect();
            let actual = model.run(&views)?;
            if actual.len() != expected.len() {
                return Err(Failure::Failed(format!(
                    "{}: the model gives {} outputs, the case expects {}",
                    set.name,
                    actual.len(),
                    expected.len()
                )));
            }
            for (k, (want, got)) in expected.iter().zip(&actual).enumerate() {
                compare(want, got, model.accumulates())
                    .map_err(|m| Failure::Failed(format!("{}/output_{k}.pb: {m}", set.name)))?;
            }
        }
        Ok(())
    }
}

enum Failure {
    Unsupported(String),
    Failed(String),
}

impl From<OnnxError> for Failure {
    fn from(e: OnnxError) -> Failure {
        let text = format!("[{}] {e}", e.kind_name());
        if e.is_unsupported() {
            Failure::Unsupported(text)
        } else {
            Failure::Failed(text)
        }
    }
}

/// The model's ops for the summary table, read without preparing the model
/// so that unsupported models are still labelled.
fn op_label(model: &[u8]) -> String {
    let Ok(proto) = ModelProto::decode(model) else {
        return "(undecodable)".to_string();
    };
    let mut ops: Vec<String> = Vec::new();
    for node in proto.graph.iter().flat_map(|g| &g.node) {
        let name = match node.domain() {
            "" | "ai.onnx" => node.op_type().to_string(),
            d => format!("{d}::{}", node.op_type()),
        };
        if name != "Constant" && !ops.contains(&name) {
            ops.push(name);
        }
    }
    if ops.is_empty() {
        "(none)".to_string()
    } else {
        ops.join("+")
    }
}

/// Compare an output with its expectation: dtype and shape exactly; elements
/// bit for bit (any NaN equals any NaN), or, with `tolerant`, floats within
/// `atol + rtol * |expected|` for the dtype's precision (f16/bf16: 1e-2,
/// f32: 1e-5, f64: 1e-12 relative).
pub fn compare(
    expected: &Tensor,
    actual: &Tensor,
    tolerant: bool,
) -> std::result::Result<(), String> {
    if expected.dtype() != actual.dtype() {
        return Err(format!(
            "dtype {} expected, {} given",
            expected.dtype(),
            actual.dtype()
        ));
    }
    if expected.shape() != actual.shape() {
        return Err(format!(
            "shape {:?} expected, {:?} given",
            expected.shape(),
            actual.shape()
        ));
    }
    fn first_difference<T: PartialEq + std::fmt::Debug>(
        want: &[T],
        got: &[T],
        same: impl Fn(&T, &T) -> bool,
    ) -> std::result::Result<(), String> {
        match want.iter().zip(got).position(|(w, g)| !same(w, g)) {
            None => Ok(()),
            Some(i) => Err(format!(
                "element {i} (flat) is {:?}, expected {:?}",
                got[i], want[i]
            )),
        }
    }
    fn close(w: f64, g: f64, rtol: f64, tolerant: bool) -> bool {
        if w.is_nan() || g.is_nan() {
            return w.is_nan() && g.is_nan();
        }
        if w.to_bits() == g.to_bits() {
            return true;
        }
        tolerant && (w - g).abs() <= 1e-7 + rtol * w.abs()
    }
    macro_rules! exact {
        ($t:ident) => {
            if let (Tensor::$t(w), Tensor::$t(g)) = (expected, actual) {
                return first_difference(w.data(), g.data(), |a, b| a == b);
            }
        };
    }
    exact!(Bool);
    exact!(I8);
    exact!(I16);
    exact!(I32);
    exact!(I64);
    exact!(U8);
    exact!(U16);
    exact!(U32);
    exact!(U64);
    exact!(String);
    match (expected, actual) {
        (Tensor::F16(w), Tensor::F16(g)) => first_difference(w.data(), g.data(), |a: &f16, b| {
            close(a.to_f64(), b.to_f64(), 1e-2, tolerant)
        }),
        (Tensor::BF16(w), Tensor::BF16(g)) => {
            first_difference(w.data(), g.data(), |a: &bf16, b| {
                close(a.to_f64(), b.to_f64(), 1e-2, tolerant)
            })
        }
        (Tensor::F32(w), Tensor::F32(g)) => first_difference(w.data(), g.data(), |a, b| {
            close(f64::from(*a), f64::from(*b), 1e-5, tolerant)
        }),
        (Tensor::F64(w), Tensor::F64(g)) => {
            first_difference(w.data(), g.data(), |a, b| close(*a, *b, 1e-12, tolerant))
        }
        (Tensor::Complex64(w), Tensor::Complex64(g)) => {
            first_difference(w.data(), g.data(), |a: &Complex32, b| {
                close(a.re.into(), b.re.into(), 1e-5, tolerant)
                    && close(a.im.into(), b.im.into(), 1e-5, tolerant)
            })
        }
        (Tensor::Complex128(w), Tensor::Complex128(g)) => {
            first_difference(w.data(), g.data(), |a: &Complex64, b| {
                close(a.re, b.re, 1e-12, tolerant) && close(a.im, b.im, 1e-12, tolerant)
            })
        }
        _ => Err(format!("no comparison for dtype {}", expected.dtype())),
    }
}
