//! `iota-orchestrator`: the orchestrator daemon (`run`). Every option is also an `IOTA_*` environment
//! variable. See the library docs for what it does.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use futures_util::{FutureExt, StreamExt};
use iota_chain::{IotaClient, Signer};
use iota_orchestrator::chain::ChainDriver;
use iota_orchestrator::db::Db;
use iota_orchestrator::metrics::Metrics;
use iota_orchestrator::server::{serve, Orchestrator, ServerConfig};
use iota_orchestrator::state::{State, StateConfig};
use iota_primitives::ContentHash;
use iota_rpc::RunSpec;
use iota_storage::{keys, EmbeddedConfig, EmbeddedS3, ObjectStore, StoreConfig};

#[derive(Parser, Debug)]
#[command(
	name = "iota-orchestrator",
	version,
	about = "iota-rs orchestrator: signed JSON-RPC work routing, leases, per-stage phases on chain"
)]
struct Cli {
	#[command(subcommand)]
	command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
	/// Serve the orchestrator API and drive the chain.
	Run(RunArgs),
	/// Tokenize a corpus once into hashed shards in the bucket and write the run spec (prints its hash,
	/// the chain's `model_hash`).
	PrepareData(PrepareArgs),
	/// Write an epoch's merged model as a Hugging Face folder (a Llama; with the bottleneck an
	/// `IotaForCausalLM` and its modeling file), assembled from the chain's merge manifests and the
	/// bucket's checkpoints, every hash checked.
	Export(ExportArgs),
}

