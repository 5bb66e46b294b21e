//! `gsx-bench`: times one benchmark workload of `../shared/bench/peers.py`,
//! following its external-program protocol, so gatherscatter is measured in
//! the same run as numpy, onnxruntime and PyTorch.
//!
//! ```text
//! gsx-bench --workload-dir DIR --threads T --warmup W --reps R --min-sample-s S --out OUT.npy [--into]
//!           [--cold-cache-mib N] [--tuning KNOB=VALUE,...]
//! ```
//!
//! It reads `DIR/manifest.json` and the `.npy` inputs into memory, writes the
//! output of one untimed call to `OUT.npy`, runs `W` warm-up calls, then
//! prints `{"times_s": [...], "inner": k, "version": "...", "tuning": "..."}` as its last
//! line: one per-call time per sample, a sample batching `k` calls when one
//! call is shorter than `S` seconds. Each call returns a fresh output unless
//! `--into` is given, which writes every call into one caller-owned buffer
//! (like onnxruntime's IOBinding or torch's `out=`). `--cold-cache-mib N`
//! reads N MiB of another buffer before each call, untimed, and times one
//! call per sample, so no call finds its bytes cached. Exit code 3: the
//! workload is not one this program knows.
//!
//! Unless `--system-malloc` is given, the program re-executes itself with
//! the heap settings of [`heap`], which make glibc's heap behave like the
//! peers' allocators, and asks for huge pages under its large blocks
//! (inputs, outputs) as numpy does for its arrays ([`HugePageHeap`]). These
//! are the benchmark's business: `gsx` itself runs on the default heap.

mod heap;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use gatherscatter::tuning::{self, Tuning};
use gatherscatter::{Gather, GatherElements, Reduction, ScatterElements, Tensor};
use gsx::error::CliError;
use gsx::files;
use heap::HugePageHeap;

#[global_allocator]
static HEAP: HugePageHeap = HugePageHeap::new();

#[derive(Parser, Debug)]
#[command(
    name = "gsx-bench",
    version,
    about = "Time one peers.py workload (external-program protocol)"
)]
struct Args {
    /// Folder with manifest.json and the inputs as .npy.
    #[arg(long)]
    workload_dir: PathBuf,
    /// Threads of the rayon pool the op runs on.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Untimed calls after the first (checked) one.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Timed samples.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// A sample batches calls until it lasts at least this long.
    #[arg(long, default_value_t = 0.02)]
    min_sample_s: f64,
    /// Where the output of the first call is written (.npy).
    #[arg(long)]
    out: PathBuf,
    /// Write every call into one preallocated output instead of a fresh one.
    #[arg(long)]
    into: bool,
    /// Before every timed call, read a buffer of this many MiB (not timed),
    /// so each call starts with its inputs and output out of the caches;
    /// every sample is then one call. 0 (the default, as in the peer
    /// harness) times back-to-back calls.
    #[arg(long, default_value_t = 0)]
    cold_cache_mib: usize,
    /// Keep glibc's default allocator settings (4 KiB pages, large blocks
    /// mapped and unmapped per call).
    #[arg(long)]
    system_malloc: bool,
    /// Force kernel strategies, as `GATHERSCATTER_TUNING` does
    /// (`stores=cached|streaming`, `word_gather=scalar|vector`,
    /// `block_order=output|source`, `bag_fold=memory|registers`,
    /// `row_fetch=read|prefetch`, `stream_fetch=ahead|hardware`,
    /// `block_prefetch=l1|l2`, `plane_reads=packed|in_place`,
    /// comma-separated); the default is
    /// what that variable says, else `auto`.
    #[arg(long)]
    tuning: Option<Tuning>,
}

/// The workload's operator with its attributes.
enum Workload {
    Gather(Gather),
    GatherElements(GatherElements),
    ScatterElements(ScatterElements),
}

struct Inputs {
    data: Tensor,
    indices: Tensor,
    updates: Option<Tensor>,
}

