//! `iota-devnet`: start a whole training network on 127.0.0.1, train for a number of epochs (or until
//! Ctrl-C), show progress, write `runs/<id>/report.md`, stop everything. `./scripts/devnet.sh` builds the
//! binaries and calls this.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use iota_devnet::{recut, report, ChainTarget, HostLinks, Network, NetworkOptions, StoreTarget};
use iota_model::ModelConfig;

#[derive(Parser, Debug)]
#[command(
	name = "iota-devnet",
	version,
	about = "Start a local iota-rs training network, train, and report from chain"
)]
struct Cli {
	/// Epochs to train (each a merge; in sync mode one optimizer step of the whole model); stop earlier
	/// with Ctrl-C.
	#[arg(long, env = "IOTA_EPOCHS", default_value_t = 8)]
	epochs: u32,
	/// Miners per stage.
	#[arg(long, env = "IOTA_MINERS_PER_STAGE", default_value_t = 2)]
	miners_per_stage: u32,
	/// Validators.
	#[arg(long, env = "IOTA_VALIDATORS", default_value_t = 2)]
	validators: u32,
	/// Model preset (`tiny`, `small`).
	#[arg(long, env = "IOTA_PRESET", default_value = "small")]
	preset: String,
	/// Pipeline stages (the preset's blocks are re-cut so the stages' compute, LM head included, is balanced).
	#[arg(long, env = "IOTA_STAGES", default_value_t = 3)]
	stages: usize,
	/// Samples (micro-batches) per epoch: the chain's backward quota.
	#[arg(long, env = "IOTA_QUOTA", default_value_t = 64)]
	quota: u32,
	/// Tokens per row `T`.
	#[arg(long, env = "IOTA_SEQ_LEN", default_value_t = 64)]
	seq_len: u32,
	/// Rows per micro-batch `B`.
	#[arg(long, env = "IOTA_BATCH_ROWS", default_value_t = 4)]
	batch_rows: u32,
	/// Peak learning rate.
	#[arg(long, env = "IOTA_LR", default_value_t = 1e-3)]
	lr: f32,
	/// Wire encoding of activations (`u8`, `bf16`, `f32`).
	#[arg(long, env = "IOTA_ENCODING", default_value = "u8")]
	encoding: String,
	/// Codec of merge vectors: `f32` (exact), `int8` (per-chunk scales, 4x less), `topk:<per mille>`.
	#[arg(long, env = "IOTA_MERGE_CODEC", default_value = "int8")]
	merge_codec: iota_rpc::types::MergeCodec,
	/// Training mode: `sync` (one AdamW step per epoch, exact) or `local[:ACCUMULATE[:OUTER_LR[:MOMENTUM]]]`
	/// (inner AdamW steps every ACCUMULATE backward passes, an outer Nesterov step per merge; `local` alone
	/// is IOTA's 4, 0.7, 0.9). The default, `local:2:1:0`, averages the replicas at each merge: with 16
	/// inner steps per replica per epoch, IOTA's momentum 0.9 overshot (held-out loss 6.65-7.18 over 7
	/// epochs, against 6.56 at epoch 4 without momentum, in runs on 2 cores).
	#[arg(long, env = "IOTA_TRAINING", default_value = "local:2:1:0")]
	training: iota_rpc::types::Training,
	/// Held-out rows (of `--seq-len` tokens) cut from the corpus's last documents, which training then
	/// never sees; the orchestrator reports every merged model's loss on them (0: none).
	#[arg(long, env = "IOTA_HELDOUT_ROWS", default_value_t = 32)]
	heldout_rows: u32,
	/// Use this S3 endpoint instead of the embedded server (bucket and keys from IOTA_S3_*).
	#[arg(long, env = "IOTA_S3_ENDPOINT")]
	s3_endpoint: Option<String>,
	/// `dev` (start `iota-node --dev`), `local` (start the four-node local testnet: Alice, Bob, Charlie
	/// and Dave author and finalize, every daemon fails over between them), `zombienet` (the testnet of
	/// `scripts/zombienet.sh spawn`, at ws://127.0.0.1:9944), or a ws:// URL of a running chain whose
	/// sudo is Alice.
	#[arg(long, env = "IOTA_CHAIN", default_value = "dev")]
	chain: String,
	/// Serve the dashboard at this address.
	#[arg(long, env = "IOTA_DASHBOARD_ADDR", default_value = "127.0.0.1:8090")]
	dashboard_addr: String,
	/// Folder for run folders.
	#[arg(long, env = "IOTA_RUNS_DIR", default_value = "runs")]
	runs_dir: PathBuf,
	/// Corpus folder (fetched by scripts/fetch-data.sh).
	#[arg(long, env = "IOTA_CORPUS", default_value = "data/shakespeare")]
	corpus: PathBuf,
	/// Folder with the iota-* binaries (default: this binary's folder).
	#[arg(long, env = "IOTA_BIN_DIR")]
	bin_dir: Option<PathBuf>,
	/// Give up when the run takes longer than this many minutes.
	#[arg(long, env = "IOTA_TIMEOUT_MINS", default_value_t = 60)]
	timeout_mins: u64,
	/// Blocks after an epoch completes during which validators may set weights (local mode's reveals
	/// count until half of it). Two validators on the same 2 cores as six miners took ~100 s per
	/// local-mode epoch to judge every challenged step, so 90 blocks let no weights land.
	#[arg(long, env = "IOTA_SCORING_WINDOW", default_value_t = 240)]
	scoring_window: u32,
	/// Blocks after the scoring window during which validators reveal their committed weights. Reveals
	/// run in their own task beside judging, so this need only cover a reveal's inclusion on a busy node.
	#[arg(long, env = "IOTA_REVEAL_WINDOW", default_value_t = 30)]
	reveal_window: u32,
	/// Keep the run's whole bucket, chain database and miner caches (tens of GB for a default local-mode
	/// run: every revealed inner state); by default finalized epochs' activations, gradients, shards
	/// and revealed states are deleted as the run goes (`iota-orchestrator run --prune-finalized`), and
	/// after the run only the report, the logs and the orchestrator's database stay.
	#[arg(long, env = "IOTA_KEEP_DATA")]
	keep_data: bool,
	/// Skip the single-process baseline (the run's model trained in one process on the same samples
	/// after the network stops, for the report's loss comparison; about as long as the network's
	/// training time at its tokens/s).
	#[arg(long, env = "IOTA_NO_BASELINE")]
	no_baseline: bool,
	/// Seconds to wait after training for the validators to finalize the last epochs (the scoring and
	/// reveal windows: 240 + 30 blocks of a second by default).
	#[arg(long, env = "IOTA_FINALIZE_WAIT_SECS", default_value_t = 330)]
	finalize_wait_secs: u64,
	/// Run every miner and validator on a test host of its own: a network namespace linked to the node,
	/// orchestrator and S3 server by a bridge (needs root; `iota_devnet::hosts`). The report then
	/// counts each host's bytes.
	#[arg(long, env = "IOTA_HOSTS")]
	hosts: bool,
	/// Each test host's link rate in Mbit/s, both ways (a `tc` token bucket); implies `--hosts`.
	#[arg(long, env = "IOTA_LINK_MBIT", value_parser = clap::value_parser!(u32).range(1..))]
	link_mbit: Option<u32>,
	/// Run the validators at this niceness (`nice -n`; 0, the default: the miners' priority), to see
	/// how fast the miners train when the validators only take the CPU left over. Measured on 2 cores
	/// (`dn-20261207-195914`, nice 10): 259 tokens/s while training against 196 at nice 0 (`dn-20261207-211711`), but the
	/// validators got 8.6 % of the CPU instead of 26 %, fell behind and judged no epoch in its scoring
	/// window (no verdicts, weights or payments), so it is not the default.
	#[arg(long, env = "IOTA_VALIDATOR_NICE", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=19))]
	validator_nice: u8,
}

