//! `bench-rpc`: signed `iota_getWork` + `iota_submitActivation` round trips per second on loopback with
//! N concurrent clients (default 64), and the share of CPU time spent verifying signatures. Two modes,
//! both real protocol paths:
//!
//! - `forward`: the head's forward. Each round trip is getWork (a fresh sample, presigned data GET and
//!   output PUT), the upload of a `tiny`-preset wire tensor through the presigned PUT to the embedded S3
//!   server, and submitActivation, which the server accepts only after fetching the object back and
//!   checking its hash and wire header. Dominated by the S3 server's per-object file work.
//! - `backward`: the head's backward (no output object). Samples are first prefilled through forward and
//!   the later stages' backward by recording the same events the server records; each round trip is
//!   getWork (a backward item routed to the miner that ran its forward, presigned GETs) and
//!   submitActivation without an upload: the orchestrator's own path (server, signing, SQLite).
//!
//! Real parts: the jsonrpsee server, sr25519 signing and verification, the SQLite database (a file, WAL),
//! the embedded S3 server. Stubbed: the chain registry and stage view are set in memory (N head miners
//! of a 3-stage run in epoch 0), so no node is needed; the output says so. Clients, server and S3 share
//! one process and the machine's cores.
//!
//! ```sh
//! cargo run --release -p iota-orchestrator --bin bench-rpc -- --clients 64 --seconds 10
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use clap::Parser;
use iota_model::wire::{self, Kind};
use iota_model::ModelConfig;
use iota_orchestrator::auth::{MinerStanding, Registry};
use iota_orchestrator::db::Db;
use iota_orchestrator::metrics::Metrics;
use iota_orchestrator::server::{serve, Orchestrator, ServerConfig};
use iota_orchestrator::state::{Event, Lease, Obj, State, StateConfig, WorkKind};
use iota_primitives::{ContentHash, Phase};
use iota_rpc::api::methods;
use iota_rpc::types::{SubmitActivation, TensorRef, Work};
use iota_rpc::{sign, DataManifest, LrSchedule, RunSpec, SignedClient};
use iota_storage::{keys, EmbeddedConfig, EmbeddedS3, ObjectStore, PresignedHttp};
use subxt_signer::sr25519::Keypair;