#[derive(Args, Debug)]
struct ExportArgs {
	#[command(flatten)]
	store: StoreArgs,
	/// Chain node WebSocket URL, or several comma-separated (`ws://a:9944,ws://b:9944`): calls go to the
	/// first that answers and move to the next when its connection is lost.
	#[arg(long, env = "IOTA_CHAIN_RPC", default_value = "ws://127.0.0.1:9944")]
	chain_rpc: String,
	/// Run id (the spec is read from `keys::run_spec(run)` and checked against the chain's
	/// `model_hash`).
	#[arg(long, env = "IOTA_RUN")]
	run: String,
	/// The epoch whose merged model to write (default: the last one every stage committed).
	#[arg(long)]
	epoch: Option<u32>,
	/// Output folder (created; its config.json, model.safetensors, generation_config.json,
	/// tokenizer.json and, for a model with the bottleneck, modeling_iota.py are overwritten).
	#[arg(long)]
	out: PathBuf,
	/// Also write this safetensors file: the run's held-out rows (`input_ids`, `[N, seq_len]`) and
	/// the exported model's logits for them (`logits`, `[N, seq_len, V]`), for
	/// `scripts/check-hf-export.py` to compare with transformers.
	#[arg(long)]
	reference_out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct PrepareArgs {
	#[command(flatten)]
	store: StoreArgs,
	/// Run id.
	#[arg(long, env = "IOTA_RUN")]
	run: String,
	/// Corpus: a `.txt` file or a directory of them (`scripts/fetch-data.sh` fills `data/shakespeare`).
	#[arg(long, env = "IOTA_CORPUS", default_value = "data/shakespeare")]
	corpus: PathBuf,
	/// Use this `tokenizer.json` instead of training one.
	#[arg(long, env = "IOTA_TOKENIZER")]
	tokenizer: Option<PathBuf>,
	/// Model preset (`tiny`, `small`, `ref-1.5b`, `ref-15b`).
	#[arg(long, env = "IOTA_PRESET", default_value = "small")]
	preset: String,
	/// Cut the model into this many stages, balanced by forward + backward cost at `T`
	/// (`ModelConfig::balanced_stages`), instead of the preset's cuts; must equal the chain's run
	/// config (`stages`; 3 at genesis, while `small` has 4 and `tiny` 3).
	#[arg(long, env = "IOTA_STAGES")]
	stages: Option<usize>,
	/// Tokens per row `T` (default: min(128, the model's max_seq_len)).
	#[arg(long, env = "IOTA_SEQ_LEN")]
	seq_len: Option<u32>,
	/// Rows per sample `B`.
	#[arg(long, env = "IOTA_BATCH_ROWS")]
	batch_rows: Option<u32>,
	/// Rows per shard.
	#[arg(long, env = "IOTA_ROWS_PER_SHARD")]
	rows_per_shard: Option<u32>,
	/// Tokenizer vocabulary when training one (default: the model's).
	#[arg(long, env = "IOTA_VOCAB_SIZE")]
	vocab_size: Option<usize>,
	/// Weight-init and shuffle seed.
	#[arg(long, env = "IOTA_SEED", default_value_t = 0)]
	seed: u64,
	/// Wire encoding (`f32`, `bf16`, `u8`).
	#[arg(long, env = "IOTA_ENCODING", default_value = "u8")]
	encoding: String,
	/// Codec of merge vectors: `f32` (exact), `int8` (per-chunk scales, 4x less), `topk:<per mille>`
	/// (largest entries per chunk, with error feedback at the miner).
	#[arg(long, env = "IOTA_MERGE_CODEC", default_value = "f32")]
	merge_codec: iota_protocol::MergeCodec,
	/// Training mode: `sync` (one AdamW step per epoch, exact) or `local[:ACCUMULATE[:OUTER_LR[:MOMENTUM]]]`
	/// (an inner AdamW step every ACCUMULATE backward passes, an outer Nesterov step per merge; `local` is
	/// IOTA's 4, 0.7, 0.9).
	#[arg(long, env = "IOTA_TRAINING", default_value = "sync")]
	training: iota_protocol::optim::Training,
	/// Held-out rows cut from the last documents (kept out of training); the orchestrator reports
	/// every merged model's loss on them (0: no held-out set).
	#[arg(long, env = "IOTA_HELDOUT_ROWS", default_value_t = 0)]
	heldout_rows: u32,
	/// Continue an existing model: a Hugging Face folder (a Llama, or an `iota-export` folder) whose
	/// weights every replica starts from, hash-checked. Its model replaces the preset's, cut into as
	/// many stages as the preset has; its `tokenizer.json` is the run's unless `--tokenizer` is given.
	#[arg(long, env = "IOTA_INIT_FROM")]
	init_from: Option<PathBuf>,
}

/// Object store settings (shared by the subcommands).
#[derive(Args, Debug, Clone)]
struct StoreArgs {
	/// Start an embedded S3 server over this directory (local use) instead of using `--s3-endpoint`.
	#[arg(long, env = "IOTA_EMBEDDED_S3")]
	embedded_s3: Option<PathBuf>,
	/// Listen address of the embedded S3 server: loopback, or private with
	/// `--embedded-s3-private-network`.
	#[arg(long, env = "IOTA_EMBEDDED_S3_ADDR", default_value = "127.0.0.1:9000")]
	embedded_s3_addr: SocketAddr,
	/// Let the embedded S3 server listen on a private address (10/8, 172.16/12, 192.168/16, fc00::/7),
	/// for miners on other hosts of a closed network (its credentials are static: never on a public
	/// address).
	#[arg(long, env = "IOTA_EMBEDDED_S3_PRIVATE_NETWORK")]
	embedded_s3_private_network: bool,
	/// S3 endpoint URL (MinIO, R2, the `iota-s3` binary); without it and without `--embedded-s3`, AWS.
	#[arg(long, env = "IOTA_S3_ENDPOINT")]
	s3_endpoint: Option<String>,
	/// Bucket.
	#[arg(long, env = "IOTA_S3_BUCKET", default_value = "iota")]
	s3_bucket: String,
	/// Access key (with `--s3-endpoint`).
	#[arg(long, env = "IOTA_S3_ACCESS_KEY", default_value = "iota-dev")]
	s3_access_key: String,
	/// Secret key (with `--s3-endpoint`).
	#[arg(
		long,
		env = "IOTA_S3_SECRET_KEY",
		default_value = "iota-dev-secret",
		hide_env_values = true
	)]
	s3_secret_key: String,
	/// Region (AWS).
	#[arg(long, env = "IOTA_S3_REGION", default_value = "us-east-1")]
	s3_region: String,
}

