//! `iota-validator`: the validator daemon (see the crate docs and `iota_validator::daemon`).
//!
//! ```sh
//! iota-validator --suri //Bob --chain-rpc ws://127.0.0.1:9944 --orchestrator ws://127.0.0.1:9955
//! ```
//! Every flag has an `IOTA_*` environment variable (`--help`). Logs: `RUST_LOG` (default `info`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use iota_chain::Signer;
use iota_validator::daemon::{Config, Daemon};
use iota_validator::metrics::Metrics;
use iota_validator::spot_check::{BACKWARD_CHECKS, FORWARD_CHECKS};

/// Validator daemon: recomputes sampled work, audits butterfly shards, scores miners (CLASP) and
/// submits verdicts and weights on chain.
#[derive(Parser, Debug)]
#[command(name = "iota-validator", version)]
struct Cli {
	/// Secret URI of the validator key (`//Bob`, a mnemonic, a 0x seed).
	#[arg(
		long,
		env = "IOTA_SURI",
		hide_env_values = true,
		conflicts_with = "key_file",
		required_unless_present = "key_file"
	)]
	suri: Option<String>,
	/// File holding the secret URI.
	#[arg(long, env = "IOTA_KEY_FILE")]
	key_file: Option<PathBuf>,
	/// Chain node WebSocket URL, or several comma-separated (`ws://a:9944,ws://b:9944`): calls go to the
	/// first that answers and move to the next when its connection is lost.
	#[arg(long = "chain-rpc", env = "IOTA_CHAIN_RPC", default_value = "ws://127.0.0.1:9944")]
	node_url: String,
	/// Orchestrator WebSocket URL.
	#[arg(long = "orchestrator", env = "IOTA_ORCHESTRATOR", default_value = "ws://127.0.0.1:9955")]
	orchestrator_url: String,
	/// Stake to register with if not yet a validator, in the smallest unit (default: the run's minimum).
	#[arg(long, env = "IOTA_VALIDATOR_STAKE")]
	stake: Option<u128>,
	/// Prometheus `/metrics` listen address.
	#[arg(long, env = "IOTA_METRICS_ADDR", default_value = "127.0.0.1:9957")]
	metrics_addr: SocketAddr,
	/// Forward spot-checks per (stage, miner) and epoch.
	#[arg(long, env = "IOTA_FORWARD_CHECKS", default_value_t = FORWARD_CHECKS)]
	forward_checks: usize,
	/// Backward spot-checks per (stage, miner) and epoch (body stages). Weights come only from
	/// conclusive checks: with both counts 0 a sync-mode validator judges nobody and sets no weights.
	#[arg(long, env = "IOTA_BACKWARD_CHECKS", default_value_t = BACKWARD_CHECKS)]
	backward_checks: usize,
	/// Weights version key (default: the run config's).
	#[arg(long, env = "IOTA_WEIGHTS_VERSION")]
	weights_version: Option<u64>,
	/// Do not call `finalize_epoch` when an epoch's scoring window has closed.
	#[arg(long, env = "IOTA_NO_FINALIZE")]
	no_finalize: bool,
	/// First epoch to audit (default: the chain's next epoch to finalize).
	#[arg(long, env = "IOTA_START_EPOCH")]
	start_epoch: Option<u32>,
	/// Milliseconds between passes over the chain.
	#[arg(long, env = "IOTA_POLL_MS", default_value_t = 2_000)]
	poll_ms: u64,
	/// Per-request timeout (orchestrator calls, presigned transfers), milliseconds.
	#[arg(long, env = "IOTA_REQUEST_TIMEOUT_MS", default_value_t = 30_000)]
	request_timeout_ms: u64,
	/// Largest object downloaded, MiB.
	#[arg(long, env = "IOTA_MAX_OBJECT_MIB", default_value_t = 1024)]
	max_object_mib: u64,
	/// Folder for the validator's own state: the weight vectors and salts it committed to and has still
	/// to reveal (a subfolder per account; keep it across restarts, or the commitments are lost).
	#[arg(long, env = "IOTA_VALIDATOR_STATE_DIR", default_value_os_t = default_state_dir())]
	state_dir: PathBuf,
	/// Memory for objects read recently, MiB (local mode reads each revealed inner state, 38 MB for a
	/// small-preset stage, in several checks; 0 turns the cache off).
	#[arg(long, env = "IOTA_OBJECT_CACHE_MIB", default_value_t = 512)]
	object_cache_mib: u64,
	/// Device of the recomputations: cpu, cuda or cuda:N (a build with the `cuda` feature). The
	/// tolerances are the same on every device.
	#[arg(long, env = "IOTA_DEVICE", default_value = "cpu")]
	device: iota_model::DeviceSpec,
}

/// `$XDG_DATA_HOME/iota-validator`, else `$HOME/.local/share/iota-validator`, else
/// `./iota-validator-state`.
fn default_state_dir() -> PathBuf {
	let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
	var("XDG_DATA_HOME")
		.or_else(|| var("HOME").map(|h| h.join(".local/share")))
		.map(|d| d.join("iota-validator"))
		.unwrap_or_else(|| PathBuf::from("iota-validator-state"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	tracing_subscriber::fmt()
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env()
				.unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
		)
		.init();
	let cli = Cli::parse();
	let signer = match (&cli.suri, &cli.key_file) {
		(Some(uri), _) => Signer::from_uri(uri).context("--suri")?,
		(None, Some(path)) => Signer::from_file(path).context("--key-file")?,
		(None, None) => anyhow::bail!("one of --suri or --key-file is required"),
	};
	let device = cli.device.open()?;
	let metrics = Metrics::new().context("metrics")?;
	iota_telemetry::serve(cli.metrics_addr, metrics.registry().clone())
		.await
		.with_context(|| format!("binding the metrics address {}", cli.metrics_addr))?;
	tracing::info!(addr = %cli.metrics_addr, "metrics at /metrics");
	let cfg = Config {
		node_url: cli.node_url,
		orchestrator_url: cli.orchestrator_url,
		stake: cli.stake,
		forward_checks: cli.forward_checks,
		backward_checks: cli.backward_checks,
		weights_version: cli.weights_version,
		finalize: !cli.no_finalize,
		start_epoch: cli.start_epoch,
		poll: Duration::from_millis(cli.poll_ms.max(100)),
		request_timeout: Duration::from_millis(cli.request_timeout_ms.max(100)),
		max_object_bytes: cli.max_object_mib.saturating_mul(1 << 20),
		object_cache_bytes: cli.object_cache_mib.saturating_mul(1 << 20),
		state_dir: cli.state_dir,
		device,
	};
	tracing::info!(account = %signer.account_id(), node = %cfg.node_url, orchestrator = %cfg.orchestrator_url, "starting");
	// Keep trying until the node answers and the validator is registered.
	let daemon = loop {
		match Daemon::start(cfg.clone(), signer.clone(), metrics.clone()).await {
			Ok(d) => break d,
			Err(e) => {
				metrics.error(e.kind());
				tracing::warn!(error = %e, "cannot start yet; retrying");
				tokio::time::sleep(cfg.poll).await;
			},
		}
	};
	daemon.run().await;
	Ok(())
}
