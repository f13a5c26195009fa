//! bloatlab recipes and sweeps: the seed experiments as declarative TOML
//! files, a generic parameter sweep over `bloatlab lab`, and the in-process
//! pacing experiment of seed 004.
//!
//! * [`recipe`] — the file format, validation with line numbers, built-ins;
//! * [`params`] — every parameter a recipe or sweep can set and its checks;
//! * [`sweep`] — recipes made from `--set` values and test options;
//! * [`runner`] — points, the `bloatlab lab` subprocesses, the results folder;
//! * [`pacing`] — the paced UDP sender/receiver and its timer strategies;
//! * [`rows`], [`tables`], [`plot`] — metrics, seed-style tables, plots.
//!
//! User documentation: docs/recipes.md.
#![forbid(unsafe_code)]
pub mod pacing;
pub mod params;
pub mod plot;
pub mod points;
pub mod recipe;
pub mod rows;
pub mod runner;
pub mod seeds;
pub mod sweep;
pub mod tables;
pub mod units;
