//! The per-op subcommands on tensor files.

use std::path::PathBuf;
use std::time::Instant;

use gatherscatter::{
    EmbeddingBag, Gather, GatherElements, GatherND, IndexPolicy, Op, ScatterElements, ScatterND,
    ScatterReduce, SegmentCoo, SegmentCsr, Tensor, TensorScatter, TensorView,
};

use super::{
    CommonArgs, ElementsArgs, EmbeddingBagArgs, GatherArgs, GatherNdArgs, IndexScatterArgs,
    IndexSelectArgs, ModeArgs, ScatterElementsArgs, ScatterNdArgs, ScatterReduceArgs, SegmentArgs,
    SegmentCooArgs, SegmentCsrArgs, TensorScatterArgs,
};
use crate::error::CliError;
use crate::files;

/// `gsx gather`.
pub fn gather(args: &GatherArgs) -> Result<(), CliError> {
    let op = Gather::new(args.axis)
        .batch_dims(args.batch_dims)
        .profile(args.common.profile);
    execute_in_mode(
        op.into(),
        &[&args.data, &args.indices],
        &args.common,
        &args.index_mode,
    )
}

/// `gsx gather-elements`.
pub fn gather_elements(args: &ElementsArgs) -> Result<(), CliError> {
    let op = GatherElements::new(args.axis).profile(args.common.profile);
    execute_in_mode(
        op.into(),
        &[&args.data, &args.indices],
        &args.common,
        &args.index_mode,
    )
}

/// `gsx scatter-elements`.
pub fn scatter_elements(args: &ScatterElementsArgs) -> Result<(), CliError> {
    let op = ScatterElements::new(args.axis)
        .reduction(args.reduction)
        .profile(args.common.profile);
    let paths = [&args.data, &args.indices, &args.updates];
    execute_in_mode(op.into(), &paths, &args.common, &args.index_mode)
}

/// `gsx scatter-reduce`.
pub fn scatter_reduce(args: &ScatterReduceArgs) -> Result<(), CliError> {
    let op = ScatterReduce::new(args.axis, args.reduce)
        .include_self(args.include_self)
        .profile(args.common.profile);
    let paths = [&args.data, &args.indices, &args.updates];
    execute_in_mode(op.into(), &paths, &args.common, &args.index_mode)
}

/// `gsx segment-csr`.
pub fn segment_csr(args: &SegmentCsrArgs) -> Result<(), CliError> {
    let op = SegmentCsr::new(args.segment.reduce).profile(args.common.profile);
    let paths = [&args.src, &args.indptr];
    segment(&paths, &args.segment, &args.common, "segment-csr", |fill| {
        Op::from(match fill {
            Some(value) => op.clone().fill(value),
            None => op.clone(),
        })
    })
}

/// `gsx segment-coo`.
pub fn segment_coo(args: &SegmentCooArgs) -> Result<(), CliError> {
    let mut op = SegmentCoo::new(args.segment.reduce).profile(args.common.profile);
    if let Some(count) = args.dim_size {
        op = op.segments(count);
    }
    let paths = [&args.src, &args.index];
    segment(&paths, &args.segment, &args.common, "segment-coo", |fill| {
        Op::from(match fill {
            Some(value) => op.clone().fill(value),
            None => op.clone(),
        })
    })
}

/// A segment reduction built by `build` with `--fill` read in src's dtype,
/// and its winning rows too when `--arg-output` is given.
fn segment(
    paths: &[&PathBuf],
    options: &SegmentArgs,
    common: &CommonArgs,
    command: &str,
    build: impl Fn(Option<Tensor>) -> Op + Sync,
) -> Result<(), CliError> {
    let arg_output = options.arg_output.as_ref();
    run_files(command, paths, common, arg_output, |views| {
        let op = build(fill_value(options.fill.as_deref(), views[0].dtype())?);
        if arg_output.is_none() {
            return Ok(vec![op.run(views)?]);
        }
        let (values, arg) = match &op {
            Op::SegmentCsr(csr) => csr.run_with_arg(views[0], views[1])?,
            Op::SegmentCoo(coo) => coo.run_with_arg(views[0], views[1])?,
            other => op_without_arg(other)?,
        };
        Ok(vec![values, arg.into()])
    })
}

