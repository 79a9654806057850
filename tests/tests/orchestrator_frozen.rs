//! Deadlines on chain: the orchestrator freezes mid-merge and the chain moves on without it. A whole
//! network (`iota_devnet::Network`: dev node, orchestrator with the embedded S3 server, 3 × 2 real
//! `iota-miner` processes, no validators) trains `tiny` with a 30-block phase timeout. The first time a
//! stage is seen merging, the orchestrator is frozen (SIGSTOP); if the stage is still merging on chain it
//! stays frozen past the deadline (else it is let go, SIGCONT, and watched again).
//!
//! Asserted: with the orchestrator frozen, the chain's own `on_initialize` restarts that stage's merge
//! round (WeightsUploading, round + 1, a `PhaseAdvanced` that timed out); after SIGCONT the stage merges
//! that epoch with the whole quota of samples (nothing accepted was lost), the epoch
//! completes at every stage, and the next epoch completes too.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test orchestrator_frozen -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/orchestrator_frozen/logs`.

use std::path::Path;
use std::time::{Duration, Instant};

use iota_e2e::*;
use iota_primitives::Phase;

const RUN: &str = "e2e-orch-frozen";
const QUOTA: u32 = 8;
const PHASE_TIMEOUT: u32 = 30;
const TIMEOUT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and freezes the orchestrator (see the file's docs)"]
async fn a_frozen_orchestrator_never_stalls_the_chain() {
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "orchestrator_frozen");
	let mut options = tiny_network(RUN, &dir, 3, 2, 0, QUOTA);
	options.orchestrator_args = ["--phase-timeout", &PHASE_TIMEOUT.to_string()]
		.iter()
		.map(|s| s.to_string())
		.collect();
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	let pid = net.orchestrator.pid();

	// Freeze the orchestrator while a stage merges (as the chain's best block says, after the freeze).
	let deadline = Instant::now() + TIMEOUT;
	let (stage, epoch, round) = loop {
		assert!(Instant::now() < deadline, "never froze the orchestrator mid-merge");
		net.assert_alive(&[]);
		let Ok(s) = watcher.status().await else { continue };
		let Some(st) = s.stages.iter().find(|st| st.phase == Phase::Merging) else {
			tokio::time::sleep(Duration::from_millis(50)).await;
			continue;
		};
		let stage = st.stage;
		signal(pid, "-STOP");
		// An extrinsic it sent just before freezing lands within a block or two.
		tokio::time::sleep(Duration::from_secs(3)).await;
		let best = chain.at_block(chain.best_hash().await.unwrap());
		let on_chain = best.stage(stage).await.unwrap();
		if on_chain.phase == Phase::Merging {
			break (stage, on_chain.epoch, on_chain.round);
		}
		signal(pid, "-CONT");
	};
	eprintln!("froze the orchestrator with stage {stage} merging epoch {epoch} round {round}");

	// The chain restarts the overrun round by itself (the orchestrator is frozen: nobody else can).
	let restarted = Instant::now();
	let new_round = loop {
		assert!(
			restarted.elapsed() < Duration::from_secs(u64::from(PHASE_TIMEOUT) * 4),
			"the chain did not restart the merge of stage {stage} past its deadline"
		);
		let best = chain.at_block(chain.best_hash().await.unwrap());
		let st = best.stage(stage).await.unwrap();
		if st.epoch == epoch && st.round > round {
			assert_eq!(st.phase, Phase::WeightsUploading, "a timed-out merge goes back to uploads");
			break st.round;
		}
		assert_eq!((st.epoch, st.phase), (epoch, Phase::Merging), "nothing else moves it");
		tokio::time::sleep(Duration::from_millis(500)).await;
	};
	assert_eq!(process_state(pid), 'T', "the orchestrator stayed frozen through the restart");
	eprintln!("the chain started round {new_round} after {:?}", restarted.elapsed());
	signal(pid, "-CONT");

	// The run goes on: that epoch merges at the stage with the whole quota, the epoch
	// completes everywhere, and so does the next one.
	let m = net
		.wait("the stage's merge committed after the thaw", TIMEOUT, &[], || async {
			chain.merge_manifest(epoch, stage).await.ok()?
		})
		.await;
	// Every accepted sample is in the merge (a miner the pathways gave no sample is no member: the stage
	// has 1 or 2 members, however the epoch's samples fell).
	assert_eq!(m.samples, QUOTA, "nothing accepted was lost");
	assert!((1..=2).contains(&m.members), "members {}", m.members);
	net.wait("the epoch completed at every stage", TIMEOUT, &[], || async {
		chain.epoch_completed_at(epoch).await.ok()?
	})
	.await;
	net.wait("the next epoch completed", TIMEOUT, &[], || async {
		chain.epoch_completed_at(epoch + 1).await.ok()?
	})
	.await;
	net.assert_alive(&[]);
}
