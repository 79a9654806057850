//! A slow but honest middle-stage member (issue 21 item 3): its gradient is waited for and merged, even
//! once the epoch's pathway log is written. A whole network (`iota_devnet::Network`: dev node,
//! orchestrator with the embedded S3 server, 3 × 2 real `iota-miner` processes, no validators) trains
//! the `tiny` preset in sync mode with a 120-block phase timeout; every miner runs with the test-only
//! fault `slow-upload=20000@1`, so the two seated at stage 1 wait 20 s before uploading each epoch's
//! gradient while the other stages merge at once.
//!
//! Asserted: when epoch 0's pathway log is in the orchestrator's record (the head's merge is committed
//! and the samples' records have left its memory), stage 1 is still in epoch 0 and not merging: it waits
//! for the gradients of its members with accepted passes instead of counting them idle; stage 1's
//! manifest then merges every member that ran its backward passes and counts the whole quota.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build --workspace --bins --features iota-miner/fault-injection
//! cargo test -p iota-e2e --features iota-miner/fault-injection --test network_slow_member -- --ignored --nocapture
//! ```

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use iota_e2e::*;
use iota_primitives::Phase;

const QUOTA: u32 = 8;
const SLOW_STAGE: u16 = 1;
const TIMEOUT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes (see the file's docs)"]
async fn a_slow_middle_stage_members_gradient_is_waited_for_and_merged() {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_slow_member");
	let mut options = tiny_network("e2e-net-slow", &dir, 3, 2, 0, QUOTA);
	options.orchestrator_args = ["--phase-timeout", "120"].iter().map(|s| s.to_string()).collect();
	// Every miner gets the fault; only the two seated at stage 1 wait.
	options.miner_args = (0..6)
		.map(|i| (i, vec!["--fault".to_string(), format!("slow-upload=20000@{SLOW_STAGE}")]))
		.collect();
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;

	// Epoch 0's pathway log is written (the head merged) while stage 1's members still hold back.
	let then = net
		.wait("epoch 0's pathway log", TIMEOUT, &[], || async {
			watcher.epoch_record(0).await.ok()?.pathway_log?;
			watcher.status().await.ok()
		})
		.await;
	let s1 = &then.stages[usize::from(SLOW_STAGE)];
	eprintln!(
		"pathway log of epoch 0 written after {:?}; stage {SLOW_STAGE} then: epoch {}, {:?}, {} gradients in",
		started.elapsed(),
		s1.epoch,
		s1.phase,
		s1.gradients_submitted
	);
	assert!(
		s1.epoch == 0 && s1.phase != Phase::Merging,
		"stage {SLOW_STAGE} waits for its slow members' gradients: {s1:?}"
	);

	let m = net
		.wait("stage 1's manifest of epoch 0", TIMEOUT, &[], || async {
			chain.merge_manifest(0, SLOW_STAGE).await.ok()?
		})
		.await;
	let store = net.bucket().await;
	let log = pathway_log(&net, &watcher, &store, 0).await;
	let ran: BTreeSet<&iota_rpc::AccountId> =
		log.records.iter().map(|r| &r.backward[usize::from(SLOW_STAGE)]).collect();
	eprintln!(
		"stage {SLOW_STAGE} merged {} members, {} samples, after {:?}",
		m.members,
		m.samples,
		started.elapsed()
	);
	assert_eq!(m.samples, QUOTA, "every accepted pass of the slow stage is merged");
	assert_eq!(m.members, ran.len() as u32, "every member that ran a backward pass is merged");
	let logs = net.miner_logs();
	assert_eq!(
		logs.iter().filter(|l| l.contains("fault: gradient upload delayed")).count(),
		2,
		"both stage-{SLOW_STAGE} miners, and only they, held their uploads back"
	);
}
