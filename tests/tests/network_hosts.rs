//! Miners and validators on hosts of their own (issue 18): the whole network (`iota_devnet::Network`: dev
//! node, orchestrator with the embedded S3 server, 3 × 2 real `iota-miner` processes and two
//! `iota-validator` processes training the `tiny` preset in sync mode, 10-second leases, a 60-block
//! phase timeout), each miner and validator in a network namespace of its own (`iota_devnet::hosts`)
//! with a 20 Mbit/s link each way to the cloud (node, orchestrator, S3 on the bridge's address).
//!
//! Link down: once a stage-1 miner holds a lease with two accepted backward passes of the epoch, its
//! host's link goes down (the process runs on; nothing reaches it or leaves it) until the orchestrator
//! finds it silent, its lease run out, and then comes up again. Asserted: every lease it held expired
//! and was re-listed; stage 1 merged the epoch without waiting for its phase timeout, from the other
//! member alone, its passes recomputed by that member (the manifest counts the whole quota) or, found
//! once uploads were open, counted lost; nothing of it meets an untyped refusal once back; it holds the
//! committed state (the epoch's, or a later one's after resynchronising), and it rejoins: its stage
//! merges both members again in a later epoch (how many later is printed).
//!
//! Validator host killed: then the first validator's process is killed (SIGKILL) and its link taken
//! down. Asserted: an epoch that starts after that is finalized on chain (its scores are set) with the
//! other validator's weights.
//!
//! Chain node killed (the second test): see its docs.
//!
//! Link rates and modes: the first scenario trains in sync mode at 20 Mbit/s, the second in local mode at
//! 100 Mbit/s; two short tests train the other two pairs (`train_on_links`).
//!
//! Printed (every test): each epoch's tokens per second and merge seconds, and the bytes through each
//! host's link in all and per epoch.
//!
//! Needs root (network namespaces).
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build --workspace --bins --features iota-miner/fault-injection
//! cargo test -p iota-e2e --features iota-miner/fault-injection --test network_hosts -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/network_hosts/logs`.

use std::path::Path;
use std::time::{Duration, Instant};

use iota_chain::Signer;
use iota_devnet::HostLinks;
use iota_e2e::*;

