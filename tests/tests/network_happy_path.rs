//! The happy path of a whole network (`iota_devnet::Network`: dev node, orchestrator with the embedded
//! S3 server, real `iota-miner` and `iota-validator` processes): the `tiny` preset re-cut into 3 stages,
//! 3 × 2 miners, 2 validators (Bob and Charlie, the genesis validators), 8 micro-batches per epoch, two
//! epochs on the Shakespeare corpus.
//!
//! Asserted from chain state and the bucket's contents:
//! - the mean tail loss the orchestrator recorded for epoch 1 is below epoch 0's (`Status.epochs`);
//! - every stage's merge manifest is on chain for both epochs, averaging exactly the miners that ran the
//!   stage's backward passes (per the pathway log) and all 8 passes, with every butterfly shard in the
//!   bucket under its committed hash; the checkpoint it names loads into a fresh stage only if its state
//!   hashes to the attested hash (so it does);
//! - both replicas of each stage applied exactly the committed state (each miner's log line of the step,
//!   compared with the chain);
//! - the pathway log in the bucket hashes to what the orchestrator reports (`iota_epochRecord`), holds the
//!   epoch's 8 samples each routed through members of every stage, and its mean loss is the recorded one;
//! - each finalized epoch's emission split (epoch 0 at least, finalized by the validators after the
//!   scoring window) sums to the pool: miners + validators + unallocated = `RunConfig::emission_per_epoch`,
//!   and every miner that did work in the epoch was paid.
//!
//! ```sh
//! ./scripts/fetch-data.sh                                                  # data/shakespeare
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test network_happy_path -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/network_happy_path/logs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use iota_e2e::*;