#[derive(Args, Debug)]
struct RunArgs {
	#[command(flatten)]
	store: StoreArgs,
	/// Chain node WebSocket URL, or several comma-separated (`ws://a:9944,ws://b:9944`): calls go to the
	/// first that answers and move to the next when its connection is lost.
	#[arg(long, env = "IOTA_CHAIN_RPC", default_value = "ws://127.0.0.1:9944")]
	chain_rpc: String,
	/// Orchestrator key as a secret URI (`//Alice` on a dev chain).
	#[arg(long, env = "IOTA_SURI", hide_env_values = true, conflicts_with = "key_file")]
	suri: Option<String>,
	/// Orchestrator key file (one secret URI).
	#[arg(long, env = "IOTA_KEY_FILE")]
	key_file: Option<PathBuf>,
	/// The sudo key of a chain you control (a dev chain's `//Alice`): the chain's run config is set from the
	/// spec (model_hash, stages, bottleneck width, quota, and the phase timeout and scoring and reveal
	/// windows when those flags are given).
	#[arg(long, env = "IOTA_SUDO_SURI", hide_env_values = true)]
	sudo_suri: Option<String>,
	/// With `--sudo-suri`: the backward quota per stage per epoch to set on chain.
	#[arg(long, env = "IOTA_BACKWARD_QUOTA")]
	backward_quota: Option<u32>,
	/// With `--sudo-suri`: the phase timeout (blocks) to set on chain.
	#[arg(long, env = "IOTA_PHASE_TIMEOUT")]
	phase_timeout: Option<u32>,
	/// With `--sudo-suri`: the scoring window (blocks after an epoch completes during which validators
	/// may set weights) to set on chain. Validators recompute their spot-checks before scoring, which takes
	/// longer than the genesis default of 30 blocks on a small shared machine.
	#[arg(long, env = "IOTA_SCORING_WINDOW")]
	scoring_window: Option<u32>,
	/// With `--sudo-suri`: the reveal window (blocks after the scoring window during which validators
	/// reveal their committed weights) to set on chain. Validators reveal from a task of their own, timed
	/// by the best block, so the window only has to cover their polling and a few blocks of inclusion
	/// (the genesis default is 20 blocks; the devnet sets 30).
	#[arg(long, env = "IOTA_REVEAL_WINDOW")]
	reveal_window: Option<u32>,
	/// Run id (the spec is read from `keys::run_spec(run)`).
	#[arg(long, env = "IOTA_RUN")]
	run: String,
	/// JSON-RPC listen address (WebSocket and HTTP).
	#[arg(long, env = "IOTA_LISTEN", default_value = "127.0.0.1:9955")]
	listen: SocketAddr,
	/// Prometheus `/metrics` address.
	#[arg(long, env = "IOTA_METRICS_ADDR", default_value = "127.0.0.1:9956")]
	metrics_addr: SocketAddr,
	/// SQLite database path.
	#[arg(long, env = "IOTA_DB", default_value = "orchestrator.db")]
	db: PathBuf,
	/// Most leases one miner may hold.
	#[arg(long, env = "IOTA_MAX_LEASES", default_value_t = 4)]
	max_leases: u32,
	/// Most samples one head miner may have in the pipeline at once (started by its forward, not yet
	/// through the head's backward); `0` for no bound. Default: the run's `accumulate` (at least 2) in
	/// local mode, so a head backward comes at most one inner step late; none in sync mode.
	#[arg(long, env = "IOTA_MAX_IN_FLIGHT")]
	max_in_flight: Option<u32>,
	/// Lease duration in ms (default: the chain's `lease_timeout_secs`).
	#[arg(long, env = "IOTA_LEASE_MS")]
	lease_ms: Option<u64>,
	/// Serve the network dashboard here (`iota-dashboard`, read from this orchestrator and the chain).
	#[arg(long, env = "IOTA_DASHBOARD_ADDR", default_value = iota_dashboard::DEFAULT_ADDR)]
	dashboard_addr: SocketAddr,
	/// Do not serve the dashboard.
	#[arg(long, env = "IOTA_NO_DASHBOARD")]
	no_dashboard: bool,
	/// Accepted request clock skew in ms.
	#[arg(long, env = "IOTA_WINDOW_MS", default_value_t = 30_000)]
	window_ms: u64,
	/// Longest an idle `iota_getWork` is held open, ms (a long poll: the answer goes out the moment
	/// the miner has work); `0` answers at once with a retry hint of 250 ms. Keep it well below the
	/// miners' request timeout (30 s).
	#[arg(long, env = "IOTA_WORK_WAIT_MS", default_value_t = 1_000)]
	work_wait_ms: u64,
	/// Delete each finalized epoch's activations, gradient submissions, reduced shards and revealed
	/// inner states from the bucket (checkpoints, pathway logs and evidence stay): a long local-mode
	/// run's reveals otherwise fill the bucket.
	#[arg(long, env = "IOTA_PRUNE_FINALIZED")]
	prune_finalized: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
	tracing_subscriber::fmt()
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
		)
		.init();
	match Cli::parse().command {
		Command::Run(args) => run(args).await,
		Command::PrepareData(args) => prepare(args).await,
		Command::Export(args) => export(args).await,
	}
}

