//! `gsx`: see `gsx --help`.

use std::process::ExitCode;

use clap::Parser;
use gsx::commands::{execute, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    gsx::heap::reexec_with_tunables(gsx::heap::REUSE_TUNABLES, cli.system_malloc);
    match execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gsx: {e}");
            ExitCode::from(e.exit_code)
        }
    }
}
