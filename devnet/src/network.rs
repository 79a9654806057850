//! A whole training network on 127.0.0.1: dev node (or an external chain such as the zombienet testnet),
//! the orchestrator with the embedded S3 server (or a real S3 endpoint), `stages × miners_per_stage`
//! miners and the validators, each a real process of its own binary with dev accounts.
//!
//! Start-up order: node → run data (tokenized once, in-process, into the bucket) → orchestrator (it
//! commits the run spec's hash on chain through sudo) → miners (they register with a bond; the pallet
//! spreads them over the stages) → validators (they register with stake).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iota_chain::IotaClient;
use iota_model::ModelConfig;
use iota_orchestrator::data::{prepare_data, PrepareOptions, Prepared};
use iota_rpc::types::Status;
use iota_storage::{EmbeddedConfig, EmbeddedS3, ObjectStore, StoreConfig};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use jsonrpsee::ws_client::{WsClient, WsClientBuilder};

use crate::hosts::{Hosts, HostsError};
use crate::process::{free_port, ProcessError, Supervised};

/// Dev accounts available to miners and validators, in the order they are handed out (Alice is the sudo
/// key and the orchestrator). All are funded in the dev and local chain specs.
pub const DEV_ACCOUNTS: [&str; 11] = [
	"//Bob",
	"//Charlie",
	"//Dave",
	"//Eve",
	"//Ferdie",
	"//Bob//stash",
	"//Charlie//stash",
	"//Dave//stash",
	"//Eve//stash",
	"//Ferdie//stash",
	"//Alice//stash",
];

/// Dev accounts the genesis presets register as validators (with stake): they can never register as
/// miners (`AlreadyRegistered`), so they are handed to validators first and never to miners.
pub const GENESIS_VALIDATORS: [&str; 2] = ["//Bob", "//Charlie"];

/// Splits [`DEV_ACCOUNTS`] into `miners` miner and `validators` validator secret URIs: miners take the
/// accounts that are not [`GENESIS_VALIDATORS`], in order; validators take the genesis validators first,
/// then the accounts after the miners'.
///
/// # Errors
/// [`NetworkError::TooManyAccounts`] when the dev accounts do not suffice.
pub fn assign_accounts(
	miners: usize,
	validators: usize,
) -> Result<(Vec<&'static str>, Vec<&'static str>), NetworkError> {
	let others: Vec<&'static str> = DEV_ACCOUNTS
		.iter()
		.copied()
		.filter(|a| !GENESIS_VALIDATORS.contains(a))
		.collect();
	let wanted = miners + validators;
	let extra_validators = validators.saturating_sub(GENESIS_VALIDATORS.len());
	if miners + extra_validators > others.len() {
		return Err(NetworkError::TooManyAccounts { wanted, available: DEV_ACCOUNTS.len() });
	}
	let m = others[..miners].to_vec();
	let v = GENESIS_VALIDATORS
		.iter()
		.copied()
		.chain(others[miners..].iter().copied())
		.take(validators)
		.collect();
	Ok((m, v))
}

/// The libp2p peer id of secret key 1 (`--node-key` of 63 zeros and a 1), the local testnet's Alice
/// node, which the other nodes name as bootnode.
const ALICE_NODE_PEER_ID: &str = "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp";

/// Which chain the network runs against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainTarget {
	/// Start `iota-node --dev` (1 s blocks, instant finality of its own blocks).
	Dev,
	/// Start the four-node local testnet (`iota-node --chain local` as Alice, Bob, Charlie and Dave,
	/// each an Aura author and GRANDPA voter, peered through Alice's node): finality goes on while 3 of
	/// the 4 nodes are up. Every daemon is given all four nodes' RPC URLs (`--chain-rpc`, comma
	/// separated) and fails over between them. (Three authorities would need all three for finality.)
	LocalTestnet,
	/// Use a running chain at this WebSocket URL (e.g. the zombienet testnet) whose sudo and orchestrator
	/// key is Alice.
	External(String),
}

