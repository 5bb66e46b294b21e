//! The subcommands and their arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use gatherscatter::{Aggregate, IndexPolicy, Profile, Reduction, ScatterMode};

pub mod conformance;
pub mod ops;
pub mod run;

/// gsx: the gather/scatter family on .npy and ONNX files.
#[derive(Debug, Parser)]
#[command(name = "gsx", version, about, long_about = None)]
pub struct Cli {
    /// The memory budget: no file may make gsx allocate more, and its heap
    /// stays under it (e.g. 512M, 4G; default: the machine's total memory).
    #[arg(long, global = true, value_name = "SIZE", value_parser = crate::budget::parse_size)]
    pub max_memory: Option<u64>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The most calls `--repeat` times.
pub const MAX_REPEAT: i64 = 1_000_000;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an ONNX model on input_K.pb/.npy files; write output_K.pb.
    Run(run::RunArgs),
    /// Gather: out = data taken at indices along an axis.
    Gather(GatherArgs),
    /// GatherElements: `out[i] = data[i with i[axis] = indices[i]]`.
    GatherElements(ElementsArgs),
    /// ScatterElements: a copy of data with updates written at indices.
    ScatterElements(ScatterElementsArgs),
    /// GatherND: slices of data at k-tuples of indices.
    GatherNd(GatherNdArgs),
    /// ScatterND: a copy of data with update slices written at k-tuples.
    ScatterNd(ScatterNdArgs),
    /// TensorScatter: a copy of a KV cache with each batch's update written
    /// at its write index along the sequence axis.
    TensorScatter(TensorScatterArgs),
    /// ScatterReduce (PyTorch's scatter_reduce): a copy of data with the
    /// updates aimed at each element aggregated (sum, prod, mean, amax, amin).
    ScatterReduce(ScatterReduceArgs),
    /// segment_csr (pytorch_scatter): src reduced over the row ranges indptr
    /// gives along axis rank(indptr) - 1.
    SegmentCsr(SegmentCsrArgs),
    /// segment_coo (pytorch_scatter): src reduced over the rows sharing a
    /// sorted segment id along axis rank(index) - 1.
    SegmentCoo(SegmentCooArgs),
    /// embedding_bag (PyTorch): the weight rows indices names, folded per
    /// bag (sum, mean, max, ...).
    EmbeddingBag(EmbeddingBagArgs),
    /// index_select (PyTorch): the slices of data at a 1-D index along --dim.
    IndexSelect(IndexSelectArgs),
    /// index_add (PyTorch): a copy of data with source's slices added at a
    /// 1-D index along --dim, in order.
    IndexAdd(IndexScatterArgs),
    /// index_copy (PyTorch): a copy of data with source's slices written at
    /// a 1-D index along --dim (the last duplicate wins).
    IndexCopy(IndexScatterArgs),
    /// Run ONNX backend-test directories (or the built-in corpus) and compare.
    Conformance(conformance::ConformanceArgs),
}

/// Options every per-op subcommand takes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Where to write the result (.npy or .pb); required unless --repeat.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The contract to check the call against: permissive, onnx:OPSET,
    /// directml:MAJOR.MINOR or mindspore.
    #[arg(long, default_value = "permissive", value_parser = parse_profile)]
    pub profile: Profile,
    /// Time N calls (1 to 1000000) after one warm-up call and print one
    /// JSON line of per-call seconds (file I/O excluded).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_REPEAT))]
    pub repeat: Option<u32>,
    /// Worker threads for the op (default: all cores; at most 4 per core).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
}

/// What an out-of-range index does, for the gathers and scatters.
#[derive(Debug, Args)]
pub struct ModeArgs {
    /// raise (the default), clip, wrap, fill (gathers) or drop (scatters);
    /// see the spec's index policies.
    #[arg(long, default_value = "raise", value_parser = parse_policy)]
    pub mode: IndexPolicy,
    /// What out-of-range positions read under --mode fill, in data's dtype
    /// (default: NaN, the most negative integer, ...).
    #[arg(long, allow_hyphen_values = true)]
    pub fill_value: Option<String>,
}

fn parse_policy(text: &str) -> Result<IndexPolicy, String> {
    text.parse()
        .map_err(|e: gatherscatter::Error| e.to_string())
}

