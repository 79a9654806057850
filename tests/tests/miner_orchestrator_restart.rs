//! Real `iota-miner` processes survive the orchestrator being killed (`kill -9`) and restarted on the
//! same database mid-epoch: they reconnect by themselves (no miner restarts) and the run completes two
//! epochs at every stage, each replica attesting the committed state hash. One miner per stage of the
//! `tiny` model on the Shakespeare corpus.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner            # the node binary must exist too
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test miner_orchestrator_restart -- --ignored --nocapture
//! ```

mod miner_common;

use std::path::PathBuf;
use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::{prepare_data, PrepareOptions};
use iota_primitives::ContentHash;
use miner_common::{attested, MinerProcess};

const RUN: &str = "e2e-miner-restart";
const TIMEOUT: Duration = Duration::from_secs(1200);
const MINERS: [&str; 3] = ["//Dave", "//Eve", "//Ferdie"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and three iota-miner processes (build them first; see the file's docs)"]
async fn miners_reconnect_after_the_orchestrator_is_killed_and_restarted() {
	let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/shakespeare");
	assert!(corpus.is_dir(), "{} missing: run scripts/fetch-data.sh", corpus.display());
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	let mut opts = PrepareOptions::new(RUN, &corpus, ModelConfig::tiny());
	opts.seq_len = 32;
	opts.batch_rows = 4;
	opts.rows_per_shard = 64;
	prepare_data(&s3.store, &opts).await.unwrap();
	for name in MINERS {
		client.register_miner(&Signer::from_uri(name).unwrap()).await.unwrap();
	}

	let dir = work_dir();
	let args: Vec<String> = [
		"--chain-rpc", &node.rpc_url, "--suri", "//Alice", "--sudo-suri", "//Alice", "--backward-quota", "12", "--run", RUN,
		"--lease-ms", "20000", "--s3-endpoint", &s3.server.endpoint(),
	]
	.iter()
	.map(|s| s.to_string())
	.chain(["--db".to_string(), dir.path().join("o.db").display().to_string()])
	.collect();
	let mut orch = OrchestratorProcess::start(&args, dir.path().join("orchestrator.log"));
	orch.wait_ready().await;
	let mut miners: Vec<MinerProcess> =
		MINERS.iter().enumerate().map(|(i, n)| MinerProcess::start(n, &node.rpc_url, &orch.url, dir.path(), i)).collect();

	// Mid-epoch 0: the head's quota is done (its stage entered the merge), the rest of the pipeline is not.
	let orch_log = dir.path().join("orchestrator.log");
	wait_for("the first phase change", TIMEOUT, || async {
		std::fs::read_to_string(&orch_log).ok().filter(|l| l.contains("advance_phase")).map(|_| ())
	})
	.await;
	orch.kill9();
	tokio::time::sleep(Duration::from_secs(3)).await;
	orch.restart();
	orch.wait_ready().await;

	wait_for("two committed epochs at every stage", TIMEOUT, || async {
		for s in 0..3u16 {
			if client.stage(s).await.ok()?.epoch < 2 {
				return None;
			}
		}
		Some(())
	})
	.await;

	for m in miners.iter_mut() {
		assert!(m.is_running(), "{} exited", m.name);
	}
	let text: String = miners.iter().map(|m| m.log_text()).collect();
	assert!(text.contains("reconnecting") || text.contains("retrying"), "the miners saw the orchestrator go away");
	for (i, m) in miners.iter().enumerate() {
		let a = attested(&m.log_text());
		for ((stage, epoch), h) in &a {
			let manifest = client.merge_manifest(*epoch, *stage).await.unwrap().expect("committed");
			assert_eq!(ContentHash(manifest.state_hash.0).to_string(), *h, "miner {i} stage {stage} epoch {epoch}");
		}
		assert!(a.len() >= 2, "miner {i} applied both merges: {a:?}");
	}
}
