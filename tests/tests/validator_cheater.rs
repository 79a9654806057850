//! A cheating miner is singled out, slashed and unpaid: a dev node, the embedded S3 server, the
//! orchestrator, 3 stages × 2 real `iota-miner` processes training `tiny` on Shakespeare, one of which
//! (a stage-0 miner) runs with `--fault perturb=0.5` (uniform noise added to every activation it
//! uploads), and one `iota-validator` (Bob, a genesis validator holding half the validator stake, which
//! is the dev run's slash quorum).
//!
//! Asserted: within the first 2 epochs the validator's `Fail` verdict on the cheater is on chain and the
//! cheater's bond is slashed (its miner record is gone); every verdict on an honest miner in those
//! epochs is `Pass`; the validator's weights for epoch 0 give the cheater nothing; epoch 0 is finalized
//! (by the validator, after the scoring window) and its emission split pays every honest miner and not
//! the cheater. The evidence object whose BLAKE3 is on chain with the `Fail` is in the bucket and says
//! `Fail`; the validator's `/metrics` counts the failed checks and the submitted verdicts.
//!
//! ```sh
//! ./scripts/fetch-data.sh                                             # data/shakespeare
//! cargo build -p iota-orchestrator -p iota-validator
//! cargo build -p iota-miner --features fault-injection                # honest miners use it too
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test validator_cheater -- --ignored --nocapture
//! ```
//! (`$IOTA_MINER_BIN`, `$IOTA_VALIDATOR_BIN` override the binaries' paths.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use iota_chain::{AccountId, IotaClient, Signer, Verdict};
use iota_primitives::ContentHash;
use iota_storage::keys::{self, Id};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::{prepare_data, PrepareOptions};
use iota_rpc::LrSchedule;

const RUN: &str = "e2e-validator";
/// Two epochs of the whole pipeline plus the scoring window on 2 shared cores: generous.
const TIMEOUT: Duration = Duration::from_secs(1800);
const MINERS: [&str; 6] = ["//Dave", "//Eve", "//Ferdie", "//Dave//stash", "//Eve//stash", "//Ferdie//stash"];

/// A child process killed on drop, its log tail printed if the test panics.
struct Proc {
	child: Child,
	log: PathBuf,
	name: String,
}

impl Proc {
	fn start(name: &str, bin: &Path, args: &[String], log: PathBuf, rust_log: &str) -> Self {
		assert!(bin.exists(), "{} not found (see this file's docs for the build commands)", bin.display());
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

	fn log_text(&self) -> String {
		std::fs::read_to_string(&self.log).unwrap_or_default()
	}
}

impl Drop for Proc {
	fn drop(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
		if std::thread::panicking() {
			let text = self.log_text();
			let tail: Vec<&str> = text.lines().rev().take(30).collect();
			eprintln!("--- {} log (last 30 lines) ---", self.name);
			for l in tail.into_iter().rev() {
				eprintln!("{l}");
			}
		}
	}
}

fn bin(env: &str, name: &str) -> PathBuf {
	std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| target_dir().join(name))
}

async fn verdicts(client: &IotaClient, epoch: u32, miner: &AccountId, validator: &AccountId) -> Vec<Verdict> {
	client
		.spot_checks(epoch, miner)
		.await
		.unwrap()
		.into_iter()
		.filter(|c| &c.validator == validator)
		.map(|c| c.verdict)
		.collect()
}

