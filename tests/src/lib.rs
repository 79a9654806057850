//! # iota-e2e
//!
//! Helpers for end-to-end tests that start real processes on 127.0.0.1 and stop them on drop (also when
//! a test panics, printing the tail of their logs):
//!
//! | helper | what it starts |
//! |---|---|
//! | [`DevNode`] | `iota-node --dev` (one node, a block per second; Alice is sudo and orchestrator) |
//! | [`S3`] | the embedded S3 server in-process (`iota_storage::EmbeddedS3`) over a temporary directory |
//! | [`OrchestratorProcess`] | the `iota-orchestrator run` binary (kill -9 and restart with the same database); [`OrchestratorProcess::dev`] with the usual dev-chain flags |
//! | [`Daemon`] | an `iota-miner` ([`Daemon::miner`]) or `iota-validator` ([`Daemon::validator`]) binary, its log in the scenario's folder |
//! | [`tiny_spec`] | uploads a small run spec for the `tiny` preset with random-token data shards |
//! | [`Miner`] | a scripted miner: signed RPC calls, presigned uploads of real wire tensors, the merge steps |
//! | [`TestNetwork`] | a whole `iota_devnet::Network` ([`tiny_network`] options: `tiny` re-cut, Shakespeare, bf16 wire); prints every log tail on panic |
//!
//! Run data and accounts: [`shakespeare_options`] (the `tiny` preset on the real corpus), [`SIX_MINERS`] and
//! [`register_seated`] (who the pallet seated where), [`verdicts`] (one validator's verdicts on chain),
//! [`work_dir`] (kept with `$IOTA_E2E_KEEP`), [`http_get`] (`/metrics` and pages).
//!
//! Checks shared by the `network_*` scenarios: [`check_manifest`] (a committed merge manifest against the
//! bucket: shards, checkpoint reproducing the attested state), [`pathway_log`] (the stored log against the
//! orchestrator's hash), [`attested_state_hashes`] (what each replica attested, from its log).
//!
//! Binaries come from the target directory the tests were built into (`$IOTA_NODE_BIN`,
//! `$IOTA_ORCHESTRATOR_BIN` override): build them first with
//! `cargo build --workspace --bins --features iota-miner/fault-injection` (as `scripts/test.sh` does).
//! Scenario files are `tests/<area>_<scenario>.rs`, one scenario each; they are `#[ignore]`d so
//! `cargo test --workspace` stays fast; run them with
//! `cargo test -p iota-e2e -- --ignored --test-threads 1`.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iota_chain::{IotaClient, Signer};
use iota_model::wire::{self, Kind};
use iota_model::ModelConfig;
use iota_primitives::ContentHash;
use iota_rpc::types::*;
use iota_rpc::{code_of, DataManifest, ErrorCode, LrSchedule, PathwayLog, RunSpec, SignedClient};
use iota_storage::{keys, EmbeddedConfig, EmbeddedS3, ObjectStore, PresignedHttp};

/// How long a debug node may take to answer RPC.
pub const NODE_STARTUP: Duration = Duration::from_secs(180);