async fn open_store(a: &StoreArgs) -> Result<(ObjectStore, Option<EmbeddedS3>)> {
	if let Some(dir) = &a.embedded_s3 {
		let mut cfg = EmbeddedConfig::new(dir);
		cfg.addr = a.embedded_s3_addr;
		cfg.private_network = a.embedded_s3_private_network;
		cfg.bucket = a.s3_bucket.clone();
		cfg.access_key = a.s3_access_key.clone();
		cfg.secret_key = a.s3_secret_key.clone();
		let server = EmbeddedS3::start(cfg).await.context("starting the embedded S3 server")?;
		let store = ObjectStore::connect(server.store_config()).await?;
		return Ok((store, Some(server)));
	}
	let store = ObjectStore::connect(store_config(a)).await?;
	store.ensure_bucket().await.context("the bucket")?;
	Ok((store, None))
}

/// The configuration of the external bucket `a` names (`--s3-endpoint`, else AWS in `--s3-region`).
fn store_config(a: &StoreArgs) -> StoreConfig {
	match &a.s3_endpoint {
		Some(e) => StoreConfig::s3_compatible(e, &a.s3_bucket, &a.s3_access_key, &a.s3_secret_key),
		None => StoreConfig::aws(&a.s3_region, &a.s3_bucket),
	}
}

/// The stored spec bytes of `run` and the parsed, validated spec.
async fn load_spec(store: &ObjectStore, run: &keys::Id) -> Result<(Vec<u8>, RunSpec)> {
	let key = keys::run_spec(run);
	let size = store
		.head(&key)
		.await
		.with_context(|| format!("run spec {key} (run `prepare-data` first)"))?
		.size;
	let bytes = store.get_range(&key, 0..size).await?.to_vec();
	let spec: RunSpec = serde_json::from_slice(&bytes).context("run spec JSON")?;
	spec.validate()?;
	Ok((bytes, spec))
}