/// The body of `GET /metrics` at `addr`.
async fn scrape(addr: &str) -> String {
	let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
	s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
	let mut out = String::new();
	s.read_to_string(&mut out).await.unwrap();
	out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn a_perturbing_miner_is_failed_slashed_and_unpaid_within_two_epochs() {
	let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/shakespeare");
	assert!(corpus.is_dir(), "{} missing: run scripts/fetch-data.sh", corpus.display());
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;

	let mut opts = PrepareOptions::new(RUN, &corpus, ModelConfig::tiny());
	opts.seq_len = 32;
	opts.batch_rows = 4;
	opts.rows_per_shard = 64;
	opts.encoding = "bf16".into();
	opts.lr = LrSchedule { peak: 1e-2, warmup_epochs: 0, total_epochs: 100, min_ratio: 0.1 };
	prepare_data(&s3.store, &opts).await.unwrap();

	// Six miners, two per stage; the cheater is the first one seated at stage 0 (its activations feed
	// stage 1, so the noise reaches the loss).
	let mut by_stage: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
	for name in MINERS {
		let s = Signer::from_uri(name).unwrap();
		client.register_miner(&s).await.unwrap();
		let stage = client.miner(&s.account_id()).await.unwrap().unwrap().stage;
		by_stage.entry(stage).or_default().push(name);
	}
	assert_eq!(by_stage.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{by_stage:?}");
	let cheater_name = by_stage[&0][0];
	let cheater = Signer::from_uri(cheater_name).unwrap().account_id();
	let honest: Vec<AccountId> =
		MINERS.iter().filter(|n| **n != cheater_name).map(|n| Signer::from_uri(n).unwrap().account_id()).collect();
	let bob = Signer::dev("bob").unwrap().account_id();
	assert!(client.validator(&bob).await.unwrap().is_some(), "Bob is a genesis validator");

	let dir = work_dir();
	let args: Vec<String> = [
		"--chain-rpc", &node.rpc_url, "--suri", "//Alice", "--sudo-suri", "//Alice", "--backward-quota", "8", "--run", RUN,
		"--lease-ms", "30000", "--s3-endpoint", &s3.server.endpoint(),
	]
	.iter()
	.map(|s| s.to_string())
	.chain(["--db".to_string(), dir.path().join("o.db").display().to_string()])
	.collect();
	let mut orch = OrchestratorProcess::start(&args, dir.path().join("orchestrator.log"));
	orch.wait_ready().await;

	let miner_bin = bin("IOTA_MINER_BIN", "iota-miner");
	let _miners: Vec<Proc> = MINERS
		.iter()
		.enumerate()
		.map(|(i, name)| {
			let mut a: Vec<String> = ["--chain-rpc", &node.rpc_url, "--orchestrator", &orch.url, "--suri", name, "--threads", "1"]
				.iter()
				.map(|s| s.to_string())
				.collect();
			a.extend(["--metrics-addr".into(), format!("127.0.0.1:{}", free_port())]);
			a.extend(["--cache-dir".into(), dir.path().join(format!("cache-{i}")).display().to_string()]);
			if *name == cheater_name {
				a.extend(["--fault".into(), "perturb=0.5".into()]);
			}
			Proc::start(&format!("iota-miner {name}"), &miner_bin, &a, dir.path().join(format!("miner-{i}.log")), "info")
		})
		.collect();

	let metrics_addr = format!("127.0.0.1:{}", free_port());
	let validator_args: Vec<String> = [
		"--suri", "//Bob", "--chain-rpc", &node.rpc_url, "--orchestrator", &orch.url, "--poll-ms", "1000",
		"--metrics-addr", &metrics_addr,
	]
	.iter()
	.map(|s| s.to_string())
	.collect();
	let validator = Proc::start(
		"iota-validator",
		&bin("IOTA_VALIDATOR_BIN", "iota-validator"),
		&validator_args,
		dir.path().join("validator.log"),
		"info,iota_validator=debug",
	);

	// The cheater is failed and slashed within the first two epochs.
	let failed_at = wait_for("a Fail verdict on the cheater and its slash", TIMEOUT, || async {
		if client.miner(&cheater).await.ok()?.is_some() {
			return None;
		}
		for e in 0..2u32 {
			if verdicts(&client, e, &cheater, &bob).await.contains(&Verdict::Fail) {
				return Some(e);
			}
		}
		None
	})
	.await;
	eprintln!("cheater failed and slashed in epoch {failed_at}");

	// Epoch 0 is finalized (by the validator, once its scoring window closed).
	let split = wait_for("epoch 0 finalized", TIMEOUT, || async { client.emission_split(0).await.ok()? }).await;

	// Honest miners passed every check the validator made in the epochs it judged.
	for e in 0..=failed_at {
		for m in &honest {
			let v = verdicts(&client, e, m, &bob).await;
			assert!(v.iter().all(|v| *v == Verdict::Pass), "epoch {e}: honest miner {m} got {v:?}");
		}
	}
	// The validator's weights for epoch 0 give the cheater nothing; epoch 0 paid every honest miner and
	// not the cheater.
	let weights = client.weights(0, &bob).await.unwrap().expect("Bob set weights for epoch 0");
	assert!(weights.iter().all(|(m, w)| m != &cheater || *w == 0), "{weights:?}");
	let paid: BTreeMap<AccountId, u128> = split.miners.0.iter().cloned().collect();
	assert!(!paid.contains_key(&cheater), "the cheater was paid: {paid:?}");
	for m in &honest {
		assert!(paid.get(m).is_some_and(|a| *a > 0), "honest miner {m} unpaid: {paid:?}");
	}

	// The evidence behind the Fail is in the bucket under the validator's key, hashing to what is on chain.
	let check = client
		.spot_checks(failed_at, &cheater)
		.await
		.unwrap()
		.into_iter()
		.find(|c| c.validator == bob)
		.expect("Bob's verdict on the cheater");
	let key = keys::evidence(
		&Id::new(RUN).unwrap(),
		&Id::new(bob.to_string()).unwrap(),
		u64::from(failed_at),
		&Id::new(cheater.to_string()).unwrap(),
	);
	let bytes = s3.store.get(&key, &ContentHash(check.evidence.0)).await.expect("evidence object with the on-chain hash");
	let bundle: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
	assert_eq!(bundle["verdict"], "Fail", "{bundle}");

	// Metrics count what happened.
	let text = scrape(&metrics_addr).await;
	assert!(text.contains("iota_validator_checks_total{outcome=\"fail\"}"), "{text}");
	assert!(text.contains("iota_validator_verdicts_submitted_total{verdict=\"fail\"} 1"), "{text}");
	assert!(text.contains("iota_validator_weights_submitted_total"), "{text}");
	let log = validator.log_text();
	assert!(log.contains("verdict submitted"), "the validator logged no verdict");
}