/// A scenario's working directory (databases, caches, process logs), removed on drop unless
/// `$IOTA_E2E_KEEP` is set: then it is kept and its path printed, so a failed run can be read afterwards.
pub fn work_dir() -> tempfile::TempDir {
	let keep = std::env::var_os("IOTA_E2E_KEEP").is_some();
	let dir = tempfile::Builder::new()
		.prefix("iota-e2e-")
		.disable_cleanup(keep)
		.tempdir()
		.unwrap();
	if keep {
		eprintln!("IOTA_E2E_KEEP: logs and data stay in {}", dir.path().display());
	}
	dir
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
	TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The `debug` (or `release`) directory the running test binary lives in.
pub fn target_dir() -> PathBuf {
	// <target>/debug/deps/<test>-<hash> -> <target>/debug
	let exe = std::env::current_exe().unwrap();
	exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf()
}

/// The path of binary `name`: `$env` if set, else the tests' target folder. Panics with `build` (the
/// command that builds it) when the file is missing.
pub fn binary(env: &str, name: &str, build: &str) -> PathBuf {
	let p = std::env::var_os(env)
		.map(PathBuf::from)
		.unwrap_or_else(|| target_dir().join(name));
	assert!(p.exists(), "{} not found: build it with `{build}` first (or set {env})", p.display());
	p
}

fn print_tail(what: &str, log: &Path, lines: usize) {
	let mut text = String::new();
	let _ = std::fs::File::open(log).and_then(|mut f| f.read_to_string(&mut text));
	let tail: Vec<&str> = text.lines().rev().take(lines).collect();
	eprintln!("--- {what} log (last {lines} lines) ---");
	for line in tail.into_iter().rev() {
		eprintln!("{line}");
	}
}

/// Sends `sig` (`-STOP`, `-CONT`, `-KILL`: `kill(1)`'s spelling) to process `pid`; panics if `kill` fails.
pub fn signal(pid: u32, sig: &str) {
	let ok = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
	assert!(ok.success(), "kill {sig} {pid}");
}

/// The state letter of process `pid` from `/proc/{pid}/stat` (`T` stopped, `S` sleeping, `R` running);
/// panics if the process is gone.
pub fn process_state(pid: u32) -> char {
	let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
	stat.rsplit(')')
		.next()
		.and_then(|rest| rest.trim_start().chars().next())
		.unwrap()
}

/// Polls `f` every 200 ms until it returns `Some`, panicking with `what` after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
	F: FnMut() -> Fut,
	Fut: std::future::Future<Output = Option<T>>,
{
	let start = Instant::now();
	loop {
		if let Some(v) = f().await {
			return v;
		}
		assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
		tokio::time::sleep(Duration::from_millis(200)).await;
	}
}

/// A running `iota-node`, killed on drop.
///
/// Its RPC and p2p ports are chosen by the kernel (`--rpc-port 0`, `--port 0`) and the RPC address read back
/// from the node's log, so parallel test lanes cannot race for a port picked before the node binds it.
pub struct DevNode {
	child: Child,
	log: tempfile::NamedTempFile,
	/// `ws://127.0.0.1:PORT`.
	pub rpc_url: String,
}

impl DevNode {
	/// Starts `iota-node --dev` with a temporary database; see [`DevNode::start_with`].
	pub fn start() -> Self {
		Self::start_with(&["--dev"])
	}

	/// Starts the node with `args` (e.g. `--dev`, or `--chain dev --tmp --bootnodes …` for a non-authoring
	/// node) plus `--rpc-port 0` and, unless `args` names one, `--port 0`; blocks until its log names the
	/// bound RPC address. Panics if the node exits first or does not bind within [`NODE_STARTUP`].
	pub fn start_with(args: &[&str]) -> Self {
		let bin = binary("IOTA_NODE_BIN", "iota-node", "cargo build -p iota-node");
		let log = tempfile::NamedTempFile::new().unwrap();
		let mut cmd = Command::new(&bin);
		cmd.args(args)
			.args(["--no-telemetry", "--no-mdns", "--no-prometheus", "--rpc-port", "0"]);
		if !args.iter().any(|a| a.starts_with("--port")) {
			cmd.args(["--port", "0"]);
		}
		let child = cmd
			.stdout(Stdio::null())
			.stderr(log.reopen().unwrap())
			.spawn()
			.unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
		let mut node = Self { child, log, rpc_url: String::new() };
		let start = Instant::now();
		node.rpc_url = loop {
			let mut text = String::new();
			let _ = node.log.reopen().and_then(|mut f| f.read_to_string(&mut text));
			if let Some(addr) = text.lines().find_map(|l| rpc_addr_in_log_line(&strip_ansi(l))) {
				break format!("ws://{addr}");
			}
			if let Some(status) = node.child.try_wait().unwrap() {
				panic!("iota-node exited early with {status}");
			}
			assert!(
				start.elapsed() < NODE_STARTUP,
				"iota-node did not bind RPC within {NODE_STARTUP:?}"
			);
			std::thread::sleep(Duration::from_millis(100));
		};
		node
	}

	/// A client, once the node answers.
	pub async fn client(&mut self) -> IotaClient {
		let start = Instant::now();
		loop {
			if let Some(status) = self.child.try_wait().unwrap() {
				panic!("iota-node exited early with {status}");
			}
			match IotaClient::connect(&self.rpc_url).await {
				Ok(c) => return c,
				Err(e) if start.elapsed() > NODE_STARTUP => {
					panic!("node did not answer within {NODE_STARTUP:?}: {e}")
				},
				Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
			}
		}
	}

	/// Kills the node now (SIGKILL) and waits for it; dropping it later does nothing more.
	pub fn kill(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
	}
}

/// The IPv4 `HOST:PORT` a node's log line `Running JSON-RPC server: addr=127.0.0.1:PORT,[::1]:PORT,` names,
/// if it is that line, written whole (the address followed by its comma).
fn rpc_addr_in_log_line(line: &str) -> Option<String> {
	let rest = line.split_once("Running JSON-RPC server: addr=")?.1;
	// The node ends every address with a comma: a line read while it is being written has none yet.
	let addr = rest.split_once(',')?.0.trim();
	(!addr.is_empty()).then(|| addr.to_string())
}

impl Drop for DevNode {
	fn drop(&mut self) {
		self.kill();
		if std::thread::panicking() {
			print_tail("iota-node", self.log.path(), 30);
		}
	}
}

/// The embedded S3 server, in-process, over a temporary directory.
pub struct S3 {
	/// The server (stops on drop).
	pub server: EmbeddedS3,
	/// A client with the server's credentials.
	pub store: ObjectStore,
	_dir: tempfile::TempDir,
}

impl S3 {
	/// Starts it on a free port.
	pub async fn start() -> Self {
		let dir = tempfile::tempdir().unwrap();
		let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
		let store = ObjectStore::connect(server.store_config()).await.unwrap();
		store.ensure_bucket().await.unwrap();
		Self { server, store, _dir: dir }
	}

	/// A presigned-request client (what miners use; no credentials).
	pub fn http(&self) -> PresignedHttp {
		PresignedHttp::from_config(self.store.config()).unwrap()
	}
}

/// Uploads a run spec for the `tiny` preset: `T = 8`, `B = 2`, one shard of 8 rows of seeded random
/// tokens, a placeholder tokenizer object, f32 wire encoding. Returns the spec.
pub async fn tiny_spec(store: &ObjectStore, run: &str) -> RunSpec {
	let id = keys::Id::new(run).unwrap();
	let model = ModelConfig::tiny();
	let (seq_len, batch_rows, rows) = (8u32, 2u32, 8u32);
	let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
	let tokens: Vec<u8> = (0..rows * (seq_len + 1))
		.flat_map(|_| {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			((x % model.vocab_size as u64) as u32).to_le_bytes()
		})
		.collect();
	let shard = store.put(&keys::data_shard(&id, 0), Bytes::from(tokens)).await.unwrap();
	let tok = store
		.put(&keys::tokenizer(&id), Bytes::from_static(b"{\"placeholder\":true}"))
		.await
		.unwrap();
	let spec = RunSpec {
		init: None,
		run: run.into(),
		model,
		seed: 7,
		encoding: "f32".into(),
		adamw: iota_model::optim::AdamW::default(),
		lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
		max_norm: Some(1.0),
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
	spec.validate().unwrap();
	store.put(&keys::run_spec(&id), Bytes::from(spec.to_bytes())).await.unwrap();
	spec
}

/// A running `iota-orchestrator run`, killed on drop.
pub struct OrchestratorProcess {
	child: Option<Child>,
	log: PathBuf,
	args: Vec<String>,
	/// `ws://127.0.0.1:PORT` of its JSON-RPC server.
	pub url: String,
	/// `127.0.0.1:PORT` of its Prometheus `/metrics`.
	pub metrics_addr: String,
}

impl OrchestratorProcess {
	/// Starts the binary with `run` and these arguments plus free `--listen`/`--metrics-addr` ports; its log
	/// goes to `log`.
	pub fn start(extra: &[String], log: PathBuf) -> Self {
		let (rpc, metrics) = (free_port(), free_port());
		let mut args = vec![
			"run".to_string(),
			"--listen".into(),
			format!("127.0.0.1:{rpc}"),
			"--metrics-addr".into(),
			format!("127.0.0.1:{metrics}"),
		];
		args.extend_from_slice(extra);
		let mut p = Self {
			child: None,
			log,
			args,
			url: format!("ws://127.0.0.1:{rpc}"),
			metrics_addr: format!("127.0.0.1:{metrics}"),
		};
		p.spawn();
		p
	}

	/// Starts it against `node` and the bucket of `s3` for `run` (whose spec is already in the bucket),
	/// with Alice as orchestrator and sudo, `quota` micro-batches per epoch, leases of `lease_ms`, its
	/// database (`o.db`) and log (`orchestrator.log`) in `dir`; then waits until it answers.
	pub async fn dev(
		node: &DevNode,
		s3: &S3,
		run: &str,
		quota: u32,
		lease_ms: u64,
		dir: &Path,
	) -> Self {
		Self::dev_with(node, s3, run, quota, lease_ms, dir, &[]).await
	}

	/// [`OrchestratorProcess::dev`] with `extra` arguments (e.g. `--phase-timeout 40`).
	pub async fn dev_with(
		node: &DevNode,
		s3: &S3,
		run: &str,
		quota: u32,
		lease_ms: u64,
		dir: &Path,
		extra: &[&str],
	) -> Self {
		let db = dir.join("o.db").display().to_string();
		let mut args: Vec<String> = [
			"--chain-rpc",
			&node.rpc_url,
			"--suri",
			"//Alice",
			"--sudo-suri",
			"//Alice",
			"--backward-quota",
			&quota.to_string(),
			"--run",
			run,
			"--lease-ms",
			&lease_ms.to_string(),
			"--s3-endpoint",
			&s3.server.endpoint(),
			"--db",
			&db,
		]
		.iter()
		.map(|s| s.to_string())
		.collect();
		args.extend(extra.iter().map(|s| s.to_string()));
		let mut p = Self::start(&args, dir.join("orchestrator.log"));
		p.wait_ready().await;
		p
	}

	fn spawn(&mut self) {
		let bin = binary(
			"IOTA_ORCHESTRATOR_BIN",
			"iota-orchestrator",
			"cargo build -p iota-orchestrator",
		);
		let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
		let child = Command::new(&bin)
			.args(&self.args)
			.env("RUST_LOG", "info")
			.stdout(log.try_clone().unwrap())
			.stderr(log)
			.spawn()
			.unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
		self.child = Some(child);
	}

	/// SIGKILL (no shutdown path runs), then wait for the process.
	pub fn kill9(&mut self) {
		if let Some(mut c) = self.child.take() {
			let _ = c.kill();
			let _ = c.wait();
		}
	}

	/// Starts it again with the same arguments (same database and ports).
	pub fn restart(&mut self) {
		self.kill9();
		self.spawn();
	}

	/// Whether the process is still running.
	pub fn is_running(&mut self) -> bool {
		self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
	}

	/// Waits until its RPC answers `iota_status` and returns the status.
	pub async fn wait_ready(&mut self) -> Status {
		let url = self.url.clone();
		let start = Instant::now();
		loop {
			assert!(
				self.is_running(),
				"iota-orchestrator exited; log:\n{}",
				std::fs::read_to_string(&self.log).unwrap_or_default()
			);
			if let Ok(c) = jsonrpsee::ws_client::WsClientBuilder::default().build(&url).await {
				use jsonrpsee::core::client::ClientT;
				if let Ok(s) = c.request::<Status, _>("iota_status", jsonrpsee::rpc_params![]).await
				{
					return s;
				}
			}
			assert!(
				start.elapsed() < Duration::from_secs(120),
				"orchestrator did not answer within 120 s"
			);
			tokio::time::sleep(Duration::from_millis(300)).await;
		}
	}
}

impl Drop for OrchestratorProcess {
	fn drop(&mut self) {
		self.kill9();
		if std::thread::panicking() {
			print_tail("iota-orchestrator", &self.log, 60);
		}
	}
}

/// A scripted miner: signs its calls, uploads real wire tensors of the spec's boundary shape through
/// presigned URLs, and runs the merge steps with exact arithmetic on small gradients.
pub struct Miner {
	/// Its chain key.
	pub signer: Signer,
	/// Its orchestrator connection.
	pub rpc: SignedClient,
	/// Presigned requests.
	pub http: PresignedHttp,
	/// Its stage.
	pub stage: u16,
	/// The spec.
	pub spec: RunSpec,
}

impl Miner {
	/// Connects `signer` (holding `stage`) to the orchestrator at `url`.
	pub async fn connect(
		url: &str,
		signer: Signer,
		stage: u16,
		spec: RunSpec,
		http: PresignedHttp,
	) -> Self {
		let rpc = SignedClient::connect(url, signer.keypair().clone(), Duration::from_secs(30))
			.await
			.unwrap();
		Self { signer, rpc, http, stage, spec }
	}

	/// The miner's account.
	pub fn account(&self) -> iota_rpc::AccountId {
		self.signer.account_id()
	}

	/// `iota_getWork` (panics on a refusal).
	pub async fn work(&self) -> Work {
		self.rpc
			.get_work(self.stage)
			.await
			.unwrap_or_else(|e| panic!("getWork at stage {}: {e}", self.stage))
	}

	/// Polls `iota_getWork` until it is not `Idle`.
	pub async fn next_work(&self, timeout: Duration) -> Work {
		wait_for(&format!("work at stage {}", self.stage), timeout, || async {
			match self.work().await {
				Work::Idle { .. } => None,
				w => Some(w),
			}
		})
		.await
	}

	/// A wire message `[B, T, width]` of `kind` with values derived from `seed`.
	pub fn tensor(&self, kind: Kind, seed: u64) -> Bytes {
		let [b, t, w] = self.spec.boundary_shape();
		let n = (b * t * w) as usize;
		let v: Vec<f32> = (0..n)
			.map(|i| ((i as u64 * 31 + seed * 17) % 101) as f32 / 101.0 - 0.5)
			.collect();
		let x = candle_core::Tensor::from_vec(
			v,
			(b as usize, t as usize, w as usize),
			&candle_core::Device::Cpu,
		)
		.unwrap();
		let enc = self.spec.wire_encoding().unwrap();
		Bytes::from(wire::encode(&x, kind, enc).unwrap())
	}

	/// Uploads `bytes` with the presigned PUT; the tensor reference to report.
	pub async fn upload(&self, put: &ObjectPut, bytes: Bytes, shape: Vec<u64>) -> TensorRef {
		let size = bytes.len() as u64;
		let hash = self.http.put(&put.put, bytes).await.unwrap();
		TensorRef { key: put.key.clone(), hash, size, shape }
	}

	/// Reads an object through its presigned GET, checked against its hash.
	pub async fn download(&self, o: &ObjectGet) -> Bytes {
		self.http.get(&o.get, &o.hash).await.unwrap()
	}

	/// Runs a forward item: checks the inputs can be read, uploads the output (the tail reports `loss`
	/// first and uploads the gradient w.r.t. its input), submits.
	pub async fn forward(&self, f: &ForwardWork, loss: f32) -> Ack {
		if let Some(i) = &f.input {
			self.download(i).await;
		}
		if let Some(d) = &f.data {
			self.download(&d.object).await;
		}
		let tail = usize::from(f.stage) + 1 == self.spec.model.n_stages();
		if tail {
			self.rpc.report_loss(f.lease, loss).await.unwrap();
		}
		let kind = if tail { Kind::Gradient } else { Kind::Activation };
		let t = self
			.upload(&f.output, self.tensor(kind, f.sample), self.spec.boundary_shape().to_vec())
			.await;
		self.rpc.submit_activation(f.lease, Some(t)).await.unwrap()
	}

	/// Runs a backward item: reads the gradient, uploads the input gradient (not at the head), submits.
	pub async fn backward(&self, b: &BackwardWork) -> Ack {
		self.download(&b.grad_output).await;
		let out = match &b.output {
			Some(put) => Some(
				self.upload(
					put,
					self.tensor(Kind::Gradient, b.sample + 1000),
					self.spec.boundary_shape().to_vec(),
				)
				.await,
			),
			None => None,
		};
		self.rpc.submit_activation(b.lease, out).await.unwrap()
	}

	/// The stage's flat gradient length `P`.
	pub fn param_count(&self) -> u64 {
		self.spec.model.stage_param_count(usize::from(self.stage)).unwrap() as u64
	}

	/// A gradient of this stage: `P` f32, element `j` = `(j mod 7 + stage) · samples`.
	pub fn gradient(&self, samples: u32) -> Vec<f32> {
		(0..self.param_count())
			.map(|j| ((j % 7) as f32 + f32::from(self.stage)) * samples as f32)
			.collect()
	}

	/// [`Miner::gradient`] as little-endian f32 bytes.
	pub fn gradient_bytes(&self, samples: u32) -> Vec<u8> {
		iota_protocol::f32le::to_bytes(&self.gradient(samples))
	}

	/// Uploads [`Miner::gradient`] to `put` and submits it (panics on a refusal).
	pub async fn submit_gradient(&self, epoch: u32, put: &ObjectPut, samples: u32) {
		let bytes = self.gradient_bytes(samples);
		let chunks = chunk_hashes(MergeCodec::F32, &bytes, bytes.len() as u64 / 4);
		self.submit_gradient_bytes(epoch, put, bytes, chunks, samples).await.unwrap();
	}

	/// Uploads `bytes` to `put` and submits them with the listed `chunk_hashes`, as `iota_submitGradient`
	/// answers (a scripted miner can send what an honest one never would).
	pub async fn submit_gradient_bytes(
		&self,
		epoch: u32,
		put: &ObjectPut,
		bytes: Vec<u8>,
		chunk_hashes: Vec<ContentHash>,
		samples: u32,
	) -> Result<(), jsonrpsee::core::ClientError> {
		let p = self.param_count();
		let t = self.upload(put, Bytes::from(bytes), vec![p]).await;
		self.rpc
			.submit_gradient(GradientSubmission { epoch, gradient: t, chunk_hashes, samples })
			.await
	}

	/// The merge after the gradient: reduce this miner's shards with the protocol's reduction, submit them, wait for
	/// `Ready`, attest a state hash (derived from the mean gradient) and upload the checkpoint if asked.
	/// Returns the attested hash.
	pub async fn merge(&self, epoch: u32, timeout: Duration) -> ContentHash {
		let a = wait_for("the shard assignment", timeout, || async {
			match self.rpc.get_shards(epoch).await {
				Ok(a) => Some(a),
				Err(e)
					if matches!(
						code_of(&e),
						Some(ErrorCode::WrongPhase | ErrorCode::Unavailable)
					) =>
				{
					None
				},
				Err(e) => panic!("getShards: {e}"),
			}
		})
		.await;
		let mut subs = Vec::new();
		for s in &a.submissions {
			let bytes = self.download(&s.object).await;
			assert_eq!(
				chunk_hashes(MergeCodec::F32, &bytes, bytes.len() as u64 / 4),
				s.chunk_hashes
			);
			subs.push((s.samples, bytes, s.chunk_hashes.clone()));
		}
		for task in &a.shards {
			let [start, end] = task.range;
			let mut inputs = Vec::new();
			for (samples, bytes, chunk_hashes) in &subs {
				let span = iota_protocol::merge::span_of(
					MergeCodec::F32,
					bytes,
					start,
					end,
					a.param_count,
				)
				.unwrap();
				inputs.push(iota_protocol::SpanInput { samples: *samples, chunk_hashes, span });
			}
			let values =
				iota_protocol::reduce_shard(MergeCodec::F32, &inputs, start, end, a.param_count)
					.unwrap();
			let out = iota_protocol::f32le::to_bytes(&values);
			let t = self.upload(&task.output, Bytes::from(out), vec![end - start]).await;
			self.rpc
				.submit_shard(SubmitShard { epoch, round: a.round, shard: task.shard, reduced: t })
				.await
				.unwrap();
		}
		let (shards, checkpoint) = wait_for("the merge to be ready", timeout, || async {
			match self.rpc.get_manifest(epoch).await.unwrap() {
				MergeView::Ready { shards, checkpoint, .. } => Some((shards, checkpoint)),
				_ => None,
			}
		})
		.await;
		let mut mean = Vec::new();
		for s in &shards {
			mean.extend_from_slice(&self.download(&s.object).await);
		}
		let state_hash = ContentHash::of(&mean);
		let checkpoint = match checkpoint {
			Some(put) => Some(
				self.upload(&put, Bytes::from(mean.clone()), vec![mean.len() as u64 / 4]).await,
			),
			None => None,
		};
		self.rpc
			.submit_state_hash(SubmitStateHash { epoch, state_hash, checkpoint })
			.await
			.unwrap();
		state_hash
	}
}

/// Registers `names` (dev accounts) as miners and returns (signer, stage) for each.
pub async fn register_miners(client: &IotaClient, names: &[&str]) -> Vec<(Signer, u16)> {
	let mut out = Vec::new();
	for n in names {
		let s = Signer::dev(n).unwrap();
		client.register_miner(&s).await.unwrap();
		let stage = client.miner(&s.account_id()).await.unwrap().unwrap().stage;
		out.push((s, stage));
	}
	out
}

/// Registers each secret URI in `uris` as a miner (in order) and returns who the pallet seated at each
/// stage.
pub async fn register_seated(
	client: &IotaClient,
	uris: &[&'static str],
) -> std::collections::BTreeMap<u16, Vec<&'static str>> {
	let mut by_stage: std::collections::BTreeMap<u16, Vec<&'static str>> =
		std::collections::BTreeMap::new();
	for uri in uris {
		let s = Signer::from_uri(uri).unwrap();
		client.register_miner(&s).await.unwrap();
		let stage = client.miner(&s.account_id()).await.unwrap().unwrap().stage;
		by_stage.entry(stage).or_default().push(*uri);
	}
	by_stage
}

// ---- real daemons started one by one ------------------------------------------------------------------

/// Six dev miner URIs: with three stages the pallet seats them two per stage in this order.
pub const SIX_MINERS: [&str; 6] =
	["//Dave", "//Eve", "//Ferdie", "//Dave//stash", "//Eve//stash", "//Ferdie//stash"];

/// Run options for the `tiny` preset (3 stages) on the Shakespeare corpus: rows of `T = 32` tokens,
/// micro-batches of `B = 4` rows, 64 rows per shard, wire `encoding` (`u8`, `bf16`, `f32`), peak
/// learning rate 1e-2 without warm-up (one step visibly lowers the loss).
pub fn shakespeare_options(
	run: &str,
	model: ModelConfig,
	encoding: &str,
) -> iota_orchestrator::data::PrepareOptions {
	let mut o = iota_orchestrator::data::PrepareOptions::new(run, corpus(), model);
	o.seq_len = 32;
	o.batch_rows = 4;
	o.rows_per_shard = 64;
	o.encoding = encoding.into();
	o.lr = LrSchedule { peak: 1e-2, warmup_epochs: 0, total_epochs: 100, min_ratio: 0.1 };
	o
}

/// A daemon started from its binary (`iota-miner`, `iota-validator`), logging to a file; killed on drop,
/// the tail of its log printed if the test panics.
pub struct Daemon {
	child: Child,
	log: PathBuf,
	/// What the log tail is printed as (`iota-miner //Dave`).
	pub name: String,
}

impl Daemon {
	/// Starts `bin` with `args`, `RUST_LOG=rust_log`, one compute thread, stdout and stderr into `log`.
	pub fn start(name: &str, bin: &Path, args: &[String], log: PathBuf, rust_log: &str) -> Self {
		let out = std::fs::File::create(&log).unwrap();
		let child = Command::new(bin)
			.args(args)
			.env("RUST_LOG", rust_log)
			.env("RAYON_NUM_THREADS", "1")
			.stdout(out.try_clone().unwrap())
			.stderr(out)
			.stdin(Stdio::null())
			.spawn()
			.unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
		Self { child, log, name: name.into() }
	}

	/// `iota-miner` for the secret URI `suri` against `chain` and `orchestrator`, one compute thread, a
	/// metrics port of its own, cache and log (`miner-{i}.log`) in `dir`, plus `extra` arguments.
	pub fn miner(
		suri: &str,
		chain: &str,
		orchestrator: &str,
		dir: &Path,
		i: usize,
		extra: &[&str],
	) -> Self {
		let bin = binary(
			"IOTA_MINER_BIN",
			"iota-miner",
			"cargo build -p iota-miner --features fault-injection",
		);
		let mut args: Vec<String> = [
			"--chain-rpc",
			chain,
			"--orchestrator",
			orchestrator,
			"--suri",
			suri,
			"--threads",
			"1",
		]
		.iter()
		.chain(extra)
		.map(|s| s.to_string())
		.collect();
		args.extend(["--metrics-addr".into(), format!("127.0.0.1:{}", free_port())]);
		args.extend(["--cache-dir".into(), dir.join(format!("cache-{i}")).display().to_string()]);
		Self::start(
			&format!("iota-miner {suri}"),
			&bin,
			&args,
			dir.join(format!("miner-{i}.log")),
			"info,iota_miner=debug",
		)
	}

	/// `iota-validator` for `suri` against `chain` and `orchestrator`, polling every second, serving
	/// `/metrics` on `metrics_addr`, logging to `dir/validator.log`, its commitments in
	/// `dir/validator-state` (kept across a restart in the same `dir`).
	pub fn validator(
		suri: &str,
		chain: &str,
		orchestrator: &str,
		metrics_addr: &str,
		dir: &Path,
	) -> Self {
		let bin = binary("IOTA_VALIDATOR_BIN", "iota-validator", "cargo build -p iota-validator");
		let args: Vec<String> = [
			"--suri",
			suri,
			"--chain-rpc",
			chain,
			"--orchestrator",
			orchestrator,
			"--poll-ms",
			"1000",
			"--metrics-addr",
			metrics_addr,
			"--state-dir",
			&dir.join("validator-state").to_string_lossy(),
		]
		.iter()
		.map(|s| s.to_string())
		.collect();
		Self::start(
			"iota-validator",
			&bin,
			&args,
			dir.join("validator.log"),
			"info,iota_validator=debug",
		)
	}

	/// Its log so far.
	pub fn log_text(&self) -> String {
		std::fs::read_to_string(&self.log).unwrap_or_default()
	}

	/// Whether the process is still running.
	pub fn is_running(&mut self) -> bool {
		self.child.try_wait().ok().flatten().is_none()
	}

	/// SIGTERM, then wait up to 60 s for it to exit.
	pub fn terminate(&mut self) -> std::process::ExitStatus {
		let pid = self.child.id().to_string();
		assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
		for _ in 0..600 {
			if let Some(s) = self.child.try_wait().unwrap() {
				return s;
			}
			std::thread::sleep(Duration::from_millis(100));
		}
		panic!("{} did not exit within 60 s of SIGTERM", self.name);
	}
}

impl Drop for Daemon {
	fn drop(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
		if std::thread::panicking() {
			print_tail(&self.name, &self.log, 30);
		}
	}
}

/// The verdicts `validator` put on chain on `miner` for `epoch`.
pub async fn verdicts(
	client: &IotaClient,
	epoch: u32,
	miner: &iota_chain::AccountId,
	validator: &iota_chain::AccountId,
) -> Vec<iota_chain::Verdict> {
	client
		.spot_checks(epoch, miner)
		.await
		.unwrap()
		.into_iter()
		.filter(|c| &c.validator == validator)
		.map(|c| c.verdict)
		.collect()
}

// ---- whole networks (iota_devnet::Network) ----------------------------------------------------------

/// The repository root, from the manifest folder cargo names when it runs a test. Read at run time on
/// purpose: the shared target folder may hold a test binary another clone compiled, and a compile-time
/// `env!("CARGO_MANIFEST_DIR")` would point into that clone.
///
/// Panics outside `cargo test`/`cargo nextest` (the variable is unset).
pub fn repo_root() -> PathBuf {
	let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test or nextest");
	PathBuf::from(manifest).join("..")
}

/// The Shakespeare corpus folder (`scripts/fetch-data.sh` fetches it); panics with that hint if missing.
pub fn corpus() -> PathBuf {
	let dir = repo_root().join("data/shakespeare");
	assert!(dir.is_dir(), "{} missing: run scripts/fetch-data.sh", dir.display());
	dir
}

/// A fresh, empty output folder `base/name` (logs, the node's database, the bucket, screenshots); it is
/// kept after the test so a failure can be read.
pub fn output_dir(base: &Path, name: &str) -> PathBuf {
	let dir = base.join(name);
	let _ = std::fs::remove_dir_all(&dir);
	std::fs::create_dir_all(&dir).unwrap();
	dir
}

/// Options for a small network of the `tiny` preset re-cut into `stages` stages, training on the
/// Shakespeare corpus: rows of `T = 32` tokens, micro-batches of `B = 4` rows, 64 rows per shard, bf16
/// wire, peak learning rate 1e-2 without warm-up (so one step visibly lowers the loss), `quota`
/// micro-batches per epoch, one compute thread per miner, a 40-block scoring window, the dashboard on a free port. Binaries come from the tests' target folder
/// (`$IOTA_E2E_BIN_DIR` overrides it).
pub fn tiny_network(
	run: &str,
	dir: &Path,
	stages: usize,
	miners_per_stage: u32,
	validators: u32,
	quota: u32,
) -> iota_devnet::NetworkOptions {
	let model =
		iota_devnet::recut(ModelConfig::tiny(), stages, 32).expect("tiny has enough blocks");
	let bin_dir = std::env::var_os("IOTA_E2E_BIN_DIR")
		.map(PathBuf::from)
		.unwrap_or_else(target_dir);
	let mut o = iota_devnet::NetworkOptions::new(run, dir, bin_dir, corpus(), model);
	o.data = shakespeare_options(run, o.data.model.clone(), "bf16");
	o.miners_per_stage = miners_per_stage;
	o.validators = validators;
	o.quota = quota;
	o.miner_threads = 1;
	o.log_filter = "info".into();
	o.validator_args = vec!["--poll-ms".into(), "1000".into()];
	// The dev preset's reveal window: a tiny epoch is judged in seconds.
	o.reveal_window = 20;
	// A tiny epoch's audit takes validators a few seconds, and epochs end every ~8 s now that the
	// orchestrator waits for inclusion only: 40 blocks leave room on two busy cores without making every
	// payout scenario wait 90.
	o.scoring_window = 40;
	// A port of its own: the orchestrator serves its dashboard on a fixed default port otherwise, which
	// another network on this machine may hold.
	o.dashboard_addr = Some(format!("127.0.0.1:{}", free_port()));
	o
}

/// A started [`iota_devnet::Network`] that prints the tail of every process's log when the test panics
/// (the network itself stops every process on drop).
pub struct TestNetwork(pub iota_devnet::Network);

impl TestNetwork {
	/// Starts the network (panics with the failing process's log tail).
	pub async fn start(options: iota_devnet::NetworkOptions) -> Self {
		for bin in ["iota-node", "iota-orchestrator", "iota-miner", "iota-validator"] {
			let p = options.bin_dir.join(bin);
			assert!(p.exists(), "{} not found: cargo build -p iota-orchestrator -p iota-miner -p iota-validator (and the node)", p.display());
		}
		match iota_devnet::Network::start(options).await {
			Ok(n) => Self(n),
			Err(e) => panic!("network did not start: {e}"),
		}
	}

	/// Panics (with every log tail) if a process other than those named in `allowed` has exited.
	pub fn assert_alive(&mut self, allowed: &[&str]) {
		let (_, _, dead) = self.0.liveness();
		let dead: Vec<String> =
			dead.into_iter().filter(|d| !allowed.contains(&d.as_str())).collect();
		assert!(dead.is_empty(), "processes exited: {dead:?}");
	}

	/// Polls `f` every 500 ms until it returns `Some`, failing fast when a process (other than `allowed`)
	/// exits and after `timeout`.
	pub async fn wait<T, F, Fut>(
		&mut self,
		what: &str,
		timeout: Duration,
		allowed: &[&str],
		mut f: F,
	) -> T
	where
		F: FnMut() -> Fut,
		Fut: std::future::Future<Output = Option<T>>,
	{
		let start = Instant::now();
		loop {
			if let Some(v) = f().await {
				return v;
			}
			self.assert_alive(allowed);
			assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
			tokio::time::sleep(Duration::from_millis(500)).await;
		}
	}

	/// Epoch `epoch`'s summary in the orchestrator's status (`watcher`'s view), once the epoch is
	/// complete; waits as [`wait`](Self::wait) does.
	pub async fn epoch_summary(
		&mut self,
		watcher: &SignedClient,
		epoch: u32,
		timeout: Duration,
		allowed: &[&str],
	) -> iota_rpc::types::EpochSummary {
		self.wait("the epoch in the orchestrator's status", timeout, allowed, || async {
			watcher.status().await.ok()?.epochs.into_iter().find(|e| e.epoch == epoch)
		})
		.await
	}

	/// The first epoch in `after + 1 .. after + within` whose manifest at `stage` merged `members`
	/// members, once it is committed (earlier epochs committed with fewer are passed over); waits as
	/// [`wait`](Self::wait) does.
	pub async fn first_merge_with(
		&mut self,
		chain: &IotaClient,
		stage: u16,
		members: u32,
		after: u32,
		within: u32,
		timeout: Duration,
	) -> u32 {
		let what = format!("an epoch after {after} of stage {stage} merged with {members} members");
		self.wait(&what, timeout, &[], || async {
			for e in (after + 1)..(after + within) {
				match chain.merge_manifest(e, stage).await.ok()? {
					Some(m) if m.members == members => return Some(e),
					Some(_) => continue,
					None => return None,
				}
			}
			None
		})
		.await
	}

	/// A client of the network's bucket (the orchestrator's credentials).
	pub async fn bucket(&self) -> ObjectStore {
		ObjectStore::connect(self.0.store_config.clone()).await.unwrap()
	}

	/// A signed orchestrator client for the dev account `suri`.
	pub async fn client_as(&self, suri: &str) -> SignedClient {
		let signer = Signer::from_uri(suri).unwrap();
		SignedClient::connect(
			&self.0.orchestrator_url,
			signer.keypair().clone(),
			Duration::from_secs(30),
		)
		.await
		.unwrap()
	}

	/// The index (in start order) of the miner process holding `account`, if the network started one.
	pub fn miner_index(&self, account: &iota_rpc::AccountId) -> Option<usize> {
		let (miners, _) = self.accounts();
		miners
			.iter()
			.position(|s| Signer::from_uri(s).is_ok_and(|x| &x.account_id() == account))
	}

	/// The secret URIs of the network's miners and validators, in start order.
	pub fn accounts(&self) -> (Vec<&'static str>, Vec<&'static str>) {
		iota_devnet::assign_accounts(self.0.miners.len(), self.0.validators.len()).unwrap()
	}

	/// Picks one of the two miners of `stage` (as the orchestrator seats them) and freezes it (SIGSTOP)
	/// mid-epoch: the first time it is seen holding a lease while the stage trains, after it did work in
	/// the epoch. If two seconds later (a request sent just before the freeze has landed by then) it
	/// still holds a lease, it stays frozen; else it is let go (SIGCONT) and watched again. Panics after
	/// `timeout`.
	pub async fn freeze_busy_miner(
		&mut self,
		watcher: &SignedClient,
		stage: u16,
		timeout: Duration,
	) -> FrozenMiner {
		self.freeze_miner_after(watcher, stage, 0, timeout).await
	}

	/// [`freeze_busy_miner`](Self::freeze_busy_miner), once the miner also has at least `backward`
	/// accepted backward passes in the epoch (`MinerActivity::backward_this_epoch`).
	pub async fn freeze_miner_after(
		&mut self,
		watcher: &SignedClient,
		stage: u16,
		backward: u32,
		timeout: Duration,
	) -> FrozenMiner {
		let (account, other) = self.stage_pair(watcher, stage, timeout).await;
		let busy = |s: &Status, account: &iota_rpc::AccountId| {
			let st = &s.stages[usize::from(stage)];
			let v = s.miners.iter().find(|m| &m.account == account)?;
			(st.phase == iota_primitives::Phase::Training
				&& v.samples_this_epoch > 0
				&& v.backward_this_epoch >= backward
				&& v.leases > 0)
				.then_some((st.epoch, v.leases))
		};
		self.freeze_miner_when(watcher, &account, &other, timeout, busy).await
	}

	/// The two miners seated at `stage` in the orchestrator's view, once both are.
	///
	/// # Panics
	/// Not seen within `timeout`.
	pub async fn stage_pair(
		&mut self,
		watcher: &SignedClient,
		stage: u16,
		timeout: Duration,
	) -> (iota_rpc::AccountId, iota_rpc::AccountId) {
		let members = self
			.wait(
				"both miners of the stage seated in the orchestrator's view",
				timeout,
				&[],
				|| async {
					let s = watcher.status().await.ok()?;
					let m = &s.stages[usize::from(stage)].miners;
					(m.len() == 2).then(|| m.clone())
				},
			)
			.await;
		(members[0].clone(), members[1].clone())
	}

	/// Freezes (SIGSTOP) `account` (a miner of the network; `other` the other member of its stage)
	/// once `when(status, account)` says `Some((epoch, leases held))`, and still says so 2 s into the
	/// freeze (else it is let go and watched again).
	///
	/// # Panics
	/// Not seen within `timeout`, or a process of the network died.
	pub async fn freeze_miner_when(
		&mut self,
		watcher: &SignedClient,
		account: &iota_rpc::AccountId,
		other: &iota_rpc::AccountId,
		timeout: Duration,
		when: impl Fn(&Status, &iota_rpc::AccountId) -> Option<(u32, u32)>,
	) -> FrozenMiner {
		self.pause_miner_when(watcher, account, other, timeout, Pause::Freeze, when)
			.await
	}

	/// [`freeze_miner_when`](Self::freeze_miner_when) with `how` the miner is paused: its process
	/// frozen, or its test host's link taken down (the network runs on test hosts).
	///
	/// # Panics
	/// Not seen within `timeout`, or a process of the network died.
	pub async fn pause_miner_when(
		&mut self,
		watcher: &SignedClient,
		account: &iota_rpc::AccountId,
		other: &iota_rpc::AccountId,
		timeout: Duration,
		how: Pause,
		when: impl Fn(&Status, &iota_rpc::AccountId) -> Option<(u32, u32)>,
	) -> FrozenMiner {
		let index = self.miner_index(account).expect("a miner of the network");
		let pid = self.0.miners[index].pid();
		let deadline = Instant::now() + timeout;
		loop {
			assert!(Instant::now() < deadline, "never saw {account} in the state to pause it in");
			self.assert_alive(&[]);
			let Ok(s) = watcher.status().await else { continue };
			if when(&s, account).is_none() {
				tokio::time::sleep(Duration::from_millis(20)).await;
				continue;
			}
			let before = s.miners.iter().find(|m| &m.account == account);
			let frozen = FrozenMiner {
				account: account.clone(),
				other: other.clone(),
				index,
				pid,
				epoch: 0,
				leases: 0,
				how,
				leases_expired: before.map_or(0, |m| m.leases_expired),
				gone: before.map_or(0, |m| m.gone),
			};
			self.set_paused(&frozen, true);
			tokio::time::sleep(Duration::from_secs(2)).await;
			if let Some((epoch, leases)) = when(&watcher.status().await.unwrap(), account) {
				return FrozenMiner { epoch, leases, ..frozen };
			}
			self.set_paused(&frozen, false);
		}
	}

	/// Pauses (`true`) or lets go (`false`) a miner paused by [`pause_miner_when`](Self::pause_miner_when).
	pub fn set_paused(&self, miner: &FrozenMiner, paused: bool) {
		match miner.how {
			Pause::Freeze => signal(miner.pid, if paused { "-STOP" } else { "-CONT" }),
			Pause::LinkDown => {
				let name = self.0.miners[miner.index].name();
				let hosts = self.0.hosts.as_ref().expect("a network on test hosts");
				hosts.set_link(name, !paused).unwrap();
			},
		}
	}

	/// A silent miner's story, common to a frozen process and a host whose link went down: `frozen` (a
	/// miner of `stage`, paused holding accepted passes of its epoch) is found silent by the
	/// orchestrator; it is let go; the stage merges the epoch from the other member alone without
	/// waiting for its phase timeout, and either (found while the stage trained) its passes were
	/// recomputed by the other member and the manifest counts the whole `quota`, or (found once uploads
	/// were open) they are counted lost and the manifest counts the rest; nothing of it meets an
	/// untyped or sample-count refusal (its gradient of the epoch is void); it holds the committed
	/// state, and a later epoch merges both members. Returns the passes lost and that later epoch.
	///
	/// # Panics
	/// On any of those not holding, or a process of the network dying.
	pub async fn silent_member_goes(
		&mut self,
		chain: &IotaClient,
		watcher: &SignedClient,
		spec: &RunSpec,
		frozen: FrozenMiner,
		(stage, quota): (u16, u32),
		timeout: Duration,
	) -> (u32, u32) {
		let started = Instant::now();
		let (victim, survivor, epoch) =
			(frozen.account.clone(), frozen.other.clone(), frozen.epoch);
		let gone = frozen.gone + 1;
		self.wait("the paused miner found silent", timeout, &[], || async {
			let s = watcher.status().await.ok()?;
			(s.miners.iter().find(|m| m.account == victim)?.gone == gone).then_some(())
		})
		.await;
		eprintln!(
			"paused {victim} ({:?}) in epoch {epoch}; found silent after {:?}; letting it go",
			frozen.how,
			started.elapsed()
		);
		self.set_paused(&frozen, false);

		let m = self
			.wait("the stage merged the epoch", timeout, &[], || async {
				chain.merge_manifest(epoch, stage).await.ok()?
			})
			.await;
		let summary = self.epoch_summary(watcher, epoch, timeout, &[]).await;
		let store = self.bucket().await;
		let log = pathway_log(self, watcher, &store, epoch).await;
		let by_victim =
			log.records.iter().filter(|r| r.backward[usize::from(stage)] == victim).count() as u32;
		let advances = self.phase_advances(stage, epoch, "Training");
		eprintln!(
			"epoch {epoch}: stage {stage} merged {} samples from {} member(s); the victim's accepted \
			 backward passes {by_victim}; {} recomputed, {} lost; committed {:?} after the pause; left \
			 Training timed out: {advances:?}",
			m.samples,
			m.members,
			summary.recomputed,
			summary.lost,
			started.elapsed()
		);
		assert!(by_victim > 0, "it had accepted passes");
		assert_eq!(
			advances.first(),
			Some(&false),
			"stage {stage} did not wait for the phase timeout"
		);
		assert_eq!(m.members, 1);
		if summary.lost == 0 {
			// Found while the stage trained: its passes were recomputed by the other member.
			assert_eq!(summary.recomputed, by_victim);
			assert_eq!(m.samples, quota, "the manifest counts the whole quota");
			assert!(log.records.iter().all(|r| r.counted_by(stage) == Some(&survivor)));
		} else {
			// Found once uploads were open (the other's gradient may be in): its passes are lost.
			assert_eq!((summary.recomputed, summary.lost), (0, by_victim));
			assert_eq!(m.samples + by_victim, quota, "the manifest counts every pass but the lost");
		}
		let state = check_manifest(&store, spec, stage, epoch, &m, 1).await;
		let status = watcher.status().await.unwrap();
		let refusals = &status.miners.iter().find(|m| m.account == victim).unwrap().refusals;
		eprintln!("the miner's refusals once let go: {refusals:?}");
		// Its void gradient is never weighed, and nothing of it meets an untyped refusal: told its
		// passes are forfeited through the merge as well (clean-clone CI #25: told `merging`, it asked
		// for shards of a round it was not in, refused `invalid`), it follows the merge without asking
		// for shards.
		assert!(
			refusals.keys().all(|c| {
				["lease_expired", "wrong_phase", "unknown", "stale_timestamp"].contains(&c.as_str())
			}),
			"{refusals:?}"
		);
		// It holds a committed state either way it catches up: it applies the epoch's merged step (and
		// attests the state), or, when the merge was committed before it could, it resynchronises from
		// the latest committed manifest's checkpoint (`loaded the attested checkpoint … epoch=e`, the
		// manifest of epoch e − 1 ≥ this epoch). Both may come after the commit seen here (clean-clone
		// CI #39 read its log once, too early; CI #42 saw the resynchronisation).
		let log = self.0.miners[frozen.index].log().to_path_buf();
		let held = self
			.wait("the miner let go to hold a committed state", timeout, &[], || {
				let log = log.clone();
				async move {
					let text = std::fs::read_to_string(&log).ok()?;
					if let Some(h) = attested_state_hashes(&text).get(&(stage, epoch)) {
						return Some((epoch, h.clone()));
					}
					let loaded = loaded_checkpoints(&text);
					let ((_, e), h) =
						loaded.range((stage, epoch + 1)..=(stage, u32::MAX)).next()?;
					Some((e - 1, h.clone()))
				}
			})
			.await;
		// The miner reads manifests at the best block and `chain` at the finalized one, so the manifest
		// it resynchronised from may not be finalized yet (clean-clone CI of stop 50 read `None` here).
		let committed = if held.0 == epoch {
			state.to_string()
		} else {
			self.wait("the manifest the miner let go loaded, finalized", timeout, &[], || async {
				chain.merge_manifest(held.0, stage).await.ok().flatten()
			})
			.await
			.state_hash
			.to_string()
		};
		eprintln!("the miner let go holds epoch {}'s committed state", held.0);
		assert_eq!(held.1, committed, "the miner let go holds the committed state");
		let later = self.first_merge_with(chain, stage, 2, epoch, 40, timeout).await;
		eprintln!(
			"epoch {later}: stage {stage} merged both members; {:?} after the pause",
			started.elapsed()
		);
		self.assert_alive(&[]);
		(summary.lost, later)
	}

	/// Whether each `advance_phase` the orchestrator sent for `stage` in `epoch` out of `from` (a
	/// phase name as logged: `Training`, `WeightsUploading`, `Merging`) was sent for a timed-out phase
	/// (its `timed_out` field), in log order; read from the orchestrator's log (colours stripped).
	pub fn phase_advances(&self, stage: u16, epoch: u32, from: &str) -> Vec<bool> {
		let text = std::fs::read_to_string(self.0.orchestrator.log()).unwrap_or_default();
		let plain = strip_ansi(&text);
		let fields =
			[format!(" stage={stage} "), format!(" epoch={epoch} "), format!(" from={from} ")];
		plain
			.lines()
			.filter(|l| l.contains(" advance_phase") || l.ends_with("advance_phase"))
			.filter(|l| fields.iter().all(|f| l.contains(f.as_str())))
			.filter_map(|l| {
				if l.contains(" timed_out=true") {
					Some(true)
				} else if l.contains(" timed_out=false") {
					Some(false)
				} else {
					None
				}
			})
			.collect()
	}

	/// The text of every miner's log, in start order.
	pub fn miner_logs(&self) -> Vec<String> {
		self.0
			.miners
			.iter()
			.map(|m| std::fs::read_to_string(m.log()).unwrap_or_default())
			.collect()
	}
}

/// A miner [`TestNetwork::freeze_busy_miner`] froze.
#[derive(Clone, Debug)]
pub struct FrozenMiner {
	/// Its account.
	pub account: iota_rpc::AccountId,
	/// The other miner of its stage.
	pub other: iota_rpc::AccountId,
	/// Its index among the network's miner processes.
	pub index: usize,
	/// Its process id.
	pub pid: u32,
	/// The stage's epoch when it froze.
	pub epoch: u32,
	/// Leases it held when it froze.
	pub leases: u32,
	/// How it was paused.
	pub how: Pause,
	/// Its leases that had expired before the pause (`leases_expired` in the status that decided it).
	pub leases_expired: u64,
	/// Times it had been found silent before the pause (`gone` in that status).
	pub gone: u64,
}

/// How [`TestNetwork::pause_miner_when`] pauses a miner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
	/// SIGSTOP (SIGCONT lets it go).
	Freeze,
	/// Its test host's link down: the process runs on, nothing reaches it or leaves it.
	LinkDown,
}

impl std::ops::Deref for TestNetwork {
	type Target = iota_devnet::Network;
	fn deref(&self) -> &Self::Target {
		&self.0
	}
}

impl std::ops::DerefMut for TestNetwork {
	fn deref_mut(&mut self) -> &mut Self::Target {
		&mut self.0
	}
}

impl Drop for TestNetwork {
	fn drop(&mut self) {
		if std::thread::panicking() {
			let n = &self.0;
			eprintln!("--- logs under {} ---", n.run_dir().display());
			for p in std::iter::once(&n.orchestrator)
				.chain(n.miners.iter())
				.chain(n.validators.iter())
			{
				eprintln!("--- {} (last 25 lines) ---\n{}", p.name(), p.log_tail(25));
			}
		}
	}
}

/// `(stage, epoch) -> state hash` of every "loaded the attested checkpoint" line of an `iota-miner` log
/// (a resynchronisation into `epoch` from the checkpoint of epoch `epoch − 1`'s manifest).
pub fn loaded_checkpoints(log: &str) -> std::collections::BTreeMap<(u16, u32), String> {
	states_logged(log, &["loaded the attested checkpoint"])
}

/// `(stage, epoch) -> state hash` of every "AdamW step applied" (sync mode) or "outer step applied"
/// (local mode) line of an `iota-miner` log (the hash the replica attested after the step).
pub fn attested_state_hashes(log: &str) -> std::collections::BTreeMap<(u16, u32), String> {
	states_logged(log, &["AdamW step applied", "outer step applied"])
}

/// `(stage, epoch) -> state` of every line of `log` (colours stripped) holding one of `messages`.
fn states_logged(log: &str, messages: &[&str]) -> std::collections::BTreeMap<(u16, u32), String> {
	let field = |line: &str, key: &str| -> Option<String> {
		let at = line.find(&format!(" {key}="))? + key.len() + 2;
		Some(line[at..].split_whitespace().next()?.to_string())
	};
	strip_ansi(log)
		.lines()
		.filter(|l| messages.iter().any(|m| l.contains(m)))
		.filter_map(|l| {
			Some((
				(field(l, "stage")?.parse().ok()?, field(l, "epoch")?.parse().ok()?),
				field(l, "state")?,
			))
		})
		.collect()
}

/// Checks a committed merge manifest against the bucket: `members` gradients were averaged, there are
/// `shard_count(members)` reduced shards tiling the stage's `P` parameters, every shard object and the
/// checkpoint are in the bucket with the hashes on chain, and the checkpoint, loaded into a fresh stage,
/// reproduces the attested state hash (`Stage::load_checkpoint`). Returns the state hash.
pub async fn check_manifest(
	store: &ObjectStore,
	spec: &RunSpec,
	stage: u16,
	epoch: u32,
	m: &iota_chain::MergeManifest,
	members: u32,
) -> ContentHash {
	let what = format!("stage {stage} epoch {epoch}");
	assert_eq!(m.members, members, "{what}: members averaged");
	let p = spec.model.stage_param_count(usize::from(stage)).unwrap() as u64;
	assert_eq!(m.param_count, p, "{what}: P");
	let k = iota_primitives::shard_count(members).unwrap();
	assert_eq!(m.shards.0.len() as u32, k, "{what}: every shard present");
	let mut elems = 0u64;
	for (i, s) in m.shards.0.iter().enumerate() {
		let key = String::from_utf8(s.key.0.clone()).unwrap();
		let bytes = store
			.get(&key, &s.content_hash)
			.await
			.unwrap_or_else(|e| panic!("{what}: shard {key}: {e}"));
		// Each shard is its range of the butterfly's tiling, in the codec's shard form (f32, or
		// int8 with per-chunk scales for the lossy codecs).
		let (lo, hi) = iota_primitives::butterfly::shard_range(i as u32, k, p);
		let want = iota_protocol::shard_len(spec.merge_codec, hi - lo, p);
		assert_eq!(bytes.len() as u64, want, "{what}: shard {i} is [{lo}, {hi}) in its codec");
		if spec.merge_codec == iota_protocol::codec::MergeCodec::F32 {
			assert!(
				iota_protocol::f32le::first_non_finite(&bytes).is_none(),
				"{what}: finite shard"
			);
		}
		elems += hi - lo;
	}
	assert_eq!(elems, p, "{what}: the shards tile the gradient");
	let state = m.state_hash;
	let ck = m
		.checkpoint
		.as_ref()
		.unwrap_or_else(|| panic!("{what}: a checkpoint every epoch"));
	let key = String::from_utf8(ck.key.0.clone()).unwrap();
	let bytes = store
		.get(&key, &ck.content_hash)
		.await
		.unwrap_or_else(|e| panic!("{what}: checkpoint {key}: {e}"));
	let mut st = iota_model::Stage::new(
		&spec.model,
		usize::from(stage),
		spec.seed,
		candle_core::DType::F32,
		&candle_core::Device::Cpu,
	)
	.unwrap();
	st.train_as(&spec.training);
	st.load_checkpoint(&bytes, &state.0)
		.unwrap_or_else(|e| panic!("{what}: the checkpoint is not the attested state: {e}"));
	state
}

/// The pathway log of `epoch`, read through a validator's `iota_epochRecord` and then from the bucket
/// directly: the object's BLAKE3 must be the hash the orchestrator reports and its key the protocol's.
pub async fn pathway_log(
	net: &TestNetwork,
	validator: &SignedClient,
	store: &ObjectStore,
	epoch: u32,
) -> PathwayLog {
	pathway_log_of(&net.options.run_id, validator, store, epoch).await
}

/// [`pathway_log`] of the run `run_id` (for scenarios that start their daemons without a [`TestNetwork`]).
pub async fn pathway_log_of(
	run_id: &str,
	validator: &SignedClient,
	store: &ObjectStore,
	epoch: u32,
) -> PathwayLog {
	let record = validator
		.epoch_record(epoch)
		.await
		.unwrap_or_else(|e| panic!("epochRecord({epoch}): {e}"));
	let obj = record
		.pathway_log
		.unwrap_or_else(|| panic!("epoch {epoch}: no pathway log recorded"));
	let run = keys::Id::new(run_id).unwrap();
	assert_eq!(obj.key, keys::pathway_log(&run, u64::from(epoch)), "the pathway log's key");
	let bytes = store
		.get(&obj.key, &obj.hash)
		.await
		.unwrap_or_else(|e| panic!("pathway log {}: {e}", obj.key));
	assert_eq!(
		ContentHash::of(&bytes),
		obj.hash,
		"the stored pathway log hashes to what the orchestrator reports"
	);
	let log = PathwayLog::from_slice(&bytes).unwrap();
	assert_eq!((log.run.as_str(), log.epoch), (run_id, epoch));
	log
}

/// The body of `GET http://{addr}{path}` (HTTP/1.0, no keep-alive); panics when it cannot be read.
pub async fn http_get(addr: &str, path: &str) -> String {
	try_http_get(addr, path)
		.await
		.unwrap_or_else(|| panic!("GET http://{addr}{path} failed"))
}

/// [`http_get`], `None` while nothing answers (a daemon still starting).
pub async fn try_http_get(addr: &str, path: &str) -> Option<String> {
	use tokio::io::{AsyncReadExt, AsyncWriteExt};
	let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
	s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
		.await
		.ok()?;
	let mut out = String::new();
	s.read_to_string(&mut out).await.ok()?;
	Some(out)
}

/// `text` without its ANSI escape sequences (`ESC [ … letter`), as a log written for a terminal holds.
pub fn strip_ansi(text: &str) -> String {
	let mut out = String::with_capacity(text.len());
	let mut chars = text.chars();
	while let Some(c) = chars.next() {
		if c == '\u{1b}' {
			if chars.next() == Some('[') {
				for c in chars.by_ref() {
					if c.is_ascii_alphabetic() {
						break;
					}
				}
			}
			continue;
		}
		out.push(c);
	}
	out
}

#[cfg(test)]
mod strip_tests {
	use super::strip_ansi;

	#[test]
	fn strips_the_colours_of_a_tracing_line() {
		let line = "\u{1b}[2m2026-12-05T13:37:01Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \u{1b}[2miota_orchestrator::chain\u{1b}[0m\u{1b}[2m:\u{1b}[0m advance_phase \u{1b}[3mstage\u{1b}[0m\u{1b}[2m=\u{1b}[0m0 \u{1b}[3mtimed_out\u{1b}[0m\u{1b}[2m=\u{1b}[0mfalse";
		assert_eq!(
			strip_ansi(line),
			"2026-12-05T13:37:01Z  INFO iota_orchestrator::chain: advance_phase stage=0 timed_out=false"
		);
		assert_eq!(strip_ansi("plain"), "plain");
	}

	#[test]
	fn the_rpc_address_is_read_from_the_node_log() {
		let line =
			"2026-12-07 16:09:26 Running JSON-RPC server: addr=127.0.0.1:37671,[::1]:35747    ";
		assert_eq!(super::rpc_addr_in_log_line(line).as_deref(), Some("127.0.0.1:37671"));
		assert_eq!(super::rpc_addr_in_log_line("2026-12-07 16:09:26 Idle (0 peers)"), None);
		assert_eq!(super::rpc_addr_in_log_line("Running JSON-RPC server: addr="), None);
		// Half-written: the port may be cut short.
		assert_eq!(
			super::rpc_addr_in_log_line("Running JSON-RPC server: addr=127.0.0.1:376"),
			None
		);
	}
}

#[cfg(test)]
mod log_tests {
	use super::*;

	#[test]
	fn resynchronisations_and_steps_are_read_from_a_miner_log() {
		let log =
			"2026-12-06T14:19:31Z  INFO iota_miner::miner::sync: loaded the attested checkpoint \
		           \x1b[3mstage\x1b[0m\x1b[2m=\x1b[0m1 \x1b[3mepoch\x1b[0m\x1b[2m=\x1b[0m3 \
		           \x1b[3mstate\x1b[0m\x1b[2m=\x1b[0mabc\n\
		           2026-12-06T14:19:31Z  INFO iota_miner::miner::merge: AdamW step applied stage=1 \
		           epoch=3 samples=8 state=def\n";
		let loaded = loaded_checkpoints(log);
		assert_eq!(loaded.get(&(1, 3)).map(String::as_str), Some("abc"));
		assert_eq!(loaded.len(), 1);
		assert_eq!(attested_state_hashes(log).get(&(1, 3)).map(String::as_str), Some("def"));
	}
}