/// Where the bucket is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreTarget {
	/// The orchestrator's embedded S3 server over `<run dir>/s3`.
	Embedded,
	/// A real S3 endpoint (`IOTA_S3_BUCKET`, `IOTA_S3_ACCESS_KEY`, `IOTA_S3_SECRET_KEY` from the
	/// environment, defaults as the orchestrator's).
	Endpoint(String),
}

/// What to start.
#[derive(Clone, Debug)]
pub struct NetworkOptions {
	/// Run id (bucket scope, report folder name).
	pub run_id: String,
	/// Folder for logs, the node's database, the embedded bucket, caches: `runs/<id>`.
	pub run_dir: PathBuf,
	/// Folder holding `iota-node`, `iota-orchestrator`, `iota-miner`, `iota-validator`.
	pub bin_dir: PathBuf,
	/// Corpus folder (`data/shakespeare`).
	pub corpus: PathBuf,
	/// Model, optimizer and data settings of the run.
	pub data: PrepareOptions,
	/// Miners per stage.
	pub miners_per_stage: u32,
	/// Validators.
	pub validators: u32,
	/// Samples (micro-batches) per epoch: the chain's `backward_quota`.
	pub quota: u32,
	/// Blocks after an epoch completes during which validators may set weights (set on chain through
	/// sudo). Validators recompute their spot-checks first; on 2 shared cores that takes about a minute.
	pub scoring_window: u32,
	/// Blocks after the scoring window during which validators reveal their committed weights (set on
	/// chain through sudo). Validators reveal in a task of their own, beside judging, so this covers a
	/// reveal's inclusion, not an audit.
	pub reveal_window: u32,
	/// Chain.
	pub chain: ChainTarget,
	/// Bucket.
	pub store: StoreTarget,
	/// Serve the dashboard here (the orchestrator's `--dashboard-addr`), if set.
	pub dashboard_addr: Option<String>,
	/// The orchestrator deletes finalized epochs' check objects (`--prune-finalized`).
	pub prune_finalized: bool,
	/// Extra arguments per miner index (e.g. a fault-injection option for tests).
	pub miner_args: Vec<(usize, Vec<String>)>,
	/// Extra arguments for `iota-orchestrator run` (e.g. `--lease-ms`, `--phase-timeout` in tests).
	pub orchestrator_args: Vec<String>,
	/// Extra arguments for every validator (e.g. `--poll-ms`).
	pub validator_args: Vec<String>,
	/// Compute threads per miner (`RAYON_NUM_THREADS`).
	pub miner_threads: usize,
	/// Run the validators at this niceness (`nice -n`, 0-19; `None`: the miners' priority). On one
	/// machine shared by every role, a niced validator gets the CPU mostly when the others leave it
	/// (at nice 10 about a tenth of a contended core's share), closer to validators on machines of
	/// their own; its checks still have the scoring window (blocks) to finish.
	pub validator_nice: Option<u8>,
	/// Extra `RUST_LOG` for every child (default `info`).
	pub log_filter: String,
	/// Put every miner and validator on a test host of its own ([`crate::hosts`]: a network namespace
	/// linked to the node, orchestrator and S3 server, which then listen on the hosts' bridge), with
	/// links of this rate. `None`: every process on 127.0.0.1.
	pub hosts: Option<HostLinks>,
}

/// The links of test hosts ([`NetworkOptions::hosts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostLinks {
	/// Each host's link rate in both directions, in Mbit/s (`None`: unlimited).
	pub mbit: Option<u32>,
}

