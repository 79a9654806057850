//! Command line of `iota-node`.

#[cfg(feature = "runtime-benchmarks")]
use polkadot_sdk::frame_benchmarking_cli;
use polkadot_sdk::sc_cli;

/// `iota-node [SUBCOMMAND] [RUN OPTIONS]`.
#[derive(Debug, clap::Parser)]
pub struct Cli {
	/// A subcommand; without one the node runs.
	#[command(subcommand)]
	pub subcommand: Option<Subcommand>,

	/// Options of a running node (`--dev`, `--chain`, `--rpc-port`, ...).
	#[clap(flatten)]
	pub run: sc_cli::RunCmd,
}

/// Subcommands of `iota-node`.
#[derive(Debug, clap::Subcommand)]
#[allow(clippy::large_enum_variant)]
pub enum Subcommand {
	/// Key management (generate, inspect, insert).
	#[command(subcommand)]
	Key(sc_cli::KeySubcommand),
	/// Print a chain spec as JSON (`--raw` for the storage form).
	BuildSpec(sc_cli::BuildSpecCmd),
	/// Validate blocks.
	CheckBlock(sc_cli::CheckBlockCmd),
	/// Export blocks.
	ExportBlocks(sc_cli::ExportBlocksCmd),
	/// Export the state of a block as a chain spec.
	ExportState(sc_cli::ExportStateCmd),
	/// Import blocks.
	ImportBlocks(sc_cli::ImportBlocksCmd),
	/// Remove the whole chain database.
	PurgeChain(sc_cli::PurgeChainCmd),
	/// Revert the chain to a previous state.
	Revert(sc_cli::RevertCmd),
	/// Benchmarks (built with `--features runtime-benchmarks`).
	#[cfg(feature = "runtime-benchmarks")]
	#[command(subcommand)]
	Benchmark(frame_benchmarking_cli::BenchmarkCmd),
	/// Database metadata.
	ChainInfo(sc_cli::ChainInfoCmd),
}
