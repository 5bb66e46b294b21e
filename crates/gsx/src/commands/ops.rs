//! The per-op subcommands on tensor files.

use std::path::PathBuf;
use std::time::Instant;

use gatherscatter::{
    Gather, GatherElements, GatherND, Op, ScatterElements, ScatterND, ScatterReduce, TensorScatter,
    TensorView,
};

use super::{
    CommonArgs, ElementsArgs, GatherArgs, GatherNdArgs, ScatterElementsArgs, ScatterNdArgs,
    ScatterReduceArgs, TensorScatterArgs,
};
use crate::error::CliError;
use crate::files;

/// `gsx gather`.
pub fn gather(args: &GatherArgs) -> Result<(), CliError> {
    let op = Gather::new(args.axis)
        .batch_dims(args.batch_dims)
        .profile(args.common.profile);
    execute(op.into(), &[&args.data, &args.indices], &args.common)
}

/// `gsx gather-elements`.
pub fn gather_elements(args: &ElementsArgs) -> Result<(), CliError> {
    let op = GatherElements::new(args.axis).profile(args.common.profile);
    execute(op.into(), &[&args.data, &args.indices], &args.common)
}

/// `gsx scatter-elements`.
pub fn scatter_elements(args: &ScatterElementsArgs) -> Result<(), CliError> {
    let op = ScatterElements::new(args.axis)
        .reduction(args.reduction)
        .profile(args.common.profile);
    execute(
        op.into(),
        &[&args.data, &args.indices, &args.updates],
        &args.common,
    )
}

/// `gsx scatter-reduce`.
pub fn scatter_reduce(args: &ScatterReduceArgs) -> Result<(), CliError> {
    let op = ScatterReduce::new(args.axis, args.reduce)
        .include_self(args.include_self)
        .profile(args.common.profile);
    execute(
        op.into(),
        &[&args.data, &args.indices, &args.updates],
        &args.common,
    )
}

/// `gsx gather-nd`.
pub fn gather_nd(args: &GatherNdArgs) -> Result<(), CliError> {
    let op = GatherND::new()
        .batch_dims(args.batch_dims)
        .profile(args.common.profile);
    execute(op.into(), &[&args.data, &args.indices], &args.common)
}

/// `gsx scatter-nd`.
pub fn scatter_nd(args: &ScatterNdArgs) -> Result<(), CliError> {
    let op = ScatterND::new()
        .reduction(args.reduction)
        .profile(args.common.profile);
    execute(
        op.into(),
        &[&args.data, &args.indices, &args.updates],
        &args.common,
    )
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
    rayon::ThreadPoolBuilder::new()
        .num_threads(usize::from(threads))
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

fn execute(op: Op, paths: &[&PathBuf], common: &CommonArgs) -> Result<(), CliError> {
    if common.output.is_none() && common.repeat.is_none() {
        return Err(CliError::usage(
            "give -o/--output FILE, or --repeat N to time the op without writing".into(),
        ));
    }
    let inputs: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
    if let Some(output) = &common.output {
        // Before any work: a result that would replace an input is refused.
        files::check_not_an_input(output, &inputs)?;
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
    let result = in_pool(&pool, || op.run(&views))?;
    if let Some(output) = &common.output {
        files::save(output, &result, "output", &inputs)?;
    }
    if let Some(repeat) = common.repeat {
        drop(result);
        let mut times = Vec::new();
        for _ in 0..repeat {
            let start = Instant::now();
            let out = in_pool(&pool, || op.run(&views))?;
            times.push(start.elapsed().as_secs_f64());
            drop(out);
        }
        let threads = pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
        println!("{}", timing_json(op.command(), threads, &times));
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
