//! `gsx run`: an ONNX model on tensor files.

use std::path::{Path, PathBuf};

use clap::Args;
use gatherscatter::TensorView;
use gatherscatter_onnx::Model;

use crate::error::CliError;
use crate::files;

/// `gsx run MODEL --input-dir DIR --output-dir DIR`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The .onnx model.
    pub model: PathBuf,
    /// A directory with input_K.pb (or input_K.npy) for the K-th graph input.
    #[arg(long)]
    pub input_dir: Option<PathBuf>,
    /// An input by name, NAME=FILE (.pb or .npy); overrides --input-dir.
    #[arg(long = "input", value_name = "NAME=FILE", value_parser = parse_named_input)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Where to write output_K.pb for the K-th graph output (created if
    /// missing).
    #[arg(long)]
    pub output_dir: PathBuf,
    /// Worker threads for the ops (default: all cores).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

fn parse_named_input(text: &str) -> Result<(String, PathBuf), String> {
    let (name, file) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=FILE"))?;
    Ok((name.to_string(), PathBuf::from(file)))
}

/// The file for graph input `k` in `dir`: `input_k.pb`, else `input_k.npy`.
fn input_file(dir: &Path, k: usize) -> Option<PathBuf> {
    ["pb", "npy"]
        .iter()
        .map(|ext| dir.join(format!("input_{k}.{ext}")))
        .find(|p| p.is_file())
}

/// Run the command.
pub fn run(args: &RunArgs) -> Result<(), CliError> {
    if let Some(name) = args
        .inputs
        .iter()
        .enumerate()
        .find(|(i, (n, _))| args.inputs[..*i].iter().any(|(m, _)| m == n))
        .map(|(_, (n, _))| n)
    {
        return Err(CliError::usage(format!(
            "--input {name}=... is given more than once"
        )));
    }
    let model = Model::load_limited(&args.model, crate::budget::budget())?;
    let mut paths: Vec<(String, PathBuf)> = Vec::new();
    for (k, spec) in model.inputs().iter().enumerate() {
        if let Some((_, file)) = args.inputs.iter().find(|(n, _)| *n == spec.name) {
            paths.push((spec.name.clone(), file.clone()));
        } else if let Some(file) = args.input_dir.as_deref().and_then(|d| input_file(d, k)) {
            paths.push((spec.name.clone(), file));
        } else {
            return Err(CliError::usage(format!(
                "graph input {k} ({:?}) has no file: give input_{k}.pb or input_{k}.npy in \
                 --input-dir, or --input {}=FILE",
                spec.name, spec.name
            )));
        }
    }
    if let Some((name, _)) = args
        .inputs
        .iter()
        .find(|(n, _)| !model.inputs().iter().any(|s| s.name == *n))
    {
        return Err(CliError::usage(format!(
            "the model has no input named {name:?}; its inputs are {}",
            model
                .inputs()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let loaded: Vec<gatherscatter::Tensor> = paths
        .iter()
        .map(|(_, p)| files::load(p))
        .collect::<Result<_, _>>()?;
    let views: Vec<(&str, TensorView<'_>)> = paths
        .iter()
        .zip(&loaded)
        .map(|((name, _), t)| (name.as_str(), TensorView::from(t)))
        .collect();
    let pool = super::ops::thread_pool(args.threads)?;
    let outputs = super::ops::in_pool(&pool, || model.run_named(&views))?;
    std::fs::create_dir_all(&args.output_dir).map_err(|e| CliError::io(&args.output_dir, e))?;
    let mut protected: Vec<PathBuf> = paths.into_iter().map(|(_, p)| p).collect();
    protected.push(args.model.clone());
    // Every output is written before any is renamed into place, so a
    // failure leaves the output directory as it was.
    let mut staged = Vec::with_capacity(outputs.len());
    for (k, (tensor, spec)) in outputs.iter().zip(model.outputs()).enumerate() {
        let path = args.output_dir.join(format!("output_{k}.pb"));
        staged.push(files::stage(&path, tensor, &spec.name, &protected)?);
    }
    files::commit(staged)
}