const RUN: &str = "e2e-net-happy";
const QUOTA: u32 = 8;
/// Generous bound for two epochs and epoch 0's scoring window on 2 shared cores (~3 minutes unloaded).
const TIMEOUT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner and two iota-validator processes (see the file's docs)"]
async fn two_epochs_lower_the_loss_replicas_agree_and_emissions_sum_to_the_pool() {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_happy_path");
	let mut net = TestNetwork::start(tiny_network(RUN, &dir, 3, 2, 2, QUOTA)).await;
	let chain = net.chain().await.unwrap();
	let spec = net.prepared.spec.clone();
	assert_eq!(spec.model.stages.len(), 3);

	// Two epochs committed at every stage, then epoch 0 finalized (the validators call it after the
	// scoring window).
	net.wait("two committed epochs at every stage", TIMEOUT, &[], || async {
		for s in 0..3u16 {
			if chain.stage(s).await.ok()?.epoch < 2 {
				return None;
			}
		}
		Some(())
	})
	.await;
	net.wait("epoch 0 finalized", TIMEOUT, &[], || async { chain.emission_split(0).await.ok()? })
		.await;
	let status = net.status().await.unwrap();
	eprintln!("two epochs and epoch 0's payout after {:?}", started.elapsed());

	// The loss goes down.
	let loss: BTreeMap<u32, f32> = status.epochs.iter().map(|e| (e.epoch, e.loss)).collect();
	eprintln!("mean tail loss per epoch: {loss:?}");
	assert!(loss[&1] < loss[&0], "loss did not go down: {loss:?}");

	// Per epoch: the pathway log (in the bucket under the hash the orchestrator reports, every sample
	// once, each routed through the stage's members, the mean loss the orchestrator recorded); per stage,
	// the manifest merged exactly the miners that ran its backward passes (a miner that got no sample has
	// nothing to submit) and all of the epoch's backward passes; both replicas applied the committed state.
	let store = net.bucket().await;
	let logs: Vec<BTreeMap<(u16, u32), String>> =
		net.miner_logs().iter().map(|l| attested_state_hashes(l)).collect();
	let members: Vec<Vec<iota_rpc::AccountId>> =
		status.stages.iter().map(|s| s.miners.clone()).collect();
	let (_, validators) = net.accounts();
	let validator = net.client_as(validators[0]).await;
	let mut workers: BTreeMap<u32, BTreeSet<iota_rpc::AccountId>> = BTreeMap::new();
	for epoch in 0..2u32 {
		let log = pathway_log(&net, &validator, &store, epoch).await;
		let samples: Vec<u64> = log.records.iter().map(|r| r.sample).collect();
		let want: Vec<u64> = (0..u64::from(QUOTA)).map(|i| u64::from(epoch * QUOTA) + i).collect();
		assert_eq!(samples, want, "epoch {epoch}: every sample once");
		for r in &log.records {
			for (s, m) in r.forward.iter().enumerate().chain(r.backward.iter().enumerate()) {
				assert!(
					members[s].contains(m),
					"sample {}: {m} is not a member of stage {s}",
					r.sample
				);
				workers.entry(epoch).or_default().insert(m.clone());
			}
		}
		let mean =
			log.records.iter().map(|r| f64::from(r.loss)).sum::<f64>() / log.records.len() as f64;
		assert!(
			(mean - f64::from(loss[&epoch])).abs() < 1e-4,
			"epoch {epoch}: log mean {mean} vs recorded {}",
			loss[&epoch]
		);
		assert_eq!(status.epochs.iter().find(|e| e.epoch == epoch).unwrap().samples, QUOTA);

		for stage in 0..3u16 {
			assert_eq!(members[usize::from(stage)].len(), 2, "stage {stage} members");
			let ran: BTreeSet<&iota_rpc::AccountId> =
				log.records.iter().map(|r| &r.backward[usize::from(stage)]).collect();
			let m = chain
				.merge_manifest(epoch, stage)
				.await
				.unwrap()
				.unwrap_or_else(|| panic!("stage {stage} epoch {epoch}: no manifest"));
			let state = check_manifest(&store, &spec, stage, epoch, &m, ran.len() as u32).await;
			assert_eq!(m.samples, QUOTA, "stage {stage} epoch {epoch}: every backward pass merged");
			let replicas: Vec<&String> =
				logs.iter().filter_map(|l| l.get(&(stage, epoch))).collect();
			assert_eq!(replicas.len(), 2, "stage {stage} epoch {epoch}: both replicas stepped");
			for r in replicas {
				assert_eq!(
					*r,
					state.to_string(),
					"stage {stage} epoch {epoch}: a replica applied another state"
				);
			}
		}
	}

	// Every finalized epoch paid out exactly its pool, every miner included.
	let cfg = chain.run_config().await.unwrap().unwrap();
	let finalized = chain.next_epoch_to_finalize().await.unwrap();
	assert!(finalized >= 1, "epoch 0 is finalized");
	for epoch in 0..finalized {
		let split = chain
			.emission_split(epoch)
			.await
			.unwrap()
			.unwrap_or_else(|| panic!("epoch {epoch}: no emission split"));
		let miners: u128 = split.miners.0.iter().map(|(_, a)| *a).sum();
		let validators: u128 = split.validators.0.iter().map(|(_, a)| *a).sum();
		eprintln!(
			"epoch {epoch}: miners {miners}, validators {validators}, unallocated {}",
			split.unallocated
		);
		assert_eq!(
			miners + validators + split.unallocated,
			cfg.emission_per_epoch,
			"epoch {epoch}: the split sums to the pool"
		);
		let paid: BTreeSet<&iota_rpc::AccountId> =
			split.miners.0.iter().filter(|(_, a)| *a > 0).map(|(m, _)| m).collect();
		for m in workers.get(&epoch).into_iter().flatten() {
			assert!(
				paid.contains(m),
				"epoch {epoch}: miner {m} did work and is unpaid: {:?}",
				split.miners.0
			);
		}
		assert!(validators > 0, "epoch {epoch}: the validators earned their share");
	}
	net.assert_alive(&[]);
	eprintln!("done after {:?}", started.elapsed());
}
