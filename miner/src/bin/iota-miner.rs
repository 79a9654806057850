//! `iota-miner`: hold one pipeline stage, train on work pulled from the orchestrator, join the butterfly
//! merge (see the crate docs of `iota_miner`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use iota_chain::{IotaClient, Signer};
use iota_miner::{HttpIo, Metrics, Miner, MinerConfig, Orchestrator, RpcOrchestrator, RpcRetry};
use iota_model::DeviceSpec;
use iota_rpc::RunSpec;
use iota_storage::RetryPolicy;

/// Miner daemon of iota-rs.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
	/// Chain node WebSocket URL, or several comma-separated (`ws://a:9944,ws://b:9944`): calls go to the
	/// first that answers and move to the next when its connection is lost.
	#[arg(long, env = "IOTA_CHAIN_RPC", default_value = "ws://127.0.0.1:9944")]
	chain_rpc: String,
	/// Orchestrator RPC (WebSocket).
	#[arg(long, env = "IOTA_ORCHESTRATOR", default_value = "ws://127.0.0.1:9955")]
	orchestrator: String,
	/// Secret URI of the miner's sr25519 key (e.g. `//Bob`; a mnemonic; a 0x seed).
	#[arg(long, env = "IOTA_SURI", conflicts_with = "key_file", hide_env_values = true)]
	suri: Option<String>,
	/// File holding the secret URI.
	#[arg(long, env = "IOTA_KEY_FILE")]
	key_file: Option<PathBuf>,
	/// Compute device of the stage's forward and backward passes: cpu, cuda or cuda:N (a build with the
	/// `cuda` feature; the AdamW and outer steps run on the CPU either way).
	#[arg(long, env = "IOTA_DEVICE", default_value = "cpu")]
	device: DeviceSpec,
	/// Compute threads (sets RAYON_NUM_THREADS for candle; 1 when several miners share a machine).
	#[arg(long, env = "IOTA_THREADS")]
	threads: Option<usize>,
	/// Serve Prometheus metrics on this address (`/metrics`).
	#[arg(long, env = "IOTA_METRICS_ADDR")]
	metrics_addr: Option<SocketAddr>,
	/// Cache data shards here.
	#[arg(long, env = "IOTA_CACHE_DIR")]
	cache_dir: Option<PathBuf>,
	/// Local mode: keep the inner-step log (what answers challenges) in this folder, which it owns (what an
	/// earlier process of the same run left is kept and answered from after a restart, anything else is
	/// removed); default `<cache-dir>/inner-s<stage>-<account>`, else a folder in the temporary directory.
	#[arg(long, env = "IOTA_REVEAL_DIR")]
	reveal_dir: Option<PathBuf>,
	/// Local mode: most disk the inner-step log may use, in MiB (the current epoch and those whose
	/// challenges are still due: `12·P + 8` bytes per epoch start and `4·P` per inner step).
	#[arg(long, env = "IOTA_REVEAL_MAX_MIB", default_value_t = 2048)]
	reveal_max_mib: u64,
	/// Largest object moved, in MiB.
	#[arg(long, env = "IOTA_MAX_OBJECT_MIB", default_value_t = 1024)]
	max_object_mib: u64,
	/// Inject a fault (tests only): `perturb=<amplitude>` adds noise to uploaded activations;
	/// `perturb-state=<amplitude>` (local mode) adds noise to the gradient of about half the inner
	/// steps (a fixed coin per epoch and step); `ignore-challenges` (local mode) reveals nothing; `pseudo-gradient=<factor>` (local mode) submits
	/// the pseudo-gradient scaled; `slow-upload=<ms>@<stage>` waits before uploading the epoch's
	/// gradient when seated at that stage.
	#[cfg(feature = "fault-injection")]
	#[arg(long, env = "IOTA_FAULT")]
	fault: Option<iota_miner::Fault>,
}

