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

use std::time::Duration;

use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::prepare_data;

const RUN: &str = "e2e-miner-restart";
const TIMEOUT: Duration = Duration::from_secs(1200);
/// How long a replica's logged step may precede its merge's manifest on chain (a commit takes a block or
/// two).
const COMMIT_WAIT: Duration = Duration::from_secs(120);
const MINERS: [&str; 3] = ["//Dave", "//Eve", "//Ferdie"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and three iota-miner processes (build them first; see the file's docs)"]
async fn miners_reconnect_after_the_orchestrator_is_killed_and_restarted() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	prepare_data(&s3.store, &shakespeare_options(RUN, ModelConfig::tiny(), "u8"))
		.await
		.unwrap();
	let by_stage = register_seated(&client, &MINERS).await;
	assert_eq!(by_stage.len(), 3, "one miner per stage: {by_stage:?}");

	let dir = work_dir();
	let mut orch = OrchestratorProcess::dev(&node, &s3, RUN, 12, 20_000, dir.path()).await;
	let mut miners: Vec<Daemon> = MINERS
		.iter()
		.enumerate()
		.map(|(i, n)| Daemon::miner(n, &node.rpc_url, &orch.url, dir.path(), i, &[]))
		.collect();

	// Mid-epoch 0: the head's quota is done (its stage entered the merge), the rest of the pipeline is not.
	let orch_log = dir.path().join("orchestrator.log");
	wait_for("the first phase change", TIMEOUT, || async {
		std::fs::read_to_string(&orch_log)
			.ok()
			.filter(|l| l.contains("advance_phase"))
			.map(|_| ())
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
	assert!(
		text.contains("reconnecting") || text.contains("retrying"),
		"the miners saw the orchestrator go away"
	);
	for (i, m) in miners.iter().enumerate() {
		let a = attested_state_hashes(&m.log_text());
		for ((stage, epoch), h) in &a {
			// A replica logs its step before the orchestrator's commit of that merge lands (the epochs
			// after the two waited for go on meanwhile), so wait for the manifest of each logged step.
			let manifest = wait_for(
				&format!("stage {stage} epoch {epoch} committed"),
				COMMIT_WAIT,
				|| async { client.merge_manifest(*epoch, *stage).await.ok()? },
			)
			.await;
			assert_eq!(
				manifest.state_hash.to_string(),
				*h,
				"miner {i} stage {stage} epoch {epoch}"
			);
		}
		assert!(a.len() >= 2, "miner {i} applied both merges: {a:?}");
	}
}