async fn prepare(a: PrepareArgs) -> Result<()> {
	let (store, _embedded) = open_store(&a.store).await?;
	let model = iota_model::ModelConfig::preset(&a.preset)?;
	let mut o =
		iota_orchestrator::data::PrepareOptions::new(a.run.clone(), a.corpus.clone(), model);
	o.tokenizer = a.tokenizer.clone();
	o.seed = a.seed;
	o.encoding = a.encoding.clone();
	o.merge_codec = a.merge_codec;
	o.training = a.training;
	o.heldout_rows = a.heldout_rows;
	o.init_from = a.init_from.clone();
	if let Some(v) = a.seq_len {
		o.seq_len = v;
	}
	if let Some(v) = a.batch_rows {
		o.batch_rows = v;
	}
	if let Some(v) = a.rows_per_shard {
		o.rows_per_shard = v;
	}
	if let Some(v) = a.vocab_size {
		o.vocab_size = v;
	}
	if let Some(n) = a.stages {
		o.model.stages = o
			.model
			.balanced_stages(n, o.seq_len as usize)
			.with_context(|| format!("--stages {n}"))?;
	}
	let p = iota_orchestrator::data::prepare_data(&store, &o).await?;
	let run = keys::Id::new(a.run)?;
	println!(
		"run spec {} written: {} shards, {} rows ({} dropped), {} tokens",
		keys::run_spec(&run),
		p.spec.data.shards.len(),
		p.rows,
		p.rows_dropped,
		p.tokens
	);
	if let Some(init) = &p.spec.init {
		for (s, i) in init.iter().enumerate() {
			println!("stage {s} starts from {} (state {})", i.checkpoint.key, i.state);
		}
	}
	println!("model_hash {}", p.spec.hash());
	Ok(())
}

async fn export(a: ExportArgs) -> Result<()> {
	let run_id = keys::Id::new(a.run.clone())?;
	if a.store.embedded_s3.is_some() {
		bail!("export reads a running network's bucket: give --s3-endpoint (not --embedded-s3)");
	}
	// Read only: a missing bucket is an error here, never created.
	let store = ObjectStore::connect(store_config(&a.store)).await?;
	let (spec_bytes, spec) = load_spec(&store, &run_id).await?;
	let client = IotaClient::connect(&a.chain_rpc).await?;
	let cfg = client.run_config().await?.context("the chain has no run config")?;
	let spec_hash = ContentHash::of(&spec_bytes);
	if cfg.model_hash.0 != spec_hash.0 {
		bail!("the chain's model_hash is not the hash {spec_hash} of run {}'s spec", a.run);
	}
	let e = iota_orchestrator::eval::export_epoch(
		&store,
		&client,
		&spec,
		a.epoch,
		&a.out,
		a.reference_out.as_deref(),
	)
	.await?;
	println!(
		"wrote {}: run {} epoch {}, {} parameters, every stage's state hash as attested on chain",
		a.out.display(),
		a.run,
		e.epoch,
		e.params
	);
	if let (Some(path), Some(n)) = (&a.reference_out, e.reference_rows) {
		println!(
			"wrote {}: {n} held-out rows of {} tokens and their logits",
			path.display(),
			spec.data.seq_len
		);
	}
	Ok(())
}