/// `gsx gather`.
#[derive(Debug, Args)]
pub struct GatherArgs {
    /// The data tensor.
    pub data: PathBuf,
    /// The integer indices tensor.
    pub indices: PathBuf,
    /// The axis to gather along (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub axis: i64,
    /// Leading dimensions shared by data and indices.
    #[arg(long, default_value_t = 0)]
    pub batch_dims: usize,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx gather-elements`.
#[derive(Debug, Args)]
pub struct ElementsArgs {
    /// The data tensor.
    pub data: PathBuf,
    /// The integer indices tensor, of data's rank.
    pub indices: PathBuf,
    /// The axis the indices address (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub axis: i64,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx scatter-elements`.
#[derive(Debug, Args)]
pub struct ScatterElementsArgs {
    /// The data tensor (never modified).
    pub data: PathBuf,
    /// The integer indices tensor, of data's rank.
    pub indices: PathBuf,
    /// The updates, of the indices' shape.
    pub updates: PathBuf,
    /// The axis the indices address (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub axis: i64,
    /// How an update combines with the element: none, add, mul, max, min.
    #[arg(long, default_value = "none", value_parser = parse_reduction)]
    pub reduction: Reduction,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx scatter-reduce`.
#[derive(Debug, Args)]
pub struct ScatterReduceArgs {
    /// The data tensor (never modified).
    pub data: PathBuf,
    /// The integer indices tensor, of data's rank.
    pub indices: PathBuf,
    /// The updates, of the indices' shape.
    pub updates: PathBuf,
    /// The axis the indices address (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub axis: i64,
    /// How the values aimed at one element aggregate: sum, prod, mean, amax, amin.
    #[arg(long, value_parser = parse_aggregate)]
    pub reduce: Aggregate,
    /// Whether data's own value is one of them: true (default) or false.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub include_self: bool,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The options both segment subcommands take.
#[derive(Debug, Args)]
pub struct SegmentArgs {
    /// How a segment's rows aggregate: sum, prod, mean, amax (max), amin (min).
    #[arg(long, default_value = "sum", value_parser = parse_aggregate)]
    pub reduce: Aggregate,
    /// The value of empty segments, in src's dtype (default: 1 for prod, else 0).
    #[arg(long, allow_hyphen_values = true)]
    pub fill: Option<String>,
    /// Also write each value's row along the axis (amax/amin only; int64;
    /// an empty segment's is the row count).
    #[arg(long, value_name = "FILE")]
    pub arg_output: Option<PathBuf>,
}

/// `gsx segment-csr`.
#[derive(Debug, Args)]
pub struct SegmentCsrArgs {
    /// The tensor to reduce (never modified).
    pub src: PathBuf,
    /// Integer boundaries [..., segments + 1], non-decreasing in [0, rows].
    pub indptr: PathBuf,
    /// Aggregate, fill and argument output.
    #[command(flatten)]
    pub segment: SegmentArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx segment-coo`.
#[derive(Debug, Args)]
pub struct SegmentCooArgs {
    /// The tensor to reduce (never modified).
    pub src: PathBuf,
    /// Integer segment ids [..., rows], sorted along the last dim, >= 0.
    pub index: PathBuf,
    /// The segment count (default: the largest id + 1).
    #[arg(long)]
    pub dim_size: Option<usize>,
    /// Aggregate, fill and argument output.
    #[command(flatten)]
    pub segment: SegmentArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx embedding-bag`.
#[derive(Debug, Args)]
pub struct EmbeddingBagArgs {
    /// The weight table [rows, dim] (never modified).
    pub weight: PathBuf,
    /// Integer weight rows: 1-D with --offsets, or 2-D [bags, n] without.
    pub indices: PathBuf,
    /// Integer starts of the bags (1-D indices).
    #[arg(long, value_name = "FILE")]
    pub offsets: Option<PathBuf>,
    /// Weights of indices' shape and weight's dtype, each row scaled before
    /// it is summed (mode sum only).
    #[arg(long, value_name = "FILE")]
    pub per_sample_weights: Option<PathBuf>,
    /// How a bag's rows aggregate: sum, mean, max (amax), min (amin), prod.
    #[arg(long, default_value = "mean", value_parser = parse_aggregate)]
    pub mode: Aggregate,
    /// The offsets end with the end of the last bag.
    #[arg(long)]
    pub include_last_offset: bool,
    /// A weight row that takes no part (negative counts from the end).
    #[arg(long, allow_hyphen_values = true)]
    pub padding_idx: Option<i64>,
    /// The value of empty bags, in weight's dtype (default: 1 for prod, else 0).
    #[arg(long, allow_hyphen_values = true)]
    pub fill: Option<String>,
    /// Also write each value's weight row (max/min only; int64; an empty
    /// bag's is the row count).
    #[arg(long, value_name = "FILE")]
    pub arg_output: Option<PathBuf>,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx index-select`.
#[derive(Debug, Args)]
pub struct IndexSelectArgs {
    /// The data tensor.
    pub data: PathBuf,
    /// A 1-D integer index.
    pub index: PathBuf,
    /// The dim the index addresses (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub dim: i64,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx index-add` / `gsx index-copy`.
#[derive(Debug, Args)]
pub struct IndexScatterArgs {
    /// The data tensor (never modified).
    pub data: PathBuf,
    /// A 1-D integer index.
    pub index: PathBuf,
    /// The slices: data's shape but the index's length along --dim.
    pub source: PathBuf,
    /// The dim the index addresses (negative counts from the end).
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub dim: i64,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx gather-nd`.
#[derive(Debug, Args)]
pub struct GatherNdArgs {
    /// The data tensor.
    pub data: PathBuf,
    /// The integer indices tensor; its last dim is the tuple length k.
    pub indices: PathBuf,
    /// Leading dimensions shared by data and indices.
    #[arg(long, default_value_t = 0)]
    pub batch_dims: usize,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx scatter-nd`.
#[derive(Debug, Args)]
pub struct ScatterNdArgs {
    /// The data tensor (never modified).
    pub data: PathBuf,
    /// The integer indices tensor; its last dim is the tuple length k.
    pub indices: PathBuf,
    /// The update slices.
    pub updates: PathBuf,
    /// How an update combines with the slice: none, add, mul, max, min.
    #[arg(long, default_value = "none", value_parser = parse_reduction)]
    pub reduction: Reduction,
    /// What an out-of-range index does.
    #[command(flatten)]
    pub index_mode: ModeArgs,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `gsx tensor-scatter`.
#[derive(Debug, Args)]
pub struct TensorScatterArgs {
    /// The cache, rank >= 2, batch first (never modified).
    pub past_cache: PathBuf,
    /// The update, the cache's shape but at most as long on the axis.
    pub update: PathBuf,
    /// One integer write index per batch entry (default: all 0).
    pub write_indices: Option<PathBuf>,
    /// The sequence axis (negative counts from the end; never 0).
    #[arg(long, default_value_t = -2, allow_hyphen_values = true)]
    pub axis: i64,
    /// linear (the update must fit) or circular (positions wrap).
    #[arg(long, default_value = "linear", value_parser = parse_mode)]
    pub mode: ScatterMode,
    /// Output and run options.
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_mode(text: &str) -> Result<ScatterMode, String> {
    text.parse()
        .map_err(|e: gatherscatter::Error| e.to_string())
}

fn parse_profile(text: &str) -> Result<Profile, String> {
    text.parse()
        .map_err(|e: gatherscatter::Error| e.to_string())
}

fn parse_aggregate(text: &str) -> Result<Aggregate, String> {
    text.parse()
        .map_err(|e: gatherscatter::Error| e.to_string())
}

fn parse_reduction(text: &str) -> Result<Reduction, String> {
    text.parse()
        .map_err(|e: gatherscatter::Error| e.to_string())
}

/// Run a parsed command line.
pub fn execute(cli: Cli) -> Result<(), crate::CliError> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Conformance(args) => conformance::run(&args),
        Command::Gather(args) => ops::gather(&args),
        Command::GatherElements(args) => ops::gather_elements(&args),
        Command::ScatterElements(args) => ops::scatter_elements(&args),
        Command::GatherNd(args) => ops::gather_nd(&args),
        Command::ScatterNd(args) => ops::scatter_nd(&args),
        Command::TensorScatter(args) => ops::tensor_scatter(&args),
        Command::ScatterReduce(args) => ops::scatter_reduce(&args),
        Command::SegmentCsr(args) => ops::segment_csr(&args),
        Command::SegmentCoo(args) => ops::segment_coo(&args),
        Command::EmbeddingBag(args) => ops::embedding_bag(&args),
        Command::IndexSelect(args) => ops::index_select(&args),
        Command::IndexAdd(args) => ops::index_scatter(&args, true),
        Command::IndexCopy(args) => ops::index_scatter(&args, false),
    }
}
