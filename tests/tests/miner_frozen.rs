//! A miner frozen past its stage's phase deadline: refused with a typed error when it comes back,
//! still registered and seated, and its next epochs' work counts. A whole network
//! (`iota_devnet::Network`: dev node, orchestrator with the embedded S3 server, 3 × 2 real `iota-miner`
//! processes, no validators) trains `tiny` with 2-minute leases and a 20-block phase timeout.
//!
//! The first time a stage-1 miner that has done work in the epoch is seen holding a lease while its
//! stage trains, it is frozen (SIGSTOP); if it still holds the lease two seconds later it stays frozen
//! (else it is let go and watched again). Its lease outlives the phase deadline, so the stage cannot reach
//! its quota: the chain's deadline moves it on, the upload phase times out waiting for the frozen member,
//! and the stage merges that epoch with the other miner alone. Then it is let go (SIGCONT).
//!
//! Asserted: stage 1's manifest of that epoch has one member and the frozen miner's samples are not in
//! it; after SIGCONT the miner's late results are refused with the orchestrator's typed codes
//! (`lease_expired`, `wrong_phase` or `unknown` in `iota_status`, never `invalid`), the process stays up,
//! the chain still lists it as an active miner holding a seat of stage 1, and a later epoch of stage 1
//! merges with both members, the formerly frozen one among the miners whose passes the pathway log lists.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test miner_frozen -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/miner_frozen/logs`.

use std::path::Path;
use std::time::{Duration, Instant};

use iota_e2e::*;

const RUN: &str = "e2e-miner-frozen";
const QUOTA: u32 = 8;
const STAGE: u16 = 1;
const PHASE_TIMEOUT: u32 = 20;
const TIMEOUT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and freezes one (see the file's docs)"]
async fn a_miner_frozen_past_the_deadline_is_refused_stays_seated_and_counts_again() {
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "miner_frozen");
	let mut options = tiny_network(RUN, &dir, 3, 2, 0, QUOTA);
	options.orchestrator_args =
		["--lease-ms", "120000", "--phase-timeout", &PHASE_TIMEOUT.to_string()]
			.iter()
			.map(|s| s.to_string())
			.collect();
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let store = net.bucket().await;
	let watcher = net.client_as("//Bob").await; // a genesis validator: may read epoch records

	// Freeze one of stage 1's miners mid-epoch, holding a lease, after it did work in the epoch.
	let frozen = net.freeze_busy_miner(&watcher, STAGE, TIMEOUT).await;
	let (victim, other, pid, epoch) = (frozen.account, frozen.other, frozen.pid, frozen.epoch);
	let frozen_at = Instant::now();
	let refused_before = refused(&watcher.status().await.unwrap(), &victim);
	eprintln!("froze {victim} in epoch {epoch} holding a lease");

	// The chain's deadlines move the stage on without it; the stage merges with the other miner alone.
	let m = net
		.wait("stage 1 merged the epoch without the frozen miner", TIMEOUT, &[], || async {
			chain.merge_manifest(epoch, STAGE).await.ok()?
		})
		.await;
	assert_eq!(process_state(pid), 'T', "the miner stayed frozen through the merge");
	assert_eq!(m.members, 1, "the frozen member submitted nothing");
	let log = pathway_log(&net, &watcher, &store, epoch).await;
	let by_other = log.records.iter().filter(|r| r.backward[usize::from(STAGE)] == other).count();
	assert_eq!(m.samples as usize, by_other, "the merge holds the other miner's passes only");
	assert!(m.samples < QUOTA, "the frozen lease kept the stage from its quota");
	eprintln!(
		"stage 1 merged epoch {epoch} with {} samples after {:?}; thawing",
		m.samples,
		frozen_at.elapsed()
	);
	signal(pid, "-CONT");

	// Its late results are refused with typed codes, and it stays up.
	let refusals = net
		.wait("the thawed miner's late result refused", TIMEOUT, &[], || async {
			let now = refused(&watcher.status().await.ok()?, &victim);
			(now.values().sum::<u64>() > refused_before.values().sum::<u64>()).then_some(now)
		})
		.await;
	eprintln!("refused before the freeze {refused_before:?}, after the thaw {refusals:?}");
	// What a late result meets: its lease voided by the epoch's end, its phase gone, its item unknown,
	// or (a request signed before the freeze) its timestamp out of the window. Nothing else: a thawed
	// miner rejoining as a replica without samples asks for nothing it would be refused.
	let only_late_codes = |now: &std::collections::BTreeMap<String, u64>| {
		for (code, n) in now {
			if refused_before.get(code) == Some(n) {
				continue;
			}
			assert!(
				["lease_expired", "wrong_phase", "unknown", "stale_timestamp"]
					.contains(&code.as_str()),
				"a late result gets a typed refusal, not {code} (refusals {now:?})"
			);
		}
	};
	only_late_codes(&refusals);
	let seated = |members: Vec<iota_chain::AccountId>| members.iter().any(|a| a.0 == victim.0);
	// Still registered and seated.
	let info = chain
		.miners()
		.await
		.unwrap()
		.into_iter()
		.find(|(a, _)| a.0 == victim.0)
		.map(|(_, i)| i)
		.expect("still registered");
	assert!(matches!(info.status, iota_chain::MinerStatus::Active), "{:?}", info.status);
	assert_eq!(info.stage, STAGE);
	assert!(seated(chain.stage_members(STAGE).await.unwrap()), "still holds its seat");

	// A later epoch of stage 1 merges both members, its passes among them.
	// Epochs of `tiny` take a few seconds once the chain is off the critical path; the thawed miner
	// rejoins within a few of them (it resynchronises from the best block's manifest).
	let later = net.first_merge_with(&chain, STAGE, 2, epoch, 40, TIMEOUT).await;
	let log = pathway_log(&net, &watcher, &store, later).await;
	let by_victim = log.records.iter().filter(|r| r.backward[usize::from(STAGE)] == victim).count();
	assert!(by_victim > 0, "its passes of epoch {later} count");
	eprintln!("epoch {later}: stage 1 merged both members; {by_victim} of its passes");
	let refusals = refused(&watcher.status().await.unwrap(), &victim);
	eprintln!("refused by epoch {later}: {refusals:?}");
	only_late_codes(&refusals);
	assert!(seated(chain.stage_members(STAGE).await.unwrap()));
	net.assert_alive(&[]);
}

/// `who`'s refusals by code in `status` (empty if the orchestrator has not seen it).
fn refused(
	status: &iota_rpc::types::Status,
	who: &iota_rpc::AccountId,
) -> std::collections::BTreeMap<String, u64> {
	status
		.miners
		.iter()
		.find(|m| &m.account == who)
		.map(|m| m.refusals.clone())
		.unwrap_or_default()
}