#[derive(Parser, Debug)]
struct Args {
	/// Concurrent clients (each a head miner with its own key and connection).
	#[arg(long, default_value_t = 64)]
	clients: usize,
	/// Measured seconds (after one second of warm-up).
	#[arg(long, default_value_t = 10)]
	seconds: u64,
	/// `forward`, `backward` or `both`.
	#[arg(long, default_value = "both")]
	mode: String,
	/// Samples prefilled for the `backward` mode.
	#[arg(long, default_value_t = 60_000)]
	prefill: u64,
	/// Parent directory of the embedded S3 data and the database (default: the system temp directory).
	/// `/dev/shm` keeps the filesystem's per-object inode work out of the measurement.
	#[arg(long)]
	dir: Option<std::path::PathBuf>,
}

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`; 0 where it
/// cannot be read.
fn cpu_seconds() -> f64 {
	procfs::process::Process::myself()
		.and_then(|p| p.stat())
		.map_or(0.0, |st| (st.utime + st.stime) as f64 / procfs::ticks_per_second() as f64)
}

async fn spec(store: &ObjectStore, run: &str) -> Result<(RunSpec, String)> {
	let id = keys::Id::new(run)?;
	let model = ModelConfig::tiny();
	let (seq_len, batch_rows, rows) = (8u32, 2u32, 64u32);
	let tokens: Vec<u8> = (0..rows * (seq_len + 1))
		.flat_map(|i| (i % model.vocab_size as u32).to_le_bytes())
		.collect();
	let shard = store.put(&keys::data_shard(&id, 0), Bytes::from(tokens)).await?;
	let tok = store.put(&keys::tokenizer(&id), Bytes::from_static(b"{}")).await?;
	let spec = RunSpec {
		init: None,
		run: run.into(),
		model,
		seed: 1,
		encoding: "f32".into(),
		adamw: iota_model::optim::AdamW::default(),
		lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
		max_norm: None,
		merge_codec: Default::default(),
		training: Default::default(),
		data: DataManifest {
			tokenizer: tok,
			seq_len,
			batch_rows,
			rows_per_shard: rows,
			shards: vec![shard],
			heldout: None,
		},
	};
	let json = String::from_utf8(spec.to_bytes())?;
	Ok((spec, json))
}

struct Setup {
	store: ObjectStore,
	spec: RunSpec,
	json: String,
	keypairs: Vec<Keypair>,
	dir: std::path::PathBuf,
}

/// Builds an orchestrator over a fresh database with the stubbed registry; for `backward`, prefills
/// `prefill` samples up to the head's backward.
fn orchestrator(set: &Setup, name: &str, prefill: u64) -> Result<Arc<Orchestrator>> {
	let run = "bench";
	let spec = &set.spec;
	let accounts: Vec<_> = set.keypairs.iter().map(|k| k.public_key().to_account_id()).collect();
	let state = State::new(StateConfig {
		run: keys::Id::new(run)?,
		stages: 3,
		backward_quota: 1 << 30,
		lease_ms: 600_000,
		max_leases: 4,
		tokens_per_sample: spec.tokens_per_sample(),
		boundary_shape: spec.boundary_shape(),
		param_counts: (0..3)
			.map(|s| spec.model.stage_param_count(s).map(|p| p as u64))
			.collect::<Result<_, _>>()?,
		merge_codec: spec.merge_codec,
		accumulate: spec.training.accumulate(),
		max_in_flight: None,
	});
	let db = Db::open(&set.dir.join(format!("{name}.db")), run)?;
	let orch = Orchestrator::new(
		state,
		db,
		set.store.clone(),
		spec.clone(),
		set.json.clone(),
		ServerConfig::default(),
		Metrics::new()?,
	)?;
	// Stub of the chain: every client is an Active miner of stage 0; one more miner each at stages 1, 2.
	let others = [iota_rpc::AccountId::from([1u8; 32]), iota_rpc::AccountId::from([2u8; 32])];
	let mut reg = Registry::default();
	for a in &accounts {
		reg.miners.insert(a.0, (0, MinerStanding::Active));
	}
	orch.set_registry(reg);
	let now = iota_rpc::signing::now_ms();
	orch.record(
		(0..3u16)
			.map(|s| Event::ChainStage {
				stage: s,
				epoch: 0,
				phase: Phase::Training,
				round: 0,
				members: if s == 0 {
					accounts.clone()
				} else {
					vec![others[usize::from(s) - 1].clone()]
				},
				block: 1,
				now_ms: now,
			})
			.collect(),
	)?;
	let mut id = 1u64;
	let mut batch = Vec::new();
	for n in 0..prefill {
		let steps = [
			(0u16, WorkKind::Forward, &accounts[(n % accounts.len() as u64) as usize]),
			(1, WorkKind::Forward, &others[0]),
			(2, WorkKind::Forward, &others[1]),
			(1, WorkKind::Backward, &others[0]),
		];
		for (stage, kind, miner) in steps {
			let output_key = orch.with_state(|s| s.output_key(stage, 0, n, kind, miner));
			let lease = Lease {
				id,
				miner: miner.clone(),
				stage,
				epoch: 0,
				sample: n,
				kind,
				granted_ms: now,
				expires_at_ms: now + 600_000,
				output_key: output_key.clone(),
				recompute: false,
			};
			batch.push(Event::LeaseGranted { lease, fresh: stage == 0 });
			if stage == 2 {
				batch.push(Event::LossReported { lease: id, loss: 3.0 });
			}
			let output =
				output_key.map(|key| Obj { hash: ContentHash::of(key.as_bytes()), key, size: 600 });
			batch.push(Event::LeaseCompleted { lease: id, output, now_ms: now, inner_step: 0 });
			id += 1;
		}
		if batch.len() >= 20_000 {
			orch.record(std::mem::take(&mut batch))?;
		}
	}
	orch.record(batch)?;
	Ok(orch)
}

struct Measured {
	trips: f64,
	wall: f64,
	cpu: f64,
	step_ms: [f64; 3],
}

async fn measure(set: &Setup, args: &Args, backward: bool) -> Result<Measured> {
	let orch = orchestrator(
		set,
		if backward { "backward" } else { "forward" },
		if backward { args.prefill } else { 0 },
	)?;
	let (addr, handle) = serve(orch.clone(), "127.0.0.1:0".parse()?).await?;
	let url = format!("ws://{addr}");
	let http = PresignedHttp::from_config(set.store.config())?;
	let done = Arc::new(AtomicU64::new(0));
	// Client-side wall time per step (ns, summed over counted round trips): getWork, PUT, submit.
	let steps: Arc<[AtomicU64; 3]> =
		Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
	let counting = Arc::new(std::sync::atomic::AtomicBool::new(false));
	let stop = Instant::now() + Duration::from_secs(args.seconds + 1);
	let mut tasks = Vec::new();
	for k in set.keypairs.clone() {
		let (url, http, spec, done, counting, steps) = (
			url.clone(),
			http.clone(),
			set.spec.clone(),
			done.clone(),
			counting.clone(),
			steps.clone(),
		);
		tasks.push(tokio::spawn(async move {
			let c = SignedClient::connect(&url, k, Duration::from_secs(60)).await.expect("connect");
			let [b, t, w] = spec.boundary_shape();
			let v: Vec<f32> = (0..b * t * w).map(|i| i as f32 / 100.0).collect();
			let x = candle_core::Tensor::from_vec(
				v,
				(b as usize, t as usize, w as usize),
				&candle_core::Device::Cpu,
			)
			.expect("tensor");
			let bytes = Bytes::from(
				wire::encode(&x, Kind::Activation, spec.wire_encoding().expect("enc"))
					.expect("encode"),
			);
			let hash = ContentHash::of(&bytes);
			while Instant::now() < stop {
				let t0 = Instant::now();
				let work = c.get_work(0).await.expect("getWork");
				let t1 = Instant::now();
				let (lease, out) = match (backward, work) {
					(false, Work::Forward(f)) => {
						http.put(&f.output.put, bytes.clone()).await.expect("put");
						(
							f.lease,
							Some(TensorRef {
								key: f.output.key,
								hash,
								size: bytes.len() as u64,
								shape: spec.boundary_shape().to_vec(),
							}),
						)
					},
					(true, Work::Backward(b)) => (b.lease, None),
					(_, other) => panic!("unexpected work {other:?} (prefill exhausted?)"),
				};
				let t2 = Instant::now();
				c.submit_activation(lease, out).await.expect("submit");
				if counting.load(Ordering::Relaxed) {
					done.fetch_add(1, Ordering::Relaxed);
					for (i, d) in [t1 - t0, t2 - t1, t2.elapsed()].into_iter().enumerate() {
						steps[i].fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
					}
				}
			}
		}));
	}
	tokio::time::sleep(Duration::from_secs(1)).await;
	counting.store(true, Ordering::Relaxed);
	let (t0, cpu0) = (Instant::now(), cpu_seconds());
	for t in tasks {
		t.await?;
	}
	let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
	let trips = done.load(Ordering::Relaxed) as f64;
	let ms = |i: usize| steps[i].load(Ordering::Relaxed) as f64 / trips.max(1.0) / 1e6;
	handle.stop()?;
	Ok(Measured { trips, wall, cpu, step_ms: [ms(0), ms(1), ms(2)] })
}

#[tokio::main]
async fn main() -> Result<()> {
	let args = Args::parse();
	let dir = match &args.dir {
		Some(d) => tempfile::tempdir_in(d)?,
		None => tempfile::tempdir()?,
	};
	let s3 = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await?;
	let store = ObjectStore::connect(s3.store_config()).await?;
	let (spec, json) = spec(&store, "bench").await?;
	let keypairs: Vec<Keypair> = (0..args.clients)
		.map(|i| Keypair::from_uri(&format!("//bench-{i}").parse().expect("uri")).expect("key"))
		.collect();
	// Cost of one verification (one thread), over the body a submitActivation carries.
	let probe = sign(
		&keypairs[0],
		methods::SUBMIT_ACTIVATION,
		SubmitActivation { lease: 1, output: None, inner_step: 0 },
		1,
		1,
	)?;
	let n = 2_000;
	let t = Instant::now();
	for _ in 0..n {
		probe.verify_signature(methods::SUBMIT_ACTIVATION)?;
	}
	let verify_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
	let set = Setup { store, spec, json, keypairs, dir: dir.path().to_path_buf() };
	let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
	println!("bench-rpc: chain registry STUBBED in memory (no node); real jsonrpsee server, sr25519 signing/verification, SQLite (WAL file), embedded S3");
	println!(
		"clients {}  cores {cores}  data dir {}  sr25519 verify {verify_us:.1} us (one thread)",
		args.clients,
		dir.path().display()
	);
	let modes: &[bool] = match args.mode.as_str() {
		"forward" => &[false],
		"backward" => &[true],
		_ => &[false, true],
	};
	for &backward in modes {
		let m = measure(&set, &args, backward).await?;
		let rate = m.trips / m.wall;
		let verify_share = 100.0 * m.trips * 2.0 * verify_us / 1e6 / m.cpu.max(1e-9);
		let name = if backward {
			"backward (getWork + submitActivation, no upload)"
		} else {
			"forward (getWork + presigned PUT + verified submitActivation)"
		};
		println!(
			"{name}: {:.0} round trips in {:.1} s => {rate:.0} /s (goal >= 2000 /s, ratio {:.2})",
			m.trips,
			m.wall,
			rate / 2000.0
		);
		println!("  signature verification: {verify_share:.1}% of the process CPU ({:.1} s CPU); mean step latency ms: getWork {:.2}, upload {:.2}, submit {:.2}", m.cpu, m.step_ms[0], m.step_ms[1], m.step_ms[2]);
	}
	Ok(())
}
