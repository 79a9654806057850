//! Real `iota-miner` processes train the `tiny` model on the Shakespeare corpus: a dev node, the
//! embedded S3 server and the orchestrator, 3 stages × 2 miners. Two epochs complete (forward, loss,
//! backward, gradient upload, butterfly merge, AdamW step, attestation, `commit_merge`); both replicas of
//! every stage attest the same state hash each epoch (the committed one); the mean tail loss of epoch 1
//! is below epoch 0's; a miner stopped with SIGTERM exits cleanly.
//!
//! ```sh
//! ./scripts/fetch-data.sh                                   # data/shakespeare
//! cargo build -p iota-orchestrator -p iota-miner            # the node binary must exist too
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test miner_training -- --ignored --nocapture
//! ```

mod miner_common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::{prepare_data, PrepareOptions};
use iota_primitives::ContentHash;
use iota_rpc::{LrSchedule, SignedClient};
use miner_common::{attested, MinerProcess};

const RUN: &str = "e2e-miners";
/// Every epoch of the whole pipeline on 2 shared cores: generous.
const EPOCHS_TIMEOUT: Duration = Duration::from_secs(1200);
const MINERS: [&str; 6] = ["//Dave", "//Eve", "//Ferdie", "//Dave//stash", "//Eve//stash", "//Ferdie//stash"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes (build them first; see the file's docs)"]
async fn three_stages_of_two_miners_train_two_epochs_on_shakespeare() {
	let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/shakespeare");
	assert!(corpus.is_dir(), "{} missing: run scripts/fetch-data.sh", corpus.display());
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;

	// The real corpus, tokenized into hashed shards, and the spec that names them.
	let mut opts = PrepareOptions::new(RUN, &corpus, ModelConfig::tiny());
	opts.seq_len = 32;
	opts.batch_rows = 4;
	opts.rows_per_shard = 64;
	opts.encoding = "bf16".into();
	opts.lr = LrSchedule { peak: 1e-2, warmup_epochs: 0, total_epochs: 100, min_ratio: 0.1 };
	let prepared = prepare_data(&s3.store, &opts).await.unwrap();
	assert!(prepared.spec.data.shards.len() > 1);

	// Six miners registered up front: the pallet seats them two per stage.
	let mut by_stage: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
	for name in MINERS {
		let s = Signer::from_uri(name).unwrap();
		client.register_miner(&s).await.unwrap();
		let stage = client.miner(&s.account_id()).await.unwrap().unwrap().stage;
		by_stage.entry(stage).or_default().push(name);
	}
	assert_eq!(by_stage.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{by_stage:?}");

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

	let mut miners: Vec<MinerProcess> =
		MINERS.iter().enumerate().map(|(i, n)| MinerProcess::start(n, &node.rpc_url, &orch.url, dir.path(), i)).collect();

	// Two epochs committed at every stage.
	wait_for("two committed epochs at every stage", EPOCHS_TIMEOUT, || async {
		for s in 0..3u16 {
			if client.stage(s).await.ok()?.epoch < 2 {
				return None;
			}
		}
		Some(())
	})
	.await;

	// Every merge averaged both replicas, and both attested the committed state hash.
	let logs: Vec<BTreeMap<(u16, u32), String>> = miners.iter().map(|m| attested(&m.log_text())).collect();
	for stage in 0..3u16 {
		for epoch in 0..2u32 {
			let m = client.merge_manifest(epoch, stage).await.unwrap().expect("manifest committed");
			assert_eq!(m.members, 2, "stage {stage} epoch {epoch}: both replicas merged");
			let committed = ContentHash(m.state_hash.0).to_string();
			let replicas: Vec<&String> = logs.iter().filter_map(|l| l.get(&(stage, epoch))).collect();
			assert_eq!(replicas.len(), 2, "stage {stage} epoch {epoch}: two replicas stepped");
			assert!(replicas.iter().all(|h| **h == committed), "stage {stage} epoch {epoch}: {replicas:?} vs committed {committed}");
		}
	}

	// The loss goes down.
	let watcher = SignedClient::connect(&orch.url, Signer::dev("bob").unwrap().keypair().clone(), Duration::from_secs(30))
		.await
		.unwrap();
	let status = watcher.status().await.unwrap();
	let loss: BTreeMap<u32, f32> = status.epochs.iter().map(|e| (e.epoch, e.loss)).collect();
	eprintln!("mean tail loss per epoch: {loss:?}");
	assert!(loss[&1] < loss[&0], "loss did not go down: {loss:?}");

	// SIGTERM: a clean exit.
	let status = miners[0].terminate();
	assert!(status.success(), "{status}");
	assert!(miners[0].log_text().contains("stopped"));
}
