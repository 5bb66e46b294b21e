//! `gsx`: see `gsx --help`.

use std::panic::AssertUnwindSafe;
use std::process::ExitCode;

use clap::Parser;
use gatherscatter_heap::BoundedHeap;
use gsx::budget;
use gsx::commands::{execute, Cli};
use gsx::error::{CliError, EXIT_INTERNAL};

// The heap under the memory budget (`gsx::budget`).
#[global_allocator]
static HEAP: BoundedHeap = BoundedHeap;

fn main() -> ExitCode {
    let cli = Cli::parse();
    budget::set_budget(cli.max_memory.unwrap_or_else(budget::default_budget));
    // A panic is a bug: it is reported as one (exit 70), after unwinding
    // has removed any temporary file.
    std::panic::set_hook(Box::new(|info| eprintln!("gsx: error[internal]: {info}")));
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        gsx::files::install_signal_cleanup()?;
        // The kernels would read a bad value as unset: refuse it here.
        gatherscatter::tuning::Tuning::from_env().map_err(|e| CliError::usage(e.to_string()))?;
        gatherscatter_threads::pinning_from_env().map_err(CliError::usage)?;
        // Nothing has used rayon yet, so this cannot fail.
        let _ = gatherscatter_threads::configure_global();
        execute(cli)
    }));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => report(&e),
        Err(_) => ExitCode::from(EXIT_INTERNAL),
    }
}

fn report(e: &CliError) -> ExitCode {
    eprintln!("gsx: {e}");
    ExitCode::from(e.exit_code())
}
