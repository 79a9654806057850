//! `iota-node`: the iota-rs chain node.
//!
//! - `iota-node --dev`: one node that authors a block every second (aura, one authority) and finalizes
//!   with grandpa, on a temporary database; Alice is sudo and orchestrator, Bob and Charlie validators.
//! - `iota-node --chain local --alice` (and `--bob`, `--charlie`, `--dave`): a four-authority local testnet.
//! - The usual Substrate subcommands: `build-spec`, `purge-chain`, `key`, `export-blocks`, ..., and
//!   `benchmark pallet` when built with `--features runtime-benchmarks`.
//!
//! RPC listens on 127.0.0.1 (`--rpc-port`, default 9944) unless `--rpc-external` is given; Prometheus
//! metrics on 127.0.0.1:9615 (`--prometheus-port`). The database is ParityDB.

// `sc_cli::Error` is large and is the error type of every Substrate CLI entry point; we do not own it.
#![allow(clippy::result_large_err)]

mod chain_spec;
mod cli;
mod command;
mod rpc;
mod service;

fn main() -> polkadot_sdk::sc_cli::Result<()> {
	command::run()
}