impl NetworkOptions {
	/// Options for `model` with the defaults the devnet uses: 2 miners per stage, 2 validators, the
	/// dev chain and the embedded bucket, one compute thread per miner.
	pub fn new(
		run_id: impl Into<String>,
		run_dir: impl Into<PathBuf>,
		bin_dir: impl Into<PathBuf>,
		corpus: impl Into<PathBuf>,
		model: ModelConfig,
	) -> Self {
		let run_id = run_id.into();
		let corpus = corpus.into();
		NetworkOptions {
			data: PrepareOptions::new(run_id.clone(), corpus.clone(), model),
			run_id,
			run_dir: run_dir.into(),
			bin_dir: bin_dir.into(),
			corpus,
			miners_per_stage: 2,
			validators: 2,
			quota: 16,
			scoring_window: 90,
			reveal_window: 30,
			chain: ChainTarget::Dev,
			store: StoreTarget::Embedded,
			dashboard_addr: None,
			prune_finalized: false,
			miner_args: Vec::new(),
			orchestrator_args: Vec::new(),
			validator_args: Vec::new(),
			miner_threads: 1,
			validator_nice: None,
			log_filter: "info".into(),
			hosts: None,
		}
	}

	/// Number of pipeline stages (from the model's cuts).
	pub fn stages(&self) -> u32 {
		self.data.model.stages.len() as u32
	}
}

