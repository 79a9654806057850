//! `iota-dashboard`: the network dashboard on its own (the orchestrator can also mount it; see the
//! library docs).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use iota_dashboard::{serve, DashboardConfig, Options, DEFAULT_ADDR};

/// Serve the iota-rs network dashboard.
#[derive(Debug, Parser)]
#[command(name = "iota-dashboard", version, about)]
struct Args {
	/// The orchestrator's JSON-RPC WebSocket.
	#[arg(long, env = "IOTA_ORCHESTRATOR", default_value = "ws://127.0.0.1:9955")]
	orchestrator: String,
	/// Chain node WebSocket URL, or several comma-separated (`ws://a:9944,ws://b:9944`): calls go to the
	/// first that answers and move to the next when its connection is lost.
	#[arg(long = "chain-rpc", env = "IOTA_CHAIN_RPC", default_value = "ws://127.0.0.1:9944")]
	chain_rpc: String,
	/// Address to listen on.
	#[arg(long, env = "IOTA_DASHBOARD_ADDR", default_value = DEFAULT_ADDR)]
	listen: SocketAddr,
	/// Milliseconds between refreshes (and the page's live-update period).
	#[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(100..))]
	refresh_ms: u64,
	/// Seconds a source may take to answer.
	#[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
	source_timeout_secs: u64,
	/// Status polls kept for the throughput charts.
	#[arg(long, default_value_t = 720, value_parser = clap::value_parser!(u64).range(2..100_000))]
	history: u64,
	/// Recent epochs whose trust records are kept.
	#[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..1000))]
	trust_epochs: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	tracing_subscriber::fmt()
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
		)
		.init();
	let args = Args::parse();
	let config = DashboardConfig {
		orchestrator_ws_url: args.orchestrator,
		chain_ws_url: args.chain_rpc,
		options: Options {
			refresh: Duration::from_millis(args.refresh_ms),
			source_timeout: Duration::from_secs(args.source_timeout_secs),
			history_len: args.history as usize,
			trust_epochs: args.trust_epochs,
		},
	};
	tracing::info!(orchestrator = %config.orchestrator_ws_url, chain = %config.chain_ws_url, "starting; open http://{}", args.listen);
	serve(args.listen, config).await.context("dashboard")
}
