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

use std::collections::BTreeMap;
use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::prepare_data;
use iota_rpc::SignedClient;

const RUN: &str = "e2e-miners";
/// Every epoch of the whole pipeline on 2 shared cores: generous.
const EPOCHS_TIMEOUT: Duration = Duration::from_secs(1200);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes (build them first; see the file's docs)"]
async fn three_stages_of_two_miners_train_two_epochs_on_shakespeare() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;

	// The real corpus, tokenized into hashed shards, and the spec that names them.
	let prepared = prepare_data(&s3.store, &shakespeare_options(RUN, ModelConfig::tiny(), "bf16"))
		.await
		.unwrap();
	assert!(prepared.spec.data.shards.len() > 1);

	// Six miners registered up front: the pallet seats them two per stage.
	let by_stage = register_seated(&client, &SIX_MINERS).await;
	assert_eq!(by_stage.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{by_stage:?}");

	let dir = work_dir();
	let orch = OrchestratorProcess::dev(&node, &s3, RUN, 8, 30_000, dir.path()).await;
	let mut miners: Vec<Daemon> = SIX_MINERS
		.iter()
		.enumerate()
		.map(|(i, n)| Daemon::miner(n, &node.rpc_url, &orch.url, dir.path(), i, &[]))
		.collect();

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
	let logs: Vec<BTreeMap<(u16, u32), String>> =
		miners.iter().map(|m| attested_state_hashes(&m.log_text())).collect();
	for stage in 0..3u16 {
		for epoch in 0..2u32 {
			let m = client.merge_manifest(epoch, stage).await.unwrap().expect("manifest committed");
			assert_eq!(m.members, 2, "stage {stage} epoch {epoch}: both replicas merged");
			let committed = m.state_hash.to_string();
			let replicas: Vec<&String> =
				logs.iter().filter_map(|l| l.get(&(stage, epoch))).collect();
			assert_eq!(replicas.len(), 2, "stage {stage} epoch {epoch}: two replicas stepped");
			assert!(
				replicas.iter().all(|h| **h == committed),
				"stage {stage} epoch {epoch}: {replicas:?} vs committed {committed}"
			);
		}
	}

	// The loss goes down.
	let watcher = SignedClient::connect(
		&orch.url,
		Signer::dev("bob").unwrap().keypair().clone(),
		Duration::from_secs(30),
	)
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