/// Why the network could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
	/// A process could not be started.
	#[error(transparent)]
	Process(#[from] ProcessError),
	/// A process exited while starting (its log tail is included).
	#[error("{name} exited during start-up; last log lines:\n{tail}")]
	Exited {
		/// Process name.
		name: String,
		/// Its log's last lines.
		tail: String,
	},
	/// A service did not answer in time.
	#[error("{what} did not answer within {secs} s: {last_error}")]
	Timeout {
		/// What was awaited.
		what: String,
		/// Seconds waited.
		secs: u64,
		/// The last error seen.
		last_error: String,
	},
	/// Too many miners and validators for the dev accounts.
	#[error("{wanted} miners and validators requested, but only {available} dev accounts exist")]
	TooManyAccounts {
		/// Requested.
		wanted: usize,
		/// Available.
		available: usize,
	},
	/// Preparing the data failed.
	#[error("preparing the run data: {0}")]
	Data(#[from] iota_orchestrator::data::DataError),
	/// Storage setup failed.
	#[error("object store: {0}")]
	Storage(String),
	/// I/O on the run folder.
	#[error("run folder: {0}")]
	Io(#[from] std::io::Error),
	/// A call to the orchestrator failed.
	#[error("orchestrator: {0}")]
	Rpc(#[from] jsonrpsee::core::ClientError),
	/// A chain call failed.
	#[error("chain: {0}")]
	Chain(#[from] iota_chain::Error),
	/// The test hosts could not be set up.
	#[error("test hosts: {0}")]
	Hosts(#[from] HostsError),
	/// Test hosts cannot reach an external chain or S3 endpoint on a loopback address (their own
	/// namespace's loopback is not the machine's).
	#[error(
		"test hosts cannot reach {0}, a loopback address: give one on an interface they share"
	)]
	Unreachable(String),
}

/// A running network. Dropping it stops every process (validators, miners, orchestrator, node).
pub struct Network {
	/// The options it was started with.
	pub options: NetworkOptions,
	/// Chain WebSocket URL.
	pub chain_url: String,
	/// Orchestrator WebSocket URL.
	pub orchestrator_url: String,
	/// Orchestrator metrics address.
	pub metrics_addr: String,
	/// What `prepare-data` produced.
	pub prepared: Prepared,
	/// The bucket's endpoint and credentials (the orchestrator's; for tests and reports that read what
	/// the network wrote).
	pub store_config: StoreConfig,
	/// The chain node processes the network started (none on an external chain), named `node` (dev)
	/// or `node-<authority>` (local testnet), in the order of the URLs in `chain_url`.
	pub nodes: Vec<Supervised>,
	/// The orchestrator process.
	pub orchestrator: Supervised,
	/// Miner processes, in start order (`miner-<account>`).
	pub miners: Vec<Supervised>,
	/// Validator processes.
	pub validators: Vec<Supervised>,
	/// The test hosts the miners and validators run on ([`NetworkOptions::hosts`]), named as their
	/// processes; removed after every process stopped.
	pub hosts: Option<Hosts>,
	rpc: WsClient,
}

/// One process's CPU time in a [`CpuReading`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessCpu {
	/// `node`, `orchestrator`, `miner` or `validator`.
	pub role: &'static str,
	/// Which process: its pid and its start time (clock ticks after boot), so a restart under the
	/// same name is a new process.
	pub process: (u32, u64),
	/// CPU seconds it has used since it started.
	pub secs: f64,
}

/// The CPU time of every running process of a network at one moment ([`Network::cpu_reading`]); two
/// of them give [`crate::report::CpuUse::between`].
#[derive(Clone, Debug)]
pub struct CpuReading {
	/// When it was read.
	pub at: std::time::Instant,
	/// Cores the machine offers (`std::thread::available_parallelism`).
	pub cores: usize,
	/// Per running process.
	pub processes: Vec<ProcessCpu>,
}

/// Whether `url`'s host is a loopback address (`127.0.0.0/8`, `::1`, `localhost`).
fn loopback_url(url: &str) -> bool {
	let rest = url.split_once("://").map_or(url, |(_, r)| r);
	let host = rest.split(['/', '?']).next().unwrap_or_default();
	let host = match host.strip_prefix('[') {
		Some(v6) => v6.split(']').next().unwrap_or_default(),
		None => host.rsplit_once(':').map_or(host, |(h, _)| h),
	};
	host.eq_ignore_ascii_case("localhost")
		|| host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn account_name(suri: &str) -> String {
	suri.trim_start_matches("//").replace("//", "-").to_lowercase()
}

async fn wait_until<T, F, Fut>(
	what: &str,
	timeout: Duration,
	proc: Option<&mut Supervised>,
	mut f: F,
) -> Result<T, NetworkError>
where
	F: FnMut() -> Fut,
	Fut: std::future::Future<Output = Result<T, String>>,
{
	let start = Instant::now();
	let mut proc = proc;
	loop {
		match f().await {
			Ok(v) => return Ok(v),
			Err(last_error) => {
				if let Some(p) = proc.as_deref_mut() {
					if !p.is_running() {
						return Err(NetworkError::Exited {
							name: p.name().to_owned(),
							tail: p.log_tail(30),
						});
					}
				}
				if start.elapsed() > timeout {
					return Err(NetworkError::Timeout {
						what: what.to_owned(),
						secs: timeout.as_secs(),
						last_error,
					});
				}
				tokio::time::sleep(Duration::from_millis(500)).await;
			},
		}
	}
}

impl Network {
	/// Starts everything and returns once the orchestrator answers and every miner and validator process
	/// is running (they register on chain by themselves).
	///
	/// # Errors
	/// [`NetworkError`]; whatever was started is stopped again.
	pub async fn start(options: NetworkOptions) -> Result<Self, NetworkError> {
		let (miner_accounts, validator_accounts) = assign_accounts(
			(options.miners_per_stage * options.stages()) as usize,
			options.validators as usize,
		)?;
		let logs = options.run_dir.join("logs");
		std::fs::create_dir_all(&logs)?;
		let bin = |name: &str| options.bin_dir.join(name);
		let miner_names: Vec<String> =
			miner_accounts.iter().map(|s| format!("miner-{}", account_name(s))).collect();
		let validator_names: Vec<String> = validator_accounts
			.iter()
			.map(|s| format!("validator-{}", account_name(s)))
			.collect();
		// Test hosts first: the cloud's services listen on their bridge.
		let hosts = match options.hosts {
			Some(links) => {
				if let ChainTarget::External(url) = &options.chain {
					if loopback_url(url) {
						return Err(NetworkError::Unreachable(url.clone()));
					}
				}
				if let StoreTarget::Endpoint(url) = &options.store {
					if loopback_url(url) {
						return Err(NetworkError::Unreachable(url.clone()));
					}
				}
				let names: Vec<String> =
					miner_names.iter().chain(&validator_names).cloned().collect();
				Some(Hosts::create(&names, links.mbit)?)
			},
			None => None,
		};
		let cloud = hosts.as_ref().map_or(std::net::Ipv4Addr::LOCALHOST, |h| h.cloud_addr());
		let under = |name: &str| -> Result<Vec<String>, NetworkError> {
			Ok(match &hosts {
				Some(h) => h.exec_prefix(name)?,
				None => Vec::new(),
			})
		};
		let log_env = vec![("RUST_LOG".to_owned(), options.log_filter.clone())];

		// 1. Chain.
		let node_args = |name: &str, rpc_port: u16, p2p_port: u16| -> Vec<String> {
			// On test hosts' bridge the node serves every method, as it does on 127.0.0.1.
			let rpc = if hosts.is_some() {
				[
					"--experimental-rpc-endpoint".to_owned(),
					format!("listen-addr={cloud}:{rpc_port},methods=unsafe"),
				]
			} else {
				["--rpc-port".to_owned(), rpc_port.to_string()]
			};
			let mut args: Vec<String> = vec![
				"--base-path".into(),
				options.run_dir.join(name).display().to_string(),
				"--port".into(),
				p2p_port.to_string(),
				"--no-telemetry".into(),
				"--no-mdns".into(),
				"--no-prometheus".into(),
			];
			args.extend(rpc);
			args
		};
		let (mut nodes, chain_url) = match &options.chain {
			ChainTarget::Dev => {
				let rpc_port = free_port();
				let mut args = vec!["--dev".to_owned()];
				args.extend(node_args("node", rpc_port, free_port()));
				let node = Supervised::spawn(
					"node",
					&bin("iota-node"),
					&args,
					&[],
					&logs.join("node.log"),
				)?;
				(vec![node], format!("ws://{cloud}:{rpc_port}"))
			},
			ChainTarget::LocalTestnet => {
				// Fixed p2p identities (secret keys 1 to 4; an authority of a non-dev chain needs one):
				// Alice's (key 1) is the others' bootnode.
				let boot_port = free_port();
				let boot = format!("/ip4/127.0.0.1/tcp/{boot_port}/p2p/{ALICE_NODE_PEER_ID}");
				let mut nodes = Vec::new();
				let mut urls = Vec::new();
				for (i, authority) in ["alice", "bob", "charlie", "dave"].iter().enumerate() {
					let name = format!("node-{authority}");
					let rpc_port = free_port();
					let p2p = if i == 0 { boot_port } else { free_port() };
					let mut args =
						vec!["--chain".to_owned(), "local".into(), format!("--{authority}")];
					args.extend(node_args(&name, rpc_port, p2p));
					args.extend(["--node-key".into(), format!("{:064x}", i + 1)]);
					if i > 0 {
						args.extend(["--bootnodes".into(), boot.clone()]);
					}
					nodes.push(Supervised::spawn(
						&name,
						&bin("iota-node"),
						&args,
						&[],
						&logs.join(format!("{name}.log")),
					)?);
					urls.push(format!("ws://{cloud}:{rpc_port}"));
				}
				(nodes, urls.join(","))
			},
			ChainTarget::External(url) => (Vec::new(), url.clone()),
		};
		let url = chain_url.clone();
		let several = nodes.len() > 1;
		let chain =
			wait_until("the chain node", Duration::from_secs(240), nodes.first_mut(), || {
				let url = url.clone();
				async move {
					let c = IotaClient::connect(&url).await.map_err(|e| e.to_string())?;
					// A multi-node chain is ready once it finalizes: its authorities have found each other.
					if several && c.finalized_number().await.map_err(|e| e.to_string())? < 1 {
						return Err("no block finalized yet".into());
					}
					Ok(c)
				}
			})
			.await?;
		drop(chain);

		// 2. Run data, written into the bucket before the orchestrator reads the spec.
		let s3_dir = options.run_dir.join("s3");
		let (store_args, prepared, store_config) = match &options.store {
			StoreTarget::Embedded => {
				let mut cfg = EmbeddedConfig::new(&s3_dir);
				let port = free_port();
				cfg.addr = std::net::SocketAddr::from((cloud, port));
				cfg.private_network = hosts.is_some();
				let server = EmbeddedS3::start(cfg)
					.await
					.map_err(|e| NetworkError::Storage(e.to_string()))?;
				let store = ObjectStore::connect(server.store_config())
					.await
					.map_err(|e| NetworkError::Storage(e.to_string()))?;
				let prepared = prepare_data(&store, &options.data).await;
				let store_config = server.store_config();
				server.shutdown().await;
				let mut args = vec![
					"--embedded-s3".to_owned(),
					s3_dir.display().to_string(),
					"--embedded-s3-addr".to_owned(),
					format!("{cloud}:{port}"),
				];
				if hosts.is_some() {
					args.push("--embedded-s3-private-network".to_owned());
				}
				(args, prepared?, store_config)
			},
			StoreTarget::Endpoint(endpoint) => {
				let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
				let (bucket, ak, sk) = (
					env("IOTA_S3_BUCKET", "iota"),
					env("IOTA_S3_ACCESS_KEY", "iota-dev"),
					env("IOTA_S3_SECRET_KEY", "iota-dev-secret"),
				);
				let cfg = StoreConfig::s3_compatible(endpoint.clone(), bucket.clone(), ak, sk);
				let store = ObjectStore::connect(cfg.clone())
					.await
					.map_err(|e| NetworkError::Storage(e.to_string()))?;
				store.ensure_bucket().await.map_err(|e| NetworkError::Storage(e.to_string()))?;
				let prepared = prepare_data(&store, &options.data).await?;
				(
					vec![
						"--s3-endpoint".to_owned(),
						endpoint.clone(),
						"--s3-bucket".to_owned(),
						bucket,
					],
					prepared,
					cfg,
				)
			},
		};

		// 3. Orchestrator (Alice: sudo commits the spec hash, stages and quota on the dev chain).
		let (listen, metrics) = (free_port(), free_port());
		let orchestrator_url = format!("ws://{cloud}:{listen}");
		let mut args: Vec<String> = vec![
			"run".into(),
			"--chain-rpc".into(),
			chain_url.clone(),
			"--suri".into(),
			"//Alice".into(),
			"--sudo-suri".into(),
			"//Alice".into(),
			"--backward-quota".into(),
			options.quota.to_string(),
			"--scoring-window".into(),
			options.scoring_window.to_string(),
			"--reveal-window".into(),
			options.reveal_window.to_string(),
			"--run".into(),
			options.run_id.clone(),
			"--listen".into(),
			format!("{cloud}:{listen}"),
			"--metrics-addr".into(),
			format!("127.0.0.1:{metrics}"),
			"--db".into(),
			options.run_dir.join("orchestrator.db").display().to_string(),
		];
		args.extend(store_args);
		args.extend(options.orchestrator_args.iter().cloned());
		if let Some(addr) = &options.dashboard_addr {
			args.extend(["--dashboard-addr".to_owned(), addr.clone()]);
		}
		if options.prune_finalized {
			args.push("--prune-finalized".to_owned());
		}
		let mut orchestrator = Supervised::spawn(
			"orchestrator",
			&bin("iota-orchestrator"),
			&args,
			&log_env,
			&logs.join("orchestrator.log"),
		)?;
		let url = orchestrator_url.clone();
		let rpc = wait_until(
			"the orchestrator",
			Duration::from_secs(120),
			Some(&mut orchestrator),
			|| {
				let url = url.clone();
				async move {
					let c = WsClientBuilder::default()
						.request_timeout(Duration::from_secs(30))
						.build(&url)
						.await
						.map_err(|e| e.to_string())?;
					let _: Status =
						c.request("iota_status", rpc_params![]).await.map_err(|e| e.to_string())?;
					Ok(c)
				}
			},
		)
		.await?;

		// 4. Miners and validators.
		let mut miner_env = log_env.clone();
		miner_env.push(("RAYON_NUM_THREADS".into(), options.miner_threads.to_string()));
		let mut miners = Vec::with_capacity(miner_accounts.len());
		for (i, (suri, name)) in miner_accounts.iter().zip(&miner_names).enumerate() {
			let mut args: Vec<String> = vec![
				"--chain-rpc".into(),
				chain_url.clone(),
				"--orchestrator".into(),
				orchestrator_url.clone(),
				"--suri".into(),
				(*suri).into(),
				"--threads".into(),
				options.miner_threads.to_string(),
				"--cache-dir".into(),
				options.run_dir.join("cache").join(name).display().to_string(),
			];
			for (_, extra) in options.miner_args.iter().filter(|(j, _)| *j == i) {
				args.extend(extra.iter().cloned());
			}
			miners.push(Supervised::spawn_under(
				name,
				&under(name)?,
				&bin("iota-miner"),
				&args,
				&miner_env,
				&logs.join(format!("{name}.log")),
			)?);
		}
		let mut validators = Vec::new();
		for (suri, name) in validator_accounts.iter().zip(&validator_names) {
			let mut args: Vec<String> = vec![
				"--chain-rpc".into(),
				chain_url.clone(),
				"--orchestrator".into(),
				orchestrator_url.clone(),
				"--suri".into(),
				(*suri).into(),
				"--metrics-addr".into(),
				format!("127.0.0.1:{}", free_port()),
				"--state-dir".into(),
				options.run_dir.join("validator-state").to_string_lossy().into_owned(),
			];
			args.extend(options.validator_args.iter().cloned());
			let mut wrapper = under(name)?;
			if let Some(n) = options.validator_nice {
				wrapper.extend(["nice".to_owned(), "-n".to_owned(), n.to_string()]);
			}
			validators.push(Supervised::spawn_under(
				name,
				&wrapper,
				&bin("iota-validator"),
				&args,
				&miner_env,
				&logs.join(format!("{name}.log")),
			)?);
		}
		Ok(Network {
			chain_url,
			orchestrator_url,
			metrics_addr: format!("127.0.0.1:{metrics}"),
			prepared,
			store_config,
			nodes,
			orchestrator,
			miners,
			validators,
			hosts,
			rpc,
			options,
		})
	}

	/// The orchestrator's `iota_status`.
	///
	/// # Errors
	/// [`NetworkError::Rpc`].
	pub async fn status(&self) -> Result<Status, NetworkError> {
		Ok(self.rpc.request("iota_status", rpc_params![]).await?)
	}

	/// Reconnects the status client (after an orchestrator restart).
	///
	/// # Errors
	/// [`NetworkError::Timeout`] when the orchestrator does not answer within `timeout`.
	pub async fn reconnect(&mut self, timeout: Duration) -> Result<(), NetworkError> {
		let url = self.orchestrator_url.clone();
		self.rpc = wait_until("the orchestrator", timeout, Some(&mut self.orchestrator), || {
			let url = url.clone();
			async move {
				let c = WsClientBuilder::default().build(&url).await.map_err(|e| e.to_string())?;
				let _: Status =
					c.request("iota_status", rpc_params![]).await.map_err(|e| e.to_string())?;
				Ok(c)
			}
		})
		.await?;
		Ok(())
	}

	/// A chain client.
	///
	/// # Errors
	/// [`NetworkError::Chain`].
	pub async fn chain(&self) -> Result<IotaClient, NetworkError> {
		Ok(IotaClient::connect(&self.chain_url).await?)
	}

	/// The CPU seconds (user + system, from `/proc/<pid>/stat`, all of its threads) each running process
	/// of the network has used since it started, now: roles `node`, `orchestrator` (the embedded S3
	/// server included), `miner`, `validator`. A process that exited is left out (its CPU is lost to
	/// the split).
	pub fn cpu_reading(&self) -> CpuReading {
		let tps = procfs::ticks_per_second() as f64;
		let of = |role: &'static str, p: &Supervised| -> Option<ProcessCpu> {
			let st =
				procfs::process::Process::new(i32::try_from(p.pid()).ok()?).ok()?.stat().ok()?;
			Some(ProcessCpu {
				role,
				process: (p.pid(), st.starttime),
				secs: (st.utime + st.stime) as f64 / tps,
			})
		};
		let roles = [
			("node", self.nodes.iter().collect::<Vec<_>>()),
			("orchestrator", vec![&self.orchestrator]),
			("miner", self.miners.iter().collect()),
			("validator", self.validators.iter().collect()),
		];
		CpuReading {
			at: std::time::Instant::now(),
			cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
			processes: roles
				.into_iter()
				.flat_map(|(role, ps)| ps.into_iter().filter_map(move |p| of(role, p)))
				.collect(),
		}
	}

	/// How many miner and validator processes are running, and the names of those that exited.
	pub fn liveness(&mut self) -> (usize, usize, Vec<String>) {
		let mut dead = Vec::new();
		let mut alive = |ps: &mut Vec<Supervised>| {
			let mut n = 0;
			for p in ps.iter_mut() {
				if p.is_running() {
					n += 1;
				} else {
					dead.push(p.name().to_owned());
				}
			}
			n
		};
		let m = alive(&mut self.miners);
		let v = alive(&mut self.validators);
		if !self.orchestrator.is_running() {
			dead.push("orchestrator".into());
		}
		for n in &mut self.nodes {
			if !n.is_running() {
				dead.push(n.name().to_owned());
			}
		}
		(m, v, dead)
	}

	/// The run folder.
	pub fn run_dir(&self) -> &Path {
		&self.options.run_dir
	}

	/// Stops every process: validators, miners (SIGTERM: they hand back their leases), orchestrator, node.
	pub fn stop(&mut self) {
		for p in self.validators.iter_mut().chain(self.miners.iter_mut()) {
			p.stop(Duration::from_secs(10));
		}
		self.orchestrator.stop(Duration::from_secs(10));
		for n in &mut self.nodes {
			n.stop(Duration::from_secs(10));
		}
	}
}

impl Drop for Network {
	fn drop(&mut self) {
		self.stop();
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn loopback_urls_are_recognised() {
		for (url, yes) in [
			("ws://127.0.0.1:9944", true),
			("ws://127.0.0.2:9944", true),
			("http://localhost:9000/bucket", true),
			("ws://[::1]:9944", true),
			("ws://10.200.0.1:9944", false),
			("https://s3.example.com", false),
			("http://[fd00::1]:9000", false),
		] {
			assert_eq!(loopback_url(url), yes, "{url}");
		}
	}

	#[test]
	fn genesis_validators_never_mine() {
		let (m, v) = assign_accounts(6, 2).unwrap();
		assert_eq!(v, vec!["//Bob", "//Charlie"]);
		assert_eq!(
			m,
			vec![
				"//Dave",
				"//Eve",
				"//Ferdie",
				"//Bob//stash",
				"//Charlie//stash",
				"//Dave//stash"
			]
		);
		let (m, v) = assign_accounts(3, 1).unwrap();
		assert_eq!((m.len(), v), (3, vec!["//Bob"]));
		assert!(m.iter().all(|a| !GENESIS_VALIDATORS.contains(a)));
		let (m, v) = assign_accounts(8, 3).unwrap();
		assert_eq!(v, vec!["//Bob", "//Charlie", "//Alice//stash"]);
		assert_eq!(m.len(), 8);
		assert!(matches!(
			assign_accounts(9, 3),
			Err(NetworkError::TooManyAccounts { wanted: 12, .. })
		));
		assert!(matches!(assign_accounts(10, 0), Err(NetworkError::TooManyAccounts { .. })));
	}
}