impl Workload {
    fn fresh(&self, x: &Inputs) -> Result<Tensor, CliError> {
        Ok(match self {
            Workload::Gather(op) => op.run(&x.data, &x.indices)?,
            Workload::GatherElements(op) => op.run(&x.data, &x.indices)?,
            Workload::ScatterElements(op) => op.run(&x.data, &x.indices, updates(x)?)?,
        })
    }

    fn into(&self, x: &Inputs, out: &mut Tensor) -> Result<(), CliError> {
        match self {
            Workload::Gather(op) => op.run_into(&x.data, &x.indices, out)?,
            Workload::GatherElements(op) => op.run_into(&x.data, &x.indices, out)?,
            Workload::ScatterElements(op) => op.run_into(&x.data, &x.indices, updates(x)?, out)?,
        }
        Ok(())
    }
}

fn updates(x: &Inputs) -> Result<&Tensor, CliError> {
    x.updates
        .as_ref()
        .ok_or_else(|| CliError::usage("the manifest names no updates file".into()))
}

/// Exit 3: a workload this program does not implement.
struct Unsupported(String);

fn parse_workload(manifest: &serde_json::Value) -> Result<Workload, Unsupported> {
    let field = |k: &str| manifest.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let axis = manifest.get("axis").and_then(|v| v.as_i64()).unwrap_or(0);
    match (field("op"), field("reduction")) {
        ("Gather", _) => Ok(Workload::Gather(Gather::new(axis))),
        ("GatherElements", _) => Ok(Workload::GatherElements(GatherElements::new(axis))),
        ("ScatterElements", reduction) => {
            let reduction = match reduction {
                "none" | "" => Reduction::None,
                "add" => Reduction::Add,
                "mul" => Reduction::Mul,
                "max" => Reduction::Max,
                "min" => Reduction::Min,
                other => return Err(Unsupported(format!("reduction {other:?}"))),
            };
            Ok(Workload::ScatterElements(
                ScatterElements::new(axis).reduction(reduction),
            ))
        }
        (op, _) => Err(Unsupported(format!("op {op:?}"))),
    }
}

/// An input named in the manifest, read into memory (as the peers time
/// ops on arrays in memory too).
fn load_input(
    dir: &Path,
    manifest: &serde_json::Value,
    key: &str,
) -> Result<Option<Tensor>, CliError> {
    let Some(name) = manifest["files"].get(key).and_then(|v| v.as_str()) else {
        return Ok(None);
    };
    files::load(&dir.join(name)).map(Some)
}

fn run(args: &Args) -> Result<Result<String, Unsupported>, CliError> {
    match args.tuning {
        Some(forced) => tuning::set_global(forced),
        // The kernels would read a bad value as unset: refuse it here.
        None => {
            Tuning::from_env().map_err(|e| CliError::usage(e.to_string()))?;
        }
    }
    gatherscatter_threads::pinning_from_env().map_err(CliError::usage)?;
    let manifest_path = args.workload_dir.join("manifest.json");
    let text =
        std::fs::read_to_string(&manifest_path).map_err(|e| CliError::io(&manifest_path, e))?;
    let manifest: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError::bad_file(&manifest_path, e.to_string()))?;
    let workload = match parse_workload(&manifest) {
        Ok(w) => w,
        Err(unsupported) => return Ok(Err(unsupported)),
    };
    let missing =
        |k: &str| CliError::bad_file(&manifest_path, format!("the manifest names no {k} file"));
    let inputs = Inputs {
        data: load_input(&args.workload_dir, &manifest, "data")?.ok_or_else(|| missing("data"))?,
        indices: load_input(&args.workload_dir, &manifest, "indices")?
            .ok_or_else(|| missing("indices"))?,
        updates: load_input(&args.workload_dir, &manifest, "updates")?,
    };
    let pool = gatherscatter_threads::builder(args.threads)
        .build()
        .map_err(|e| CliError::internal(format!("cannot start {} threads: {e}", args.threads)))?;
    // The whole loop runs on a pool thread, so a call too small to split
    // never crosses threads, as when a runtime calls the op from its own pool.
    pool.install(|| time_calls(args, &workload, &inputs))
        .map(Ok)
}