/// `--fill TEXT` read as one value of `dtype`, if given.
fn fill_value(
    text: Option<&str>,
    dtype: gatherscatter::DType,
) -> gatherscatter::Result<Option<Tensor>> {
    text.map(|text| {
        crate::scalar::parse(text, dtype).map_err(|why| gatherscatter::Error::BadAttribute {
            message: format!("--fill {text}: {why}"),
        })
    })
    .transpose()
}

/// `gsx embedding-bag`.
pub fn embedding_bag(args: &EmbeddingBagArgs) -> Result<(), CliError> {
    let mut op = EmbeddingBag::new(args.mode)
        .include_last_offset(args.include_last_offset)
        .profile(args.common.profile);
    if let Some(row) = args.padding_idx {
        op = op.padding_idx(row);
    }
    let mut paths = vec![&args.weight, &args.indices];
    let offsets_at = args.offsets.as_ref().map(|p| {
        paths.push(p);
        paths.len() - 1
    });
    let weights_at = args.per_sample_weights.as_ref().map(|p| {
        paths.push(p);
        paths.len() - 1
    });
    let arg_output = args.arg_output.as_ref();
    run_files("embedding-bag", &paths, &args.common, arg_output, |views| {
        let mut op = op.clone();
        if let Some(fill) = fill_value(args.fill.as_deref(), views[0].dtype())? {
            op = op.fill(fill);
        }
        let (offsets, weights) = (offsets_at.map(|k| views[k]), weights_at.map(|k| views[k]));
        if arg_output.is_none() {
            return Ok(vec![op.run(views[0], views[1], offsets, weights)?]);
        }
        let (values, arg) = op.run_with_arg(views[0], views[1], offsets, weights)?;
        Ok(vec![values, arg.into()])
    })
}

/// `gsx index-select`.
pub fn index_select(args: &IndexSelectArgs) -> Result<(), CliError> {
    let paths = [&args.data, &args.index];
    run_files("index-select", &paths, &args.common, None, |v| {
        Ok(vec![gatherscatter::index_select(v[0], args.dim, v[1])?])
    })
}

/// `gsx index-add` and `gsx index-copy`.
pub fn index_scatter(args: &IndexScatterArgs, add: bool) -> Result<(), CliError> {
    let paths = [&args.data, &args.index, &args.source];
    let command = if add { "index-add" } else { "index-copy" };
    run_files(command, &paths, &args.common, None, |v| {
        Ok(vec![if add {
            gatherscatter::index_add(v[0], args.dim, v[1], v[2])?
        } else {
            gatherscatter::index_copy(v[0], args.dim, v[1], v[2])?
        }])
    })
}

/// The error for an operator that names no winning rows.
fn op_without_arg(op: &Op) -> gatherscatter::Result<(Tensor, gatherscatter::TypedTensor<i64>)> {
    Err(gatherscatter::Error::BadAttribute {
        message: format!("{} has no argument output", op.name()),
    })
}

/// `gsx gather-nd`.
pub fn gather_nd(args: &GatherNdArgs) -> Result<(), CliError> {
    let op = GatherND::new()
        .batch_dims(args.batch_dims)
        .profile(args.common.profile);
    execute_in_mode(
        op.into(),
        &[&args.data, &args.indices],
        &args.common,
        &args.index_mode,
    )
}

/// `gsx scatter-nd`.
pub fn scatter_nd(args: &ScatterNdArgs) -> Result<(), CliError> {
    let op = ScatterND::new()
        .reduction(args.reduction)
        .profile(args.common.profile);
    let paths = [&args.data, &args.indices, &args.updates];
    execute_in_mode(op.into(), &paths, &args.common, &args.index_mode)
}

/// The most worker threads `--threads` starts: four per core. More only
/// contend for the same cores (the library splits work by size, not by
/// thread count), and thousands exhaust the process's resources.
pub fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) * 4
}

/// `gsx tensor-scatter`.
pub fn tensor_scatter(args: &TensorScatterArgs) -> Result<(), CliError> {
    let op = TensorScatter::new()
        .axis(args.axis)
        .mode(args.mode)
        .profile(args.common.profile);
    let mut inputs = vec![&args.past_cache, &args.update];
    inputs.extend(&args.write_indices);
    execute(op.into(), &inputs, &args.common)
}