fn main() -> anyhow::Result<()> {
	tracing_subscriber::fmt()
		.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env()
				.unwrap_or_else(|_| "info,jsonrpsee=warn,subxt=warn".into()),
		)
		.init();
	let cli = Cli::parse();
	if let Some(t) = cli.threads {
		if t == 0 {
			bail!("--threads must be at least 1");
		}
		// Read by candle's thread pool when it starts; set before any other thread exists.
		std::env::set_var("RAYON_NUM_THREADS", t.to_string());
	}
	tokio::runtime::Builder::new_multi_thread()
		.worker_threads(2)
		.enable_all()
		.build()?
		.block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
	let device = cli.device.open()?;
	let signer = match (&cli.suri, &cli.key_file) {
		(Some(s), None) => Signer::from_uri(s)?,
		(None, Some(p)) => Signer::from_file(p)?,
		_ => bail!("give the miner's key with --suri or --key-file"),
	};
	let me = signer.account_id();
	tracing::info!(account = %me, "starting");

	let chain = IotaClient::connect(&cli.chain_rpc)
		.await
		.with_context(|| format!("connecting to the chain at {}", cli.chain_rpc))?;
	let stage = iota_miner::chain::register(&chain, &signer).await?;
	let model_hash = iota_miner::chain::model_hash(&chain).await?;

	let orch = Arc::new(RpcOrchestrator::new(
		cli.orchestrator.clone(),
		signer.keypair().clone(),
		RpcRetry::default(),
	));
	let spec_bytes = orch.run_spec().await.context("fetching the run spec")?;
	let spec = RunSpec::from_bytes_checked(&spec_bytes, &model_hash)
		.context("checking the run spec against the chain")?;
	tracing::info!(run = %spec.run, stage, stages = spec.model.n_stages(), encoding = %spec.encoding, "run spec verified");

	let io = Arc::new(HttpIo::new(
		RetryPolicy::default(),
		Duration::from_secs(60),
		cli.max_object_mib * 1024 * 1024,
	)?);
	let metrics = Metrics::new()?;
	if let Some(addr) = cli.metrics_addr {
		iota_miner::metrics::serve(addr, metrics.clone())
			.await
			.with_context(|| format!("serving metrics on {addr}"))?;
		tracing::info!(%addr, "metrics at /metrics");
	}
	#[allow(unused_mut)]
	let mut cfg = MinerConfig {
		device,
		cache_dir: cli.cache_dir.clone(),
		reveal_dir: cli.reveal_dir.clone(),
		reveal_max_bytes: cli.reveal_max_mib << 20,
		..MinerConfig::default()
	};
	#[cfg(feature = "fault-injection")]
	{
		cfg.fault = cli.fault;
		if let Some(f) = cfg.fault {
			tracing::warn!(?f, "FAULT INJECTION ON: this miner uploads corrupted activations");
		}
	}
	let mut miner = Miner::new(orch, io, Arc::new(chain), spec, stage, cfg, metrics)?;

	let (tx, rx) = tokio::sync::watch::channel(false);
	tokio::spawn(async move {
		let ctrl_c = tokio::signal::ctrl_c();
		#[cfg(unix)]
		{
			let mut term =
				match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
					Ok(s) => s,
					Err(e) => {
						tracing::warn!(error = %e, "cannot listen for SIGTERM");
						let _ = ctrl_c.await;
						let _ = tx.send(true);
						return;
					},
				};
			tokio::select! {
				_ = ctrl_c => {}
				_ = term.recv() => {}
			}
		}
		#[cfg(not(unix))]
		let _ = ctrl_c.await;
		tracing::info!("shutting down: handing back the lease held");
		let _ = tx.send(true);
	});
	let run = miner.run(rx).await;
	tracing::info!(stage, epoch = miner.epoch(), "stopped");
	if let Err(e) = run {
		// docs/operator.md: a supervisor must not restart on this status, or the two processes of
		// one key would replace each other in turn.
		tracing::error!(error = %e, "a newer process of this miner's account replaced this one; exiting with status 3");
		drop(miner); // its temporary inner-step log folder goes with it
		std::process::exit(3);
	}
	Ok(())
}