/// Lines read between timed calls to push the previous call's bytes out of
/// the caches.
struct CacheSweep {
    lines: Vec<u8>,
}

impl CacheSweep {
    fn new(mib: usize) -> Result<Self, CliError> {
        let too_large =
            || CliError::usage(format!("--cold-cache-mib {mib}: cannot allocate that much"));
        let bytes = mib.checked_mul(1 << 20).ok_or_else(too_large)?;
        let mut lines = Vec::new();
        lines.try_reserve_exact(bytes).map_err(|_| too_large())?;
        // Non-zero bytes: a zeroed allocation could map every page to the
        // kernel's one zero page, which would not evict anything.
        lines.resize(bytes, 1);
        Ok(CacheSweep { lines })
    }

    fn is_on(&self) -> bool {
        !self.lines.is_empty()
    }

    fn run(&self) {
        let sum = self
            .lines
            .iter()
            .step_by(64)
            .fold(0u8, |acc, &b| acc.wrapping_add(b));
        std::hint::black_box(sum);
    }
}

/// Warm up, then time `args.reps` samples, as the harness times the
/// peers in its own process (`time_callable` in `peers.py`): one output
/// alive at a time, a sample of one call freeing its output after the clock
/// stops, a sample of several freeing each inside it. (The protocol's
/// example program, `r = fn()` in its loop, frees each output only after
/// the next call made its own, so two outputs are alive and every fresh
/// call writes memory the last call did not: W2 fresh on one thread, numpy
/// in that pattern 2.41-2.55 ms against 1.99-2.04 with one output alive,
/// medians of three rounds in one process.)
fn time_calls(args: &Args, workload: &Workload, inputs: &Inputs) -> Result<String, CliError> {
    let sweep = CacheSweep::new(args.cold_cache_mib)?;
    let mut buffer = workload.fresh(inputs)?;
    files::save(&args.out, &buffer, "output", &[])?;
    let mut call = || -> Result<Option<Tensor>, CliError> {
        if args.into {
            workload.into(inputs, &mut buffer)?;
            Ok(None)
        } else {
            workload.fresh(inputs).map(Some)
        }
    };
    let mut single = 0.0;
    for _ in 0..args.warmup.max(1) {
        sweep.run();
        let start = Instant::now();
        let out = call()?;
        single = start.elapsed().as_secs_f64();
        drop(out);
    }
    let inner = if single >= args.min_sample_s || sweep.is_on() {
        1
    } else {
        (args.min_sample_s / single.max(1e-9)).ceil() as usize
    };
    let mut times = Vec::with_capacity(args.reps);
    for _ in 0..args.reps {
        sweep.run();
        let start = Instant::now();
        if inner == 1 {
            let out = call()?;
            times.push(start.elapsed().as_secs_f64());
            drop(out);
        } else {
            for _ in 0..inner {
                drop(call()?);
            }
            times.push(start.elapsed().as_secs_f64() / inner as f64);
        }
    }
    let list: Vec<String> = times.iter().map(|t| format!("{t:e}")).collect();
    let mode = match (args.into, args.system_malloc) {
        (true, false) => "into",
        (false, false) => "fresh",
        (true, true) => "into, system malloc",
        (false, true) => "fresh, system malloc",
    };
    let cold = match args.cold_cache_mib {
        0 => String::new(),
        mib => format!(", {mib} MiB read before each call"),
    };
    Ok(format!(
        "{{\"times_s\": [{}], \"inner\": {inner}, \"version\": \"gatherscatter {} ({mode}{cold})\", \"tuning\": \"{}\"}}",
        list.join(", "),
        env!("CARGO_PKG_VERSION"),
        tuning::report(),
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    heap::reexec_with_tunables(heap::HUGE_PAGE_TUNABLES, args.system_malloc);
    if !args.system_malloc {
        HEAP.enable();
    }
    match run(&args) {
        Ok(Ok(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(Err(Unsupported(what))) => {
            eprintln!("unsupported: {what}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("error[{}]: {}", e.kind, e.message);
            ExitCode::from(e.exit_code())
        }
    }
}
