//! Honest miners are never failed, and the validator rides out an orchestrator crash: a dev node, the
//! embedded S3 server, the orchestrator, 3 stages × 2 honest `iota-miner` processes training `tiny` on
//! Shakespeare, and one `iota-validator` (Bob). When epoch 0 completes on chain the orchestrator is
//! killed with SIGKILL and restarted 10 s later on the same database.
//!
//! Asserted over epochs 0..=3 (epoch 1's stage weights come from the checkpoints the chain's epoch-0
//! manifests name): every verdict the validator put on chain is `Pass`, each epoch has verdicts, every
//! miner is judged at least once (a miner is spot-checked in an epoch only when it served a sample of
//! it; while one reconnects after the crash its stage peer may take the whole quota), it set weights for
//! every epoch and each judged miner has a positive weight, nobody was slashed, and its metrics count no
//! failed check.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-validator -p iota-miner
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test validator_honest_outage -- --ignored --nocapture
//! ```
//! (`$IOTA_MINER_BIN`, `$IOTA_VALIDATOR_BIN` override the binaries' paths.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use iota_chain::{AccountId, IotaClient, Signer, Verdict};
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::{prepare_data, PrepareOptions};
use iota_rpc::LrSchedule;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RUN: &str = "e2e-validator-honest";
const TIMEOUT: Duration = Duration::from_secs(900);
/// Epochs 0..=LAST_EPOCH are checked (two after the crash's epoch 1, so a miner that served no sample in
/// one epoch is still judged in another).
const LAST_EPOCH: u32 = 3;
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
async fn honest_miners_pass_every_check_across_an_orchestrator_crash() {
	let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/shakespeare");
	assert!(corpus.is_dir(), "{} missing: run scripts/fetch-data.sh", corpus.display());
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;

	let mut opts = PrepareOptions::new(RUN, &corpus, ModelConfig::tiny());
	opts.seq_len = 32;
	opts.batch_rows = 4;
	opts.rows_per_shard = 64;
	opts.encoding = "u8".into();
	opts.lr = LrSchedule { peak: 1e-2, warmup_epochs: 0, total_epochs: 100, min_ratio: 0.1 };
	prepare_data(&s3.store, &opts).await.unwrap();

	let miners: Vec<AccountId> = MINERS.iter().map(|n| Signer::from_uri(n).unwrap().account_id()).collect();
	for name in MINERS {
		client.register_miner(&Signer::from_uri(name).unwrap()).await.unwrap();
	}
	let bob = Signer::dev("bob").unwrap().account_id();

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

	// Crash the orchestrator as epoch 0 completes; restart it on the same database.
	wait_for("epoch 0 complete", TIMEOUT, || async { client.epoch_completed_at(0).await.ok()? }).await;
	orch.kill9();
	tokio::time::sleep(Duration::from_secs(10)).await;
	orch.restart();
	orch.wait_ready().await;

	// The validator has processed epochs 0..=LAST_EPOCH (its gauge moves after the verdicts are in).
	wait_for(&format!("the validator to process epoch {LAST_EPOCH}"), TIMEOUT, || async {
		let text = scrape(&metrics_addr).await;
		let last = text.lines().find_map(|l| l.strip_prefix("iota_validator_last_epoch ")?.trim().parse::<i64>().ok())?;
		(last >= i64::from(LAST_EPOCH)).then_some(())
	})
	.await;
	let mut judged: BTreeMap<AccountId, usize> = BTreeMap::new();
	for epoch in 0..=LAST_EPOCH {
		let w = client.weights(epoch, &bob).await.unwrap().unwrap_or_else(|| panic!("no weights from the validator for epoch {epoch}"));
		let w: BTreeMap<AccountId, u16> = w.into_iter().collect();
		let mut in_epoch = 0;
		for m in &miners {
			let v = verdicts(&client, epoch, m, &bob).await;
			assert!(v.iter().all(|x| *x == Verdict::Pass), "epoch {epoch}: honest miner {m} got {v:?}");
			if !v.is_empty() {
				in_epoch += 1;
				*judged.entry(m.clone()).or_default() += 1;
				assert!(w.get(m).is_some_and(|x| *x > 0), "epoch {epoch}: judged miner {m} weighted {:?}", w.get(m));
			}
		}
		assert!(in_epoch > 0, "epoch {epoch}: no miner judged");
	}
	for m in &miners {
		assert!(judged.contains_key(m), "honest miner {m} never judged in epochs 0..={LAST_EPOCH}: {judged:?}");
	}
	for m in &miners {
		assert!(client.miner(m).await.unwrap().is_some(), "honest miner {m} lost its seat");
	}
	let text = scrape(&metrics_addr).await;
	assert!(!text.contains("iota_validator_checks_total{outcome=\"fail\"}"), "{text}");
	assert!(text.contains("iota_validator_checks_total{outcome=\"pass\"}"), "{text}");
	eprintln!("{}", text.lines().filter(|l| l.starts_with("iota_validator_")).collect::<Vec<_>>().join("\n"));
	assert!(validator.log_text().contains("epoch processed"));
}