/// A rayon pool of the requested size (at most [`max_threads`]), or the
/// global one.
pub fn thread_pool(threads: Option<u16>) -> Result<Option<rayon::ThreadPool>, CliError> {
    let Some(threads) = threads else {
        return Ok(None);
    };
    let max = max_threads();
    if usize::from(threads) > max {
        return Err(CliError::usage(format!(
            "--threads {threads}: at most {max} (4 per core; this machine has {})",
            max / 4
        )));
    }
    gatherscatter_threads::builder(usize::from(threads))
        .build()
        .map(Some)
        .map_err(|e| CliError::system(format!("cannot start {threads} threads: {e}")))
}

/// Run `f` on `pool`'s threads, or on the global pool.
pub fn in_pool<R: Send>(pool: &Option<rayon::ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// [`execute`] under `--mode` (and `--fill-value`, read in data's dtype).
fn execute_in_mode(
    op: Op,
    paths: &[&PathBuf],
    common: &CommonArgs,
    mode: &ModeArgs,
) -> Result<(), CliError> {
    if mode.mode == IndexPolicy::Raise && mode.fill_value.is_none() {
        return execute(op, paths, common);
    }
    run_files(op.command(), paths, common, None, |views| {
        let policy = match (&mode.mode, mode.fill_value.as_deref()) {
            (IndexPolicy::Fill(_), Some(text)) => {
                IndexPolicy::Fill(fill_value(Some(text), views[0].dtype())?)
            }
            (_, Some(_)) => {
                return Err(gatherscatter::Error::BadAttribute {
                    message: "--fill-value is only used with --mode fill".into(),
                })
            }
            (policy, None) => policy.clone(),
        };
        Ok(vec![policy.run(&op, views)?])
    })
}

fn execute(op: Op, paths: &[&PathBuf], common: &CommonArgs) -> Result<(), CliError> {
    run_files(op.command(), paths, common, None, |views| {
        Ok(vec![op.run(views)?])
    })
}

/// Load `paths`, run `call` on them (in the chosen pool) and write its
/// results: the first to `--output`, the second to `second_output` when
/// given; or time it with `--repeat`.
fn run_files(
    command: &str,
    paths: &[&PathBuf],
    common: &CommonArgs,
    second_output: Option<&PathBuf>,
    call: impl Fn(&[TensorView<'_>]) -> gatherscatter::Result<Vec<Tensor>> + Sync,
) -> Result<(), CliError> {
    if common.output.is_none() && common.repeat.is_none() {
        return Err(CliError::usage(
            "give -o/--output FILE, or --repeat N to time the op without writing".into(),
        ));
    }
    let inputs: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
    let outputs: Vec<&PathBuf> = common.output.iter().chain(second_output).collect();
    // Before any work: a result that would replace an input is refused.
    for output in &outputs {
        files::check_not_an_input(output, &inputs)?;
    }
    if let [first, second] = outputs[..] {
        if files::same_output(first, second) {
            return Err(CliError::usage(format!(
                "{}: both results would be written to this file",
                second.display()
            )));
        }
    }
    let tensors = inputs
        .iter()
        .map(|p| files::load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let views: Vec<TensorView<'_>> = tensors.iter().map(TensorView::from).collect();
    if common.repeat.is_some() {
        crate::reuse::keep_freed_blocks();
    }
    let pool = thread_pool(common.threads)?;
    // The first call validates and is the warm-up of --repeat.
    let results = in_pool(&pool, || call(&views))?;
    let named = [
        (common.output.as_ref(), "output"),
        (second_output, "arg_output"),
    ];
    let staged = named
        .iter()
        .zip(&results)
        .filter_map(|((path, name), tensor)| path.map(|p| files::stage(p, tensor, name, &inputs)))
        .collect::<Result<Vec<_>, _>>()?;
    files::commit(staged)?;
    if let Some(repeat) = common.repeat {
        drop(results);
        let mut times = Vec::new();
        for _ in 0..repeat {
            let start = Instant::now();
            let out = in_pool(&pool, || call(&views))?;
            times.push(start.elapsed().as_secs_f64());
            drop(out);
        }
        let threads = pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
        println!("{}", timing_json(command, threads, &times));
    }
    Ok(())
}

/// `{"op": ..., "threads": T, "repeat": N, "times_s": [...]}`.
pub fn timing_json(op: &str, threads: usize, times: &[f64]) -> String {
    let list: Vec<String> = times.iter().map(|t| format!("{t:e}")).collect();
    format!(
        "{{\"op\": \"{op}\", \"threads\": {threads}, \"repeat\": {}, \"times_s\": [{}]}}",
        times.len(),
        list.join(", ")
    )
}