async fn run(a: RunArgs) -> Result<()> {
	let run_id = keys::Id::new(a.run.clone())?;
	let (store, _embedded) = open_store(&a.store).await?;
	let (spec_bytes, spec) = load_spec(&store, &run_id).await?;
	if spec.run != a.run {
		bail!("the spec at {} is for run {:?}", keys::run_spec(&run_id), spec.run);
	}
	let spec_hash = ContentHash::of(&spec_bytes);
	let signer = match (&a.suri, &a.key_file) {
		(Some(s), _) => Signer::from_uri(s)?,
		(None, Some(f)) => Signer::from_file(f)?,
		(None, None) => bail!("give the orchestrator key: --suri or --key-file"),
	};
	let client = IotaClient::connect(&a.chain_rpc).await?;
	let mut cfg = client.run_config().await?.context("the chain has no run config")?;
	if let Some(sudo) = &a.sudo_suri {
		let sudo = Signer::from_uri(sudo)?;
		let mut want = cfg.clone();
		want.model_hash = spec_hash;
		want.stages = spec.model.n_stages() as u16;
		want.bottleneck_width = spec.model.wire_width() as u32;
		if let Some(q) = a.backward_quota {
			want.backward_quota = q;
		}
		if let Some(w) = a.scoring_window {
			want.scoring_window = w;
		}
		if let Some(w) = a.reveal_window {
			want.reveal_window = w;
		}
		if let Some(t) = a.phase_timeout {
			want.phase_timeout = t;
		}
		if want != cfg {
			client.set_run_config(&sudo, want.clone()).await.context("set_run_config")?;
			tracing::info!(model_hash = %spec_hash, stages = want.stages, quota = want.backward_quota, "run config set from the spec");
			cfg = want;
		}
	} else if cfg.model_hash.0 != spec_hash.0 {
		bail!("the chain's model_hash is not the spec's hash {spec_hash}; set it (root) or run with --sudo-suri on a dev chain");
	}
	if usize::from(cfg.stages) != spec.model.n_stages() {
		bail!("the chain runs {} stages, the spec's model {}", cfg.stages, spec.model.n_stages());
	}
	match client.orchestrator().await? {
		Some(o) if o == signer.account_id() => {},
		other => {
			tracing::warn!(?other, me = %signer.account_id(), "this key is not the chain's orchestrator: phase calls will be refused")
		},
	}
	let param_counts = (0..spec.model.n_stages())
		.map(|s| spec.model.stage_param_count(s).map(|p| p as u64))
		.collect::<Result<Vec<_>, _>>()?;
	let lease_ms = a.lease_ms.unwrap_or(u64::from(cfg.lease_timeout_secs) * 1000);
	let state = State::new(StateConfig {
		run: run_id.clone(),
		stages: cfg.stages,
		backward_quota: cfg.backward_quota,
		lease_ms,
		max_leases: a.max_leases,
		tokens_per_sample: spec.tokens_per_sample(),
		boundary_shape: spec.boundary_shape(),
		param_counts,
		merge_codec: spec.merge_codec,
		accumulate: spec.training.accumulate(),
		max_in_flight: match a.max_in_flight {
			Some(0) => None,
			Some(n) => Some(n),
			None => iota_orchestrator::state::default_max_in_flight(spec.training.accumulate()),
		},
	});
	let db = Db::open(&a.db, &a.run)?;
	let metrics = Metrics::new()?;
	let server_cfg = ServerConfig {
		window_ms: a.window_ms,
		work_wait_ms: a.work_wait_ms,
		presign_secs: (lease_ms / 1000 + 60).min(900),
		..ServerConfig::default()
	};
	let spec_json = String::from_utf8(spec_bytes)?;
	let orch = Orchestrator::new(state, db, store, spec, spec_json, server_cfg, metrics.clone())?;
	// Who is registered and where every stage stands, from finalized state, before the first request:
	// a restarted orchestrator must not refuse registered miners as unknown while its first chain step
	// is still on its way.
	let mut driver = ChainDriver::new(client, signer, orch.clone(), cfg.stages);
	let finalized = driver
		.client()
		.finalized_number()
		.await
		.context("reading the finalized block")?;
	orch.set_finalized(finalized);
	driver.refresh_registry(finalized).await.context("reading the registry")?;
	driver.sync(finalized).await.context("reading the stages")?;
	let (metrics_addr, metrics_task) = metrics.serve(a.metrics_addr).await?;
	let (rpc_addr, handle) = serve(orch.clone(), a.listen).await?;
	tracing::info!(%rpc_addr, %metrics_addr, run = %a.run, spec = %spec_hash, lease_ms, "orchestrator listening");
	let dashboard_task = (!a.no_dashboard).then(|| {
		// The dashboard reads this orchestrator over loopback even when it listens on all interfaces.
		let orchestrator_ws_url = format!("ws://127.0.0.1:{}", rpc_addr.port());
		let config = iota_dashboard::DashboardConfig {
			orchestrator_ws_url,
			chain_ws_url: a.chain_rpc.clone(),
			..Default::default()
		};
		let addr = a.dashboard_addr;
		tracing::info!(%addr, "dashboard at http://{addr}/");
		tokio::spawn(async move {
			if let Err(e) = iota_dashboard::serve(addr, config).await {
				tracing::error!(error = %e, "dashboard stopped");
			}
		})
	});

	// Held-out loss of each merged model (a no-op without a held-out set in the spec).
	let eval_task = tokio::spawn(iota_orchestrator::eval::evaluate_merged_models(
		orch.clone(),
		a.chain_rpc.clone(),
		Duration::from_secs(2),
	));
	let retention_task = a.prune_finalized.then(|| {
		let run =
			keys::Id::new(a.run.clone()).expect("the run id was checked when the spec was read");
		tokio::spawn(iota_orchestrator::retention::prune_finalized(
			orch.store().clone(),
			run,
			a.chain_rpc.clone(),
			Duration::from_secs(5),
		))
	});
	let ticker = {
		let orch = orch.clone();
		tokio::spawn(async move {
			let mut every = tokio::time::interval(Duration::from_millis(250));
			loop {
				every.tick().await;
				orch.tick();
			}
		})
	};
	let chain_task = {
		let url = a.chain_rpc.clone();
		let orch_for_driver = orch.clone();
		tokio::spawn(async move {
			loop {
				let mut blocks = match driver_client(&url).await {
					Ok(c) => match c.best_blocks().await {
						Ok(s) => s,
						Err(e) => {
							tracing::warn!(error = %e, "best blocks");
							tokio::time::sleep(Duration::from_secs(2)).await;
							continue;
						},
					},
					Err(e) => {
						tracing::warn!(error = %e, "chain connection");
						tokio::time::sleep(Duration::from_secs(2)).await;
						continue;
					},
				};
				// The block the last step acted on, and whether that step failed (its calls may or may
				// not have gone out, so no second step on that block).
				let mut last: Option<(u32, iota_chain::BlockHash, bool)> = None;
				loop {
					let block = tokio::select! {
						b = blocks.next() => match b {
							Some(b) => b,
							None => break,
						},
						// A stage's call became due between blocks (its quota reached, the last gradient
						// or attestation in), or an extrinsic settled: step again on the block at hand. A
						// stage whose extrinsic that block does not hold yet is left alone by the step, so
						// nothing is sent twice.
						() = orch_for_driver.call_due() => match last {
							Some((number, hash, false)) => {
								if let Err(e) = driver.step(number, hash, false).await {
									last = Some((number, hash, true));
									tracing::warn!(block = number, error = %e, "chain step failed; retrying next block");
								}
								continue;
							},
							_ => continue,
						},
					};
					// Act on the newest best block: a step that took longer than a block (a frozen
					// process, a batch refused and resent call by call) must not leave the driver
					// acting on ever older state.
					let mut latest = block;
					let mut skipped = false;
					while let Some(Some(next)) = blocks.next().now_or_never() {
						latest = next;
						skipped = true;
					}
					match latest {
						Ok((number, hash)) => match driver.step(number, hash, skipped).await {
							Ok(_) => last = Some((number, hash, false)),
							Err(e) => {
								// Its calls may or may not have gone out: no second step on this block.
								last = Some((number, hash, true));
								tracing::warn!(block = number, error = %e, "chain step failed; retrying next block");
							},
						},
						Err(e) => {
							tracing::warn!(error = %e, "best block");
							break;
						},
					}
				}
			}
		})
	};

	shutdown_signal().await;
	tracing::info!("shutting down");
	let _ = handle.stop();
	handle.stopped().await;
	ticker.abort();
	eval_task.abort();
	if let Some(t) = retention_task {
		t.abort();
	}
	chain_task.abort();
	metrics_task.abort();
	if let Some(t) = dashboard_task {
		t.abort();
	}
	Ok(())
}

async fn driver_client(url: &str) -> Result<IotaClient, iota_chain::Error> {
	IotaClient::connect(url).await
}

async fn shutdown_signal() {
	let ctrl_c = tokio::signal::ctrl_c();
	#[cfg(unix)]
	{
		let mut term =
			match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
				Ok(t) => t,
				Err(_) => {
					let _ = ctrl_c.await;
					return;
				},
			};
		tokio::select! {
			_ = ctrl_c => {},
			_ = term.recv() => {},
		}
	}
	#[cfg(not(unix))]
	{
		let _ = ctrl_c.await;
	}
}