fn stage_line(st: &iota_rpc::types::Status, quota: u32) -> String {
	st.stages
		.iter()
		.map(|s| {
			let phase = match s.phase {
				iota_primitives::Phase::Training => format!("train {}/{quota}", s.backward_done),
				iota_primitives::Phase::WeightsUploading => "upload".into(),
				iota_primitives::Phase::Merging => {
					format!("merge {}/{}", s.shards_present, s.shards_expected)
				},
			};
			format!("s{} e{} {}", s.stage, s.epoch, phase)
		})
		.collect::<Vec<_>>()
		.join(" | ")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	tracing_subscriber::fmt()
		.with_env_filter(
			// (The failover client's warnings while the node starts are the wait the progress shows.)
			tracing_subscriber::EnvFilter::try_from_default_env()
				.unwrap_or_else(|_| "warn,iota_chain::failover=error".into()),
		)
		.init();
	let cli = Cli::parse();
	let started = Instant::now();
	let bin_dir = match &cli.bin_dir {
		Some(d) => d.clone(),
		None => std::env::current_exe()?.parent().context("binary folder")?.to_path_buf(),
	};
	let model = ModelConfig::preset(&cli.preset).map_err(|e| anyhow::anyhow!("{e}"))?;
	let Some(model) = recut(model, cli.stages, cli.seq_len as usize) else {
		bail!("--stages {} does not fit the preset's blocks", cli.stages)
	};
	let run_id = format!("dn-{}", run_id_now());
	let run_dir = cli.runs_dir.join(&run_id);
	std::fs::create_dir_all(&run_dir)?;
	let run_dir = run_dir.canonicalize()?;
	let mut opts = NetworkOptions::new(&run_id, &run_dir, &bin_dir, &cli.corpus, model);
	opts.miners_per_stage = cli.miners_per_stage;
	opts.validators = cli.validators;
	opts.quota = cli.quota;
	opts.data.seq_len = cli.seq_len;
	opts.data.batch_rows = cli.batch_rows;
	opts.data.rows_per_shard = cli.batch_rows * 64;
	opts.data.encoding = cli.encoding.clone();
	opts.data.merge_codec = cli.merge_codec;
	opts.data.training = cli.training;
	opts.data.heldout_rows = cli.heldout_rows;
	opts.data.lr.peak = cli.lr;
	opts.data.adamw.lr = cli.lr;
	opts.data.lr.total_epochs = cli.epochs.max(1);
	opts.data.lr.warmup_epochs = (cli.epochs / 10).clamp(1, 5);
	opts.scoring_window = cli.scoring_window;
	opts.reveal_window = cli.reveal_window;
	opts.validator_nice = (cli.validator_nice > 0).then_some(cli.validator_nice);
	opts.dashboard_addr = Some(cli.dashboard_addr.clone());
	// Finalized epochs' check objects leave the bucket as the run goes (local mode's revealed states
	// filled 19 GB in 6 epochs without it), unless the bucket is to be kept whole.
	opts.prune_finalized = !cli.keep_data;
	opts.chain = match cli.chain.as_str() {
		"dev" => ChainTarget::Dev,
		"zombienet" => ChainTarget::External("ws://127.0.0.1:9944".into()),
		"local" => ChainTarget::LocalTestnet,
		url if url.starts_with("ws://") || url.starts_with("wss://") => {
			ChainTarget::External(url.into())
		},
		other => bail!("--chain {other:?}: expected dev, local, zombienet or a ws:// URL"),
	};
	if cli.hosts || cli.link_mbit.is_some() {
		opts.hosts = Some(HostLinks { mbit: cli.link_mbit });
	}
	opts.store = cli
		.s3_endpoint
		.clone()
		.map(StoreTarget::Endpoint)
		.unwrap_or(StoreTarget::Embedded);
	let tokens_per_sample = u64::from(cli.seq_len) * u64::from(cli.batch_rows);
	let stages = opts.stages();

	println!("iota-devnet: run {run_id} in {}", run_dir.display());
	println!(
		"  {} stages × {} miners, {} validators, preset {} ({} parameters), {} samples × {} tokens per epoch, {} epochs",
		stages,
		cli.miners_per_stage,
		cli.validators,
		cli.preset,
		opts.data.model.total_param_count().unwrap_or(0),
		cli.quota,
		tokens_per_sample,
		cli.epochs
	);
	println!(
		"  starting node, data, orchestrator, miners, validators (logs in {}/logs) ...",
		run_dir.display()
	);
	let validator_nice = opts.validator_nice;
	let mut net = Network::start(opts).await.context("starting the network")?;
	let startup_secs = started.elapsed().as_secs_f64();
	// CPU readings at the start and the end of training, for the report's CPU split.
	let cpu_start = net.cpu_reading();
	println!(
		"  up in {startup_secs:.0} s: chain {}, orchestrator {}, dashboard http://{}/",
		net.chain_url, net.orchestrator_url, cli.dashboard_addr
	);
	if let Some(h) = &net.hosts {
		println!(
			"  {} test hosts on {}/24, links {}",
			h.hosts().len(),
			h.cloud_addr(),
			cli.link_mbit.map_or("unlimited".to_owned(), |m| format!("{m} Mbit/s each way"))
		);
	}

	let deadline = started + Duration::from_secs(cli.timeout_mins * 60);
	let mut last_print = Instant::now() - Duration::from_secs(60);
	let mut reported_epochs = 0usize;
	let mut dead_reported: Vec<String> = Vec::new();
	let mut status = None;
	let interrupted = loop {
		tokio::select! {
			_ = tokio::signal::ctrl_c() => break true,
			_ = tokio::time::sleep(Duration::from_secs(2)) => {},
		}
		let (miners_alive, validators_alive, dead) = net.liveness();
		for d in &dead {
			if !dead_reported.contains(d) {
				println!("  ! {d} exited (see its log in {}/logs)", run_dir.display());
				dead_reported.push(d.clone());
			}
		}
		if dead.iter().any(|d| d == "orchestrator" || d.starts_with("node")) {
			eprintln!("{}", net.orchestrator.log_tail(20));
			bail!("a core process exited; logs in {}/logs", run_dir.display());
		}
		match net.status().await {
			Ok(st) => {
				let done = st.epochs.len();
				if done > reported_epochs || last_print.elapsed() > Duration::from_secs(15) {
					for e in st.epochs.iter().skip(reported_epochs) {
						println!(
							"  epoch {:>3} done: loss {:.4}, {} tokens, {:.1} s",
							e.epoch,
							e.loss,
							e.tokens_cumulative,
							e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0
						);
					}
					reported_epochs = done;
					println!(
						"  [{:>5.0} s] {} | {:.0} tok/s | miners {}/{} validators {}/{} | block #{}",
						started.elapsed().as_secs_f64(),
						stage_line(&st, cli.quota),
						st.tokens_per_sec,
						miners_alive,
						net.miners.len(),
						validators_alive,
						net.validators.len(),
						st.finalized_block
					);
					last_print = Instant::now();
				}
				let finished = done as u32 >= cli.epochs;
				status = Some(st);
				if finished {
					break false;
				}
			},
			Err(e) => println!("  (orchestrator status unavailable: {e})"),
		}
		if Instant::now() > deadline {
			println!(
				"  timeout after {} minutes: writing the report of what completed",
				cli.timeout_mins
			);
			break false;
		}
	};
	let wall_secs = started.elapsed().as_secs_f64();
	let cpu = Some(report::CpuUse::between(&cpu_start, &net.cpu_reading()));
	let completed = status.as_ref().map(|s| s.epochs.len() as u32).unwrap_or(0);
	// Traffic through the test hosts' links up to the end of training.
	let hosts = net.hosts.as_ref().map(|h| report::HostsTraffic {
		mbit: cli.link_mbit,
		hosts: h
			.hosts()
			.iter()
			.filter_map(|x| Some((x.name.clone(), h.bytes(&x.name).ok()?)))
			.collect(),
	});
	let chain = net.chain().await.context("connecting to the chain for the report")?;
	if !interrupted && completed > 0 {
		println!(
			"  training done; waiting up to {} s for the validators to finalize the epochs ...",
			cli.finalize_wait_secs
		);
		let wait_until = Instant::now() + Duration::from_secs(cli.finalize_wait_secs);
		while Instant::now() < wait_until
			&& chain.next_epoch_to_finalize().await.unwrap_or(0) < completed
		{
			tokio::time::sleep(Duration::from_secs(2)).await;
		}
	}
	let (epochs_on_chain, total_minted) = report::read_chain(&chain, completed, stages)
		.await
		.context("reading the run back from chain")?;
	let summaries = status.as_ref().map(|s| s.epochs.clone()).unwrap_or_default();
	// Text from the first and the last completed epoch's merged models, and the last one as a Hugging
	// Face folder, while the bucket is served.
	let (mut samples, mut samples_error) = (Vec::new(), None);
	let mut export = None;
	// The baseline's inputs, read while the bucket is served; it trains once the network has stopped.
	let mut baseline_inputs = None;
	if completed > 0 && !interrupted && !cli.no_baseline {
		let spec = &net.prepared.spec;
		let n = u64::from(completed) * u64::from(cli.quota);
		baseline_inputs = Some(
			async {
				let store = iota_storage::ObjectStore::connect(net.store_config.clone()).await?;
				let samples = iota_devnet::baseline::load_samples(&store, spec, 0..n).await?;
				let heldout = iota_devnet::baseline::load_heldout(&store, spec).await?;
				let init = iota_devnet::baseline::load_init(&store, spec).await?;
				anyhow::Ok((samples, heldout, init))
			}
			.await
			.map_err(|e| format!("its inputs: {e:#}")),
		);
	}
	if completed > 0 {
		// The orchestrator counts an epoch done before every stage's manifest of it is on chain: wait
		// for them a little, else take the last epoch every stage committed.
		let stages = net.prepared.spec.model.n_stages();
		let wait_until = Instant::now() + Duration::from_secs(60);
		let mut last = iota_orchestrator::eval::last_committed_epoch(&chain, stages).await.ok();
		while last.is_none_or(|e| e + 1 < completed) && Instant::now() < wait_until {
			tokio::time::sleep(Duration::from_secs(1)).await;
			last = iota_orchestrator::eval::last_committed_epoch(&chain, stages).await.ok();
		}
		let last = last.unwrap_or(0).min(completed - 1);
		println!(
			"  completing the report's prompts with the merged models, exporting epoch {last}'s ..."
		);
		match iota_storage::ObjectStore::connect(net.store_config.clone()).await {
			Ok(store) => {
				export = Some(
					report::export_last(&store, &chain, &net.prepared.spec, last, &run_dir).await,
				);
				let mut epochs = vec![0, last];
				epochs.dedup();
				for e in epochs {
					match report::text_samples(&store, &chain, &net.prepared.spec, e).await {
						Ok(mut t) => samples.append(&mut t),
						Err(why) => {
							samples_error = Some(why);
							break;
						},
					}
				}
			},
			Err(e) => samples_error = Some(format!("the bucket: {e}")),
		}
	}
	println!("  stopping every process ...");
	net.stop();
	let baseline = match baseline_inputs {
		None => None,
		Some(Err(why)) => Some(Err(why)),
		Some(Ok((samples, heldout, init))) => {
			println!(
				"  training the single-process baseline on the same {} samples (--no-baseline skips it) ...",
				samples.len()
			);
			let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
			let flag = stop.clone();
			let ctrl_c = tokio::spawn(async move {
				if tokio::signal::ctrl_c().await.is_ok() {
					flag.store(true, std::sync::atomic::Ordering::Relaxed);
				}
			});
			let (spec, quota) = (net.prepared.spec.clone(), cli.quota as usize);
			let r = tokio::task::spawn_blocking(move || {
				let wire = Some(spec.wire_encoding()?);
				let inputs = iota_devnet::baseline::Inputs {
					init: &init,
					samples: &samples,
					quota,
					heldout: heldout.as_deref(),
				};
				iota_devnet::baseline::train(&spec, &spec.model, wire, inputs, &|| {
					stop.load(std::sync::atomic::Ordering::Relaxed)
				})
			})
			.await;
			ctrl_c.abort();
			Some(match r {
				Ok(Ok(b)) => Ok(b),
				Ok(Err(e)) => Err(format!("{e:#}")),
				Err(e) => Err(format!("the baseline's task: {e}")),
			})
		},
	};
	let data = report::ReportData {
		run_id: run_id.clone(),
		model: format!("{} re-cut into {} stages", cli.preset, stages),
		stages,
		miners_per_stage: cli.miners_per_stage,
		validators: cli.validators,
		quota: cli.quota,
		tokens_per_sample,
		spec_hash: net.prepared.spec.hash().to_hex(),
		wall_secs,
		startup_secs,
		epochs: summaries,
		chain: epochs_on_chain,
		total_minted,
		samples,
		samples_error,
		export,
		baseline,
		hosts,
		cpu,
		validator_nice,
		command: format!(
			"./scripts/devnet.sh --epochs {} --miners-per-stage {} --validators {} --preset {} --stages {} --quota {} --seq-len {} --batch-rows {} --lr {} --encoding {} --merge-codec {} --training {} --scoring-window {} --reveal-window {} --validator-nice {}{}",
			cli.epochs, cli.miners_per_stage, cli.validators, cli.preset, cli.stages, cli.quota, cli.seq_len, cli.batch_rows, cli.lr, cli.encoding, cli.merge_codec, cli.training, cli.scoring_window, cli.reveal_window, cli.validator_nice,
			match (cli.link_mbit, cli.hosts) {
				(Some(m), _) => format!(" --link-mbit {m}"),
				(None, true) => " --hosts".to_owned(),
				(None, false) => String::new(),
			}
		),
	};
	let path = report::write(&run_dir, &data).context("writing the report")?;
	if !cli.keep_data {
		for dir in ["s3", "cache"] {
			let _ = std::fs::remove_dir_all(run_dir.join(dir));
		}
		// The chain's databases: `node` (dev), `node-<authority>` (local testnet).
		for entry in std::fs::read_dir(&run_dir).into_iter().flatten().flatten() {
			if entry.file_name().to_string_lossy().starts_with("node") {
				let _ = std::fs::remove_dir_all(entry.path());
			}
		}
	}
	if let Some(drop) = report::loss_drop(&data.epochs) {
		println!("  loss {:.1} % lower over {} epochs", drop * 100.0, data.epochs.len());
	}
	println!("report: {}", path.display());
	if interrupted {
		println!("(interrupted with Ctrl-C after {completed} epochs)");
	}
	Ok(())
}

/// A sortable run id from the clock: `YYYYmmdd-HHMMSS` (UTC).
fn run_id_now() -> String {
	chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string()
}
