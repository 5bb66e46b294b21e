//! The library behind the `gsx` command: `.npy` and `.pb` tensor files,
//! atomic output writes, and the subcommands.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod budget;
pub mod commands;
pub mod error;
pub mod files;
pub mod npy;
pub mod reuse;
pub mod scalar;

pub use error::CliError;