const QUOTA: u32 = 8;
const VICTIM_STAGE: u16 = 1;
const LINK_MBIT: u32 = 20;
const TIMEOUT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root: starts iota-node, iota-orchestrator, six iota-miner and two iota-validator processes on test hosts (see the file's docs)"]
async fn a_host_cut_off_past_its_leases_rejoins_and_a_dead_validators_peer_keeps_scoring() {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_hosts");
	let mut options = tiny_network("e2e-net-hosts", &dir, 3, 2, 2, QUOTA);
	options.orchestrator_args = ["--lease-ms", "10000", "--phase-timeout", "60"]
		.iter()
		.map(|s| s.to_string())
		.collect();
	options.hosts = Some(HostLinks { mbit: Some(LINK_MBIT) });
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	let spec = net.prepared.spec.clone();
	{
		let hosts = net.hosts.as_ref().unwrap();
		for h in hosts.hosts() {
			assert_eq!(h.mbit, Some(LINK_MBIT));
		}
		eprintln!(
			"{} hosts at {LINK_MBIT} Mbit/s, cloud at {}; started after {:?}",
			hosts.hosts().len(),
			hosts.cloud_addr(),
			started.elapsed()
		);
	}

	// --- A miner host's link down past its lease, then up.
	let (a, b) = net.stage_pair(&watcher, VICTIM_STAGE, TIMEOUT).await;
	let busy = |s: &iota_rpc::types::Status, who: &iota_rpc::AccountId| {
		let st = &s.stages[usize::from(VICTIM_STAGE)];
		let v = s.miners.iter().find(|m| &m.account == who)?;
		(st.phase == iota_primitives::Phase::Training && v.backward_this_epoch >= 2 && v.leases > 0)
			.then_some((st.epoch, v.leases))
	};
	let cut = net.pause_miner_when(&watcher, &a, &b, TIMEOUT, Pause::LinkDown, busy).await;
	let (victim, held, epoch) = (cut.account.clone(), cut.leases, cut.epoch);
	eprintln!("link of {victim} down in epoch {epoch} holding {held} lease(s)");
	let expired = cut.leases_expired + u64::from(held);
	net.wait("every lease the cut-off miner held to expire", TIMEOUT, &[], || async {
		let s = watcher.status().await.ok()?;
		let v = s.miners.iter().find(|m| m.account == victim)?;
		(v.leases == 0 && v.leases_expired >= expired).then_some(())
	})
	.await;
	let (lost, rejoined) = net
		.silent_member_goes(&chain, &watcher, &spec, cut, (VICTIM_STAGE, QUOTA), TIMEOUT)
		.await;
	// (Printed, not asserted: here the next epoch; in clean-clone CI #42, with epochs of 3.5 s, 18
	// epochs later, after a resynchronisation.)
	eprintln!(
		"{lost} pass(es) lost; stage {VICTIM_STAGE} merged both members in epoch {rejoined}, {} after \
		 the cut",
		rejoined - epoch
	);

	// --- A validator host killed.
	let dead = net.validators[0].name().to_owned();
	let (_, validator_uris) = net.accounts();
	let live_id = Signer::from_uri(validator_uris[1]).unwrap().account_id();
	net.validators[0].kill9();
	net.hosts.as_ref().unwrap().set_link(&dead, false).unwrap();
	let after = net
		.wait("the current epoch", TIMEOUT, &[&dead], || async {
			watcher.status().await.ok()?.stages.iter().map(|s| s.epoch).max()
		})
		.await;
	eprintln!("killed {dead} in epoch {after} after {:?}", started.elapsed());
	// An epoch that starts after the kill is finalized with the live validator's weights alone.
	let judged = after + 1;
	net.wait(&format!("epoch {judged} finalized"), TIMEOUT, &[&dead], || async {
		chain.scores(judged).await.ok()?
	})
	.await;
	assert!(chain.next_epoch_to_finalize().await.unwrap() > judged);
	assert!(
		chain.weights(judged, &live_id).await.unwrap().is_some(),
		"the live validator's weights for epoch {judged}"
	);
	eprintln!("epoch {judged} finalized with one validator after {:?}", started.elapsed());

	print_traffic(&net, &watcher).await;
}

/// Prints each completed epoch's tokens per second and merge seconds (the orchestrator's summaries),
/// and each host's bytes in all and per completed epoch.
async fn print_traffic(net: &TestNetwork, watcher: &iota_rpc::SignedClient) {
	let epochs = watcher.status().await.unwrap().epochs;
	for e in &epochs {
		let secs = e.completed_ms.saturating_sub(e.started_ms) as f64 / 1000.0;
		eprintln!(
			"epoch {}: {} tokens in {secs:.1} s ({:.0} tokens/s), merge {:.1} s (all stages), loss {:.4}",
			e.epoch,
			e.tokens,
			e.tokens as f64 / secs.max(1e-3),
			e.merge_ms as f64 / 1000.0,
			e.loss
		);
	}
	let hosts = net.hosts.as_ref().unwrap();
	for h in hosts.hosts() {
		let b = hosts.bytes(&h.name).unwrap();
		eprintln!(
			"{:<24} sent {:>10} B, received {:>10} B, {:>9.0} B per completed epoch",
			h.name,
			b.sent,
			b.received,
			(b.sent + b.received) as f64 / epochs.len().max(1) as f64
		);
	}
}

/// The chain as the four-node local testnet (Alice, Bob, Charlie and Dave author and finalize); every
/// daemon (orchestrator, 3 × 1 miners and a validator, each miner and the validator on a test host with
/// a 100 Mbit/s link, training in local mode: inner AdamW steps every 2 backward passes, int8
/// pseudo-gradient merges, challenged states revealed) is given the four nodes' RPC URLs, Alice's first. Once epoch 0 is committed at every stage, Alice's node
/// is killed (SIGKILL): the node every daemon talks to. Asserted: blocks are still finalized (3 of 4
/// voters); the orchestrator and the validator, which read the chain all along, moved to a live node
/// (their logs say so); every process lives on, and training goes on: two more epochs are committed
/// at every stage (the miners ask the chain only when they resynchronise; their next call moves on).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root: starts four iota-node processes, iota-orchestrator, three iota-miner and an iota-validator process on test hosts (see the file's docs)"]
async fn a_chain_node_killed_under_the_daemons_leaves_finality_and_training_going() {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_hosts_nodes");
	let mut options = tiny_network("e2e-net-nodes", &dir, 3, 1, 1, QUOTA);
	options.chain = iota_devnet::ChainTarget::LocalTestnet;
	options.hosts = Some(HostLinks { mbit: Some(100) });
	options.data.training =
		iota_protocol::optim::Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
	options.data.merge_codec = iota_protocol::codec::MergeCodec::Int8;
	let mut net = TestNetwork::start(options).await;
	assert_eq!(net.nodes.len(), 4);
	let chain = net.chain().await.unwrap();
	let committed = |epoch: u32| {
		let chain = chain.clone();
		async move {
			for s in 0..3u16 {
				chain.merge_manifest(epoch, s).await.ok()??;
			}
			Some(())
		}
	};
	net.wait("epoch 0 committed at every stage", TIMEOUT, &[], || committed(0))
		.await;
	let epoch = {
		let watcher = net.client_as("//Bob").await;
		watcher.status().await.unwrap().stages.iter().map(|s| s.epoch).max().unwrap()
	};
	let finalized = chain.finalized_number().await.unwrap();
	let killed = net.nodes[0].name().to_owned();
	net.nodes[0].kill9();
	eprintln!(
		"killed {killed} in epoch {epoch} at finalized block {finalized}, after {:?}",
		started.elapsed()
	);
	let allowed = [killed.as_str()];
	// Finality goes on with 3 of 4 voters (read through the client's next node).
	net.wait("a block finalized after the kill", TIMEOUT, &allowed, || async {
		(chain.finalized_number().await.ok()? > finalized + 2).then_some(())
	})
	.await;
	// Training goes on: two more epochs committed at every stage.
	net.wait("two more epochs committed at every stage", TIMEOUT, &allowed, || {
		committed(epoch + 2)
	})
	.await;
	net.assert_alive(&allowed);
	let moved = |log: &std::path::Path| {
		let text = strip_ansi(&std::fs::read_to_string(log).unwrap_or_default());
		text.contains("chain node connection lost; moving to the next endpoint")
	};
	// The orchestrator and the validator read the chain all along; the miners ask it only when they
	// resynchronise (their next call moves on), and train on meanwhile.
	assert!(moved(net.orchestrator.log()), "the orchestrator moved to a live node");
	for p in net.validators.iter() {
		assert!(moved(p.log()), "{} moved to a live node", p.name());
	}
	let miners_moved = net.miners.iter().filter(|p| moved(p.log())).count();
	eprintln!("{miners_moved} of {} miners called the chain after the kill", net.miners.len());
	eprintln!(
		"epoch {} committed at every stage, finalized block {}, after {:?}",
		epoch + 2,
		chain.finalized_number().await.unwrap(),
		started.elapsed()
	);
	print_traffic(&net, &net.client_as("//Bob").await).await;
}

/// Issue 18's rate and mode pairs the two scenarios above do not train at: sync mode with every link at
/// 100 Mbit/s, and local mode with every link at 20 Mbit/s (the rate at which local mode's challenge
/// reveals once livelocked: their presigned URLs expired before their turn). The `tiny` preset in 3 × 1
/// miners and a validator, each on a test host. Asserted: two epochs committed at every stage; every link
/// at its rate and carrying traffic both ways; in local mode, every verdict the validator put on chain for
/// epoch 0 is a `Pass` and each miner has one (a challenged state not revealed before its deadline is a
/// `Fail`). Printed: each epoch's tokens per second and merge seconds, bytes per host per epoch.
async fn train_on_links(run: &str, training: iota_protocol::optim::Training, mbit: u32) {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), run);
	let local = matches!(training, iota_protocol::optim::Training::Local { .. });
	let mut options = tiny_network(run, &dir, 3, 1, 1, QUOTA);
	options.hosts = Some(HostLinks { mbit: Some(mbit) });
	options.data.training = training;
	options.data.merge_codec = iota_protocol::codec::MergeCodec::Int8;
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	net.wait("epochs 0 and 1 committed at every stage", TIMEOUT, &[], || async {
		for s in 0..3u16 {
			chain.merge_manifest(1, s).await.ok()??;
		}
		Some(())
	})
	.await;
	eprintln!("{run}: epochs 0 and 1 committed after {:?}", started.elapsed());
	if local {
		let (miners, validators) = net.accounts();
		let validator = Signer::from_uri(validators[0]).unwrap().account_id();
		let miners: Vec<_> =
			miners.iter().map(|m| Signer::from_uri(m).unwrap().account_id()).collect();
		let judged = net
			.wait("the validator's verdicts on every miner for epoch 0", TIMEOUT, &[], || async {
				let mut all = Vec::new();
				for m in &miners {
					let v = verdicts(&chain, 0, m, &validator).await;
					if v.is_empty() {
						return None;
					}
					all.push(v);
				}
				Some(all)
			})
			.await;
		for (m, v) in miners.iter().zip(&judged) {
			assert!(v.iter().all(|v| *v == iota_chain::Verdict::Pass), "miner {m}: {v:?}");
		}
		eprintln!(
			"{run}: {} verdicts for epoch 0, every one a Pass, after {:?}",
			judged.iter().map(Vec::len).sum::<usize>(),
			started.elapsed()
		);
	}
	let hosts = net.hosts.as_ref().unwrap();
	for h in hosts.hosts() {
		assert_eq!(h.mbit, Some(mbit), "{}", h.name);
		let b = hosts.bytes(&h.name).unwrap();
		assert!(b.sent > 0 && b.received > 0, "{}: {b:?}", h.name);
	}
	print_traffic(&net, &watcher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root: starts iota-node, iota-orchestrator, three iota-miner and an iota-validator process on test hosts (see the file's docs)"]
async fn sync_mode_trains_over_100_mbit_links() {
	train_on_links("e2e-net-sync100", iota_protocol::optim::Training::Sync, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root: starts iota-node, iota-orchestrator, three iota-miner and an iota-validator process on test hosts (see the file's docs)"]
async fn local_mode_trains_and_reveals_over_20_mbit_links() {
	train_on_links(
		"e2e-net-local20",
		iota_protocol::optim::Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 },
		20,
	)
	.await;
}
