//! `gsx`: see `gsx --help`.

use std::process::ExitCode;

use clap::Parser;
use gsx::commands::{execute, Cli};

fn main() -> ExitCode {
    match execute(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gsx: {e}");
            ExitCode::from(e.exit_code)
        }
    }
}
