//! Churn: a miner dies mid-epoch and the run goes on. A whole network (`iota_devnet::Network`: dev node,
//! orchestrator with the embedded S3 server, 3 × 2 real `iota-miner` processes, no validators) trains the
//! `tiny` preset re-cut into 3 stages with 10-second leases and a 60-block phase timeout. Mid-epoch
//! (the first time a stage-1 miner that has done work in the epoch, in sync mode two accepted backward
//! passes, is seen holding a lease while its stage trains), it is frozen (SIGSTOP), the orchestrator's count of its leases is read again, and it is
//! killed with SIGKILL (if it no longer holds one, it is let go, SIGCONT, and watched again).
//!
//! Asserted (no timing): every lease it held expired and was re-listed (`leases_expired` in
//! `iota_status`; it holds none afterwards); that epoch completes at every stage; stage 1's manifest is
//! committed with the remaining member alone (one butterfly shard, in the bucket under its committed hash,
//! the checkpoint reproducing the attested state, which the survivor's log attested) and merges the
//! backward passes the survivor ran (the pathway log's `backward` column) plus the victim's accepted
//! backward passes, which the orchestrator re-listed once the victim was silent (its lease run out) and the
//! survivor recomputed (every one of them: the manifest counts the whole quota, nothing lost; unless the
//! survivor finished the quota first, then the victim is found silent a lease after uploads opened and
//! its passes are counted lost); in sync mode stage 1 leaves Training without its phase timeout; while
//! every other stage merges exactly the miners that ran its backward passes; the pathway log in the bucket
//! matches the orchestrator's hash and the epoch's sample count; and the survivor alone trains and merges
//! the next epoch (its manifest and pathway log). The same in local mode (inner AdamW steps every 2
//! backward passes, int8 pseudo-gradient merges), where the victim's accepted passes belonged to its
//! inner-step trail: none is recomputed, and the stage merges the survivor's pseudo-gradient alone.
//!
//! Restart (sync mode, 60-second leases, quota 16): the busy stage-1 miner is killed and started again at
//! once with the same key. Asserted: its new process's session is seen as a restart; its leases were
//! released by it (none expired); its passes that reached no merge submission were recomputed (the
//! pathway log names each, none lost); every stage's manifest counts 16 of 16 samples, merged from the
//! miners whose passes it counts; the restarted miner works on in a later epoch. The times from the
//! restart to its detection and to the epoch's last commit are printed. The miner is frozen once it has
//! two accepted backward passes of the epoch (the status's `backward_this_epoch`), so there is work to
//! recompute. In local mode (with a validator): its passes of the epoch, part of its inner-step trail,
//! are counted lost and the manifest counts the rest; its trail stays in the pathway log, and the
//! restarted process answers the trail's challenges from the inner-step log its earlier process kept,
//! so the validator's verdicts on it for that epoch are `Pass`.
//!
//! Silent (sync mode, 10-second leases, quota 8): a stage-1 miner with two accepted backward passes is
//! frozen (SIGSTOP) until the orchestrator finds it silent, its lease run out (no lease, no request:
//! `gone` in `iota_status`), then let go (SIGCONT). Asserted: stage 1 left Training without waiting for its
//! phase timeout; its passes were re-listed and recomputed by the other member (none lost) and stage 1's
//! manifest counts the whole quota from that member alone, or, if the other member finished the quota
//! first (found a lease after uploads opened), its passes were counted lost and the manifest counts the
//! rest; the thawed miner is never asked for its (void) gradient of the epoch (`Idle: forfeited` until the
//! stage merges, then `merging`), so nothing of it is refused, and it applies the merge's step, holding
//! the committed state; a later epoch merges both members again.
//!
//! Silent after the quota (sync mode, 10-second leases, every stage-1 member waiting 6 s before uploading
//! its gradient, test-only fault `slow-upload`): a stage-1 miner is frozen once its stage's quota is done
//! (uploads open) while it holds accepted passes and has not submitted, until the orchestrator finds it
//! silent a lease after uploads opened, then let go. Asserted: its passes are counted lost (none
//! recomputed: the other member's gradient may be in), stage 1 merges the other member alone with the
//! quota less those passes and leaves Training without waiting for its phase timeout; the thawed miner is
//! told its passes are forfeited (frozen mid-upload, its late gradient would be refused as
//! `lease_expired`): nothing of it meets an untyped or sample-count refusal, and it holds the committed
//! state; a later epoch merges both members again.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test network_churn -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/network_churn/logs`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use iota_chain::Signer;
use iota_e2e::*;
use iota_protocol::codec::MergeCodec;
use iota_protocol::optim::Training;

const QUOTA: u32 = 8;
/// The restart scenario's backward quota per stage and epoch.
const RESTART_QUOTA: u32 = 16;
const VICTIM_STAGE: u16 = 1;
const TIMEOUT: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and kills one (see the file's docs)"]
async fn a_miner_killed_mid_epoch_loses_no_shard_and_the_run_goes_on() {
	// Once it has accepted backward passes of the epoch, which the survivor recomputes.
	churn("e2e-net-churn", "network_churn", Training::Sync, MergeCodec::F32, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and kills one (see the file's docs)"]
async fn local_mode_a_miner_killed_mid_epoch_loses_no_sample_and_the_merge_completes() {
	// Inner AdamW steps every 2 backward passes, int8 pseudo-gradient merges: the victim's inner
	// steps die with it, its passes' samples are recomputed, and the merge takes the survivor's
	// pseudo-gradient alone.
	let local = Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
	churn("e2e-net-churn-local", "network_churn_local", local, MergeCodec::Int8, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and kills and restarts one (see the file's docs)"]
async fn a_miner_killed_and_restarted_with_the_same_key_frees_its_leases_and_loses_no_sample() {
	let started = Instant::now();
	// Leases far longer than the restart takes: only the restart can free them.
	let (mut net, chain, watcher) =
		start("e2e-net-restart", "network_churn_restart", 0, RESTART_QUOTA, 60_000, 60, |_| {})
			.await;
	let spec = net.prepared.spec.clone();

	// Once it has accepted backward passes of the epoch (what its process takes with it).
	let frozen = net.freeze_miner_after(&watcher, VICTIM_STAGE, 2, TIMEOUT).await;
	let (victim, epoch, held) = (frozen.account.clone(), frozen.epoch, frozen.leases);
	net.miners[frozen.index].kill9();
	net.miners[frozen.index].restart().unwrap();
	let restarted = Instant::now();
	eprintln!(
		"killed and restarted {victim} in epoch {epoch} holding {held} leases after {:?}",
		started.elapsed()
	);

	// Its new process presents a new session: its leases are released at once, none expired.
	net.wait("the restart seen by the orchestrator", TIMEOUT, &[], || async {
		let s = watcher.status().await.ok()?;
		let v = s.miners.iter().find(|m| m.account == victim)?;
		(v.restarts == 1).then_some(())
	})
	.await;
	let seen = restarted.elapsed();
	net.wait("the epoch committed at every stage", TIMEOUT, &[], || async {
		for s in 0..3u16 {
			chain.merge_manifest(epoch, s).await.ok()??;
		}
		Some(())
	})
	.await;
	let committed = restarted.elapsed();
	let status = watcher.status().await.unwrap();
	let v = status.miners.iter().find(|m| m.account == victim).unwrap();
	assert_eq!(v.leases_expired, 0, "its leases were released by the restart, not by expiry");
	let summary = net.epoch_summary(&watcher, epoch, TIMEOUT, &[]).await;
	let store = net.bucket().await;
	let log = pathway_log(&net, &watcher, &store, epoch).await;
	let recomputed: usize = log.records.iter().map(|r| r.recomputed.len()).sum();
	eprintln!(
		"restart seen {seen:?} after it, epoch {epoch} committed everywhere {committed:?} after it; \
		 {} samples, {} passes recomputed, {} lost",
		summary.samples, summary.recomputed, summary.lost
	);
	assert_eq!(summary.lost, 0, "the stage was training: every pass could be recomputed");
	assert!(summary.recomputed >= 2, "its accepted backward passes were recomputed");
	assert_eq!(summary.recomputed as usize, recomputed, "the log names every recomputation");
	assert!(
		log.records
			.iter()
			.flat_map(|r| &r.recomputed)
			.all(|p| p.stage == VICTIM_STAGE && p.output.is_some()),
		"only the victim's stage recomputed, each with its output"
	);
	// Every manifest counts its whole quota, merged from the miners whose passes it counts.
	for s in 0..3u16 {
		let m = chain.merge_manifest(epoch, s).await.unwrap().unwrap();
		assert_eq!(m.samples, RESTART_QUOTA, "stage {s}'s manifest counts every sample");
		let counted: BTreeSet<&iota_rpc::AccountId> =
			log.records.iter().filter_map(|r| r.counted_by(s)).collect();
		check_manifest(&store, &spec, s, epoch, &m, counted.len() as u32).await;
	}
	// The restarted process works on: it runs passes of a later epoch at its stage.
	let mut later = epoch + 1;
	loop {
		assert!(
			later <= epoch + 4,
			"the restarted miner ran no pass in epochs {}..={}",
			epoch + 1,
			epoch + 4
		);
		let written = watcher.epoch_record(later).await.ok().and_then(|r| r.pathway_log).is_some();
		if !written {
			net.assert_alive(&[]);
			assert!(
				started.elapsed() < TIMEOUT,
				"timed out waiting for epoch {later}'s pathway log"
			);
			tokio::time::sleep(Duration::from_millis(500)).await;
			continue;
		}
		let log = pathway_log(&net, &watcher, &store, later).await;
		if log.records.iter().any(|r| r.backward[usize::from(VICTIM_STAGE)] == victim) {
			eprintln!("the restarted miner ran stage {VICTIM_STAGE} passes of epoch {later}");
			break;
		}
		later += 1;
	}
	eprintln!("done after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and a validator, and kills and restarts one miner (see the file's docs)"]
async fn local_mode_a_miner_restarted_with_the_same_key_answers_its_challenges_from_its_kept_log() {
	let started = Instant::now();
	let (mut net, chain, watcher) = start(
		"e2e-net-restart-local",
		"network_churn_restart_local",
		1,
		RESTART_QUOTA,
		60_000,
		60,
		|o| {
			o.data.training = Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
			o.data.merge_codec = MergeCodec::Int8;
		},
	)
	.await;
	let validator = iota_chain::Signer::from_uri(net.accounts().1[0]).unwrap().account_id();

	// Four backward passes: two inner steps (every 2), so its trail has a reported step to challenge.
	let frozen = net.freeze_miner_after(&watcher, VICTIM_STAGE, 4, TIMEOUT).await;
	let (victim, epoch) = (frozen.account.clone(), frozen.epoch);
	net.miners[frozen.index].kill9();
	net.miners[frozen.index].restart().unwrap();
	eprintln!("killed and restarted {victim} in epoch {epoch} after {:?}", started.elapsed());
	net.wait("the restart seen by the orchestrator", TIMEOUT, &[], || async {
		let s = watcher.status().await.ok()?;
		(s.miners.iter().find(|m| m.account == victim)?.restarts == 1).then_some(())
	})
	.await;
	net.wait("the epoch committed at every stage", TIMEOUT, &[], || async {
		for s in 0..3u16 {
			chain.merge_manifest(epoch, s).await.ok()??;
		}
		Some(())
	})
	.await;
	let summary = net.epoch_summary(&watcher, epoch, TIMEOUT, &[]).await;
	let status = watcher.status().await.unwrap();
	let v = status.miners.iter().find(|m| m.account == victim).unwrap();
	assert_eq!(v.leases_expired, 0, "its leases were released by the restart, not by expiry");
	// Its passes belonged to its inner-step trail, which ended with its process: counted lost, the
	// stage's manifest merged the rest.
	let m = chain.merge_manifest(epoch, VICTIM_STAGE).await.unwrap().unwrap();
	eprintln!(
		"epoch {epoch}: {} passes lost, {} recomputed; stage {VICTIM_STAGE} merged {} of {RESTART_QUOTA}",
		summary.lost, summary.recomputed, m.samples
	);
	assert!(summary.lost >= 4 && summary.recomputed == 0, "{summary:?}");
	assert_eq!(m.samples + summary.lost, RESTART_QUOTA, "the manifest counts every pass it merged");
	let store = net.bucket().await;
	let log = pathway_log(&net, &watcher, &store, epoch).await;
	assert!(
		log.inner_states.iter().any(|t| t.stage == VICTIM_STAGE && t.miner == victim),
		"its trail of the epoch stays challengeable"
	);
	// The validator's verdicts on it for that epoch: its restarted process answered the challenges from
	// the log its earlier one kept, so there is one and none is a Fail.
	let client = chain;
	let got = net
		.wait("the validator's verdict on the restarted miner", TIMEOUT, &[], || async {
			let v = verdicts(&client, epoch, &victim, &validator).await;
			(!v.is_empty()).then_some(v)
		})
		.await;
	eprintln!("verdicts on the restarted miner for epoch {epoch}: {got:?}");
	assert!(got.iter().all(|v| *v == iota_chain::Verdict::Pass), "{got:?}");
	let text = net.miner_logs()[frozen.index].clone();
	let reopened = text
		.find("epochs of an earlier process kept for their challenges")
		.expect("the restarted miner reopened its log");
	assert!(
		text[reopened..].contains(&format!(
			"revealed a challenged state stage={VICTIM_STAGE} epoch={epoch} state="
		)),
		"the restarted process revealed challenged steps of epoch {epoch}"
	);
	eprintln!("done after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and freezes one past its lease (see the file's docs)"]
async fn a_miner_silent_past_its_lease_forfeits_its_passes_and_steps_with_the_merge() {
	let started = Instant::now();
	let (mut net, chain, watcher) =
		start("e2e-net-silent", "network_churn_silent", 0, QUOTA, 10_000, 60, |_| {}).await;
	let spec = net.prepared.spec.clone();

	// Frozen (SIGSTOP) holding a lease and two accepted backward passes of the epoch, until the
	// orchestrator has found it silent (its lease ran out; or, if the other member finished the
	// quota first, a lease after the stage's uploads opened); then let go (SIGCONT).
	let frozen = net.freeze_miner_after(&watcher, VICTIM_STAGE, 2, TIMEOUT).await;
	let (lost, _) = net
		.silent_member_goes(&chain, &watcher, &spec, frozen, (VICTIM_STAGE, QUOTA), TIMEOUT)
		.await;
	eprintln!("done after {:?}", started.elapsed());
	if lost > 0 {
		eprintln!("the other member finished the quota before the victim was found silent");
	}
}

/// The stage-1 members' delay before uploading each epoch's gradient in the uploads-open scenario (ms):
/// shorter than its 10-second leases, so an honest member is never taken for gone.
const SLOW_UPLOAD_MS: u64 = 6_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and six iota-miner processes, and freezes one after the quota (see the file's docs)"]
async fn a_member_silent_after_its_stages_uploads_opened_is_not_awaited() {
	let started = Instant::now();
	let (mut net, chain, watcher) =
		start("e2e-net-silent-upload", "network_churn_silent_upload", 0, QUOTA, 10_000, 60, |o| {
			o.miner_args = (0..6)
				.map(|i| {
					(
						i,
						vec![
							"--fault".into(),
							format!("slow-upload={SLOW_UPLOAD_MS}@{VICTIM_STAGE}"),
						],
					)
				})
				.collect();
		})
		.await;
	let spec = net.prepared.spec.clone();
	// Frozen once stage 1's quota is done (uploads open), holding accepted passes of the epoch and no
	// lease, before either member has submitted (both wait 6 s before uploading).
	let (a, b) = net.stage_pair(&watcher, VICTIM_STAGE, TIMEOUT).await;
	// Both have passes of the epoch: the other member's gradient is what the stage merges (with none
	// in, a silent member is awaited).
	let waiting = |s: &iota_rpc::types::Status, who: &iota_rpc::AccountId| {
		let st = &s.stages[usize::from(VICTIM_STAGE)];
		let v = s.miners.iter().find(|m| &m.account == who)?;
		let other = if *who == a { &b } else { &a };
		let o = s.miners.iter().find(|m| &m.account == other)?;
		(st.phase == iota_primitives::Phase::Training
			&& st.backward_done >= QUOTA
			&& st.gradients_submitted == 0
			&& v.backward_this_epoch > 0
			&& o.backward_this_epoch > 0
			&& v.leases == 0)
			.then_some((st.epoch, 0))
	};
	let frozen = net.freeze_miner_when(&watcher, &a, &b, TIMEOUT, waiting).await;
	let (lost, _) = net
		.silent_member_goes(&chain, &watcher, &spec, frozen, (VICTIM_STAGE, QUOTA), TIMEOUT)
		.await;
	eprintln!("done after {:?}", started.elapsed());
	assert!(lost > 0, "found once uploads were open: its passes are lost, not recomputed");
}

/// A 3 × 2 `tiny` network (`validators` validators, `quota` samples per stage and epoch, `lease_ms`
/// leases, a `phase_timeout`-block phase timeout) with `tune` applied to its options, logs under
/// `$CARGO_TARGET_TMPDIR/<dir_name>`; with a chain client and a status client (Bob, a genesis validator:
/// it may read epoch records).
async fn start(
	run: &str,
	dir_name: &str,
	validators: u32,
	quota: u32,
	lease_ms: u64,
	phase_timeout: u32,
	tune: impl FnOnce(&mut iota_devnet::NetworkOptions),
) -> (TestNetwork, iota_chain::IotaClient, iota_rpc::SignedClient) {
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), dir_name);
	let mut options = tiny_network(run, &dir, 3, 2, validators, quota);
	options.orchestrator_args = vec![
		"--lease-ms".into(),
		lease_ms.to_string(),
		"--phase-timeout".into(),
		phase_timeout.to_string(),
	];
	tune(&mut options);
	let net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	(net, chain, watcher)
}

/// The scenario (module docs) for `training` and `codec`, the victim frozen once it has `backward`
/// accepted backward passes of the epoch; logs under `$CARGO_TARGET_TMPDIR/<dir_name>`.
async fn churn(run: &str, dir_name: &str, training: Training, codec: MergeCodec, backward: u32) {
	let started = Instant::now();
	let (mut net, chain, watcher) = start(run, dir_name, 0, QUOTA, 10_000, 60, |o| {
		o.data.training = training;
		o.data.merge_codec = codec;
	})
	.await;
	let spec = net.prepared.spec.clone();

	// Mid-epoch: once a stage-1 miner has done work in the epoch and holds a lease while its stage
	// trains, it is frozen (SIGSTOP) and, if it still holds a lease two seconds later (so the leases
	// counted are ones it can never complete), killed (SIGKILL); the other one survives.
	let frozen = net.freeze_miner_after(&watcher, VICTIM_STAGE, backward, TIMEOUT).await;
	net.miners[frozen.index].kill9();
	let (victim, survivor, epoch, held) =
		(frozen.account, frozen.other, frozen.epoch, frozen.leases);
	let victim_name = net.miners[frozen.index].name().to_owned();
	eprintln!(
		"killed {victim_name} ({victim}) in epoch {epoch} holding {held} leases after {:?}",
		started.elapsed()
	);
	let allowed = [victim_name.as_str()];

	// Its leases expire and are re-listed.
	net.wait("the victim's leases to expire", TIMEOUT, &allowed, || async {
		let s = watcher.status().await.ok()?;
		let v = s.miners.iter().find(|m| m.account == victim)?;
		(v.leases == 0 && v.leases_expired >= u64::from(held)).then_some(())
	})
	.await;

	// The epoch completes at every stage (stage 1 with the survivor alone).
	net.wait("the epoch committed at every stage", TIMEOUT, &allowed, || async {
		for s in 0..3u16 {
			chain.merge_manifest(epoch, s).await.ok()??;
		}
		Some(())
	})
	.await;
	let store = net.bucket().await;
	let survivor_log = {
		let (miners, _) = net.accounts();
		let i = miners
			.iter()
			.position(|s| Signer::from_uri(s).unwrap().account_id() == survivor)
			.unwrap();
		attested_state_hashes(&net.miner_logs()[i])
	};
	// The pathway log: in the bucket under the orchestrator's hash, every completed sample.
	let summary = net.epoch_summary(&watcher, epoch, TIMEOUT, &allowed).await;
	let log = pathway_log(&net, &watcher, &store, epoch).await;
	assert_eq!(log.records.len() as u32, summary.samples, "the log holds every completed sample");
	// Each manifest merged exactly the live miners that ran the stage's backward passes (at stage 1 the
	// survivor alone: the victim's accumulated gradient died with it).
	let mut manifests = Vec::new();
	for s in 0..3u16 {
		let m = chain.merge_manifest(epoch, s).await.unwrap().unwrap();
		let ran: BTreeSet<&iota_rpc::AccountId> =
			log.records.iter().map(|r| &r.backward[usize::from(s)]).collect();
		let live: Vec<&iota_rpc::AccountId> =
			ran.iter().copied().filter(|a| **a != victim).collect();
		if s == VICTIM_STAGE {
			assert_eq!(live, vec![&survivor], "stage 1's merged passes are the survivor's");
		}
		let members = live.len() as u32;
		let state = check_manifest(&store, &spec, s, epoch, &m, members).await;
		if s == VICTIM_STAGE {
			assert_eq!(
				survivor_log.get(&(s, epoch)),
				Some(&state.to_string()),
				"the survivor attested the committed state"
			);
		}
		manifests.push(m);
	}
	let by_survivor = log
		.records
		.iter()
		.filter(|r| r.backward[usize::from(VICTIM_STAGE)] == survivor)
		.count() as u32;
	let by_victim = log
		.records
		.iter()
		.filter(|r| r.backward[usize::from(VICTIM_STAGE)] == victim)
		.count() as u32;
	eprintln!(
		"epoch {epoch}: {} samples; stage 1 backward passes: survivor {by_survivor}, victim {by_victim}; manifests merged {:?}",
		log.records.len(),
		manifests.iter().map(|m| m.samples).collect::<Vec<_>>()
	);
	assert_eq!(by_survivor + by_victim, log.records.len() as u32);
	// It had done work in the epoch before it died: its accepted forwards stay in the log, and their
	// backward passes after its death were recomputed by the survivor.
	let fwd_by_victim = log
		.records
		.iter()
		.filter(|r| r.forward[usize::from(VICTIM_STAGE)] == victim)
		.count() as u32;
	let recomputed = log
		.records
		.iter()
		.filter(|r| {
			r.forward[usize::from(VICTIM_STAGE)] == victim
				&& r.backward[usize::from(VICTIM_STAGE)] == survivor
		})
		.count();
	eprintln!("the victim's accepted forwards: {fwd_by_victim}, of which the survivor recomputed the backward: {recomputed}");
	assert!(fwd_by_victim + by_victim > 0, "the victim's accepted work of the epoch is in the log");
	// Its accepted backward passes: in sync mode re-listed once it was silent for a lease's length
	// (no lease, no request) while its stage trained, and recomputed by the survivor; in local mode
	// they belonged to its inner-step trail and are lost with it.
	let for_victim = log
		.records
		.iter()
		.filter(|r| {
			r.backward[usize::from(VICTIM_STAGE)] == victim
				&& r.recomputed.iter().any(|p| p.stage == VICTIM_STAGE && p.miner == survivor)
		})
		.count() as u32;
	let victim_status = watcher.status().await.unwrap();
	let gone = victim_status.miners.iter().find(|m| m.account == victim).map_or(0, |m| m.gone);
	eprintln!(
		"the victim's backward passes recomputed by the survivor: {for_victim} of {by_victim}; \
		 epoch summary: {} recomputed, {} lost; the victim was found silent {gone} time(s)",
		summary.recomputed, summary.lost
	);
	if matches!(training, Training::Sync) {
		// Found silent a lease after its last request (or after the stage's uploads opened), and the
		// stage did not wait for its phase timeout.
		assert_eq!(gone, 1, "the dead victim was found silent");
		let advances = net.phase_advances(VICTIM_STAGE, epoch, "Training");
		eprintln!("stage {VICTIM_STAGE} left Training in epoch {epoch}, timed out: {advances:?}");
		assert_eq!(advances.first(), Some(&false), "stage 1 did not wait for the phase timeout");
		assert!(by_victim >= backward, "{by_victim} backward passes of the victim in the log");
		if summary.lost == 0 {
			// Found while the stage trained: every pass of it recomputed by the survivor.
			assert_eq!(for_victim, by_victim, "every backward pass of the victim was recomputed");
			assert_eq!((summary.recomputed, summary.lost), (by_victim, 0));
			assert_eq!(
				manifests[usize::from(VICTIM_STAGE)].samples,
				QUOTA,
				"stage 1 merged every sample of the epoch"
			);
		} else {
			// The survivor finished the quota first: found once uploads were open, its passes lost.
			eprintln!("the survivor finished the quota before the victim was found silent");
			assert_eq!((for_victim, summary.recomputed, summary.lost), (0, 0, by_victim));
		}
	} else {
		assert_eq!((for_victim, gone), (0, 0));
	}
	assert_eq!(
		manifests[usize::from(VICTIM_STAGE)].samples,
		by_survivor + for_victim,
		"stage 1 merged the survivor's passes and its recomputations of the victim's"
	);

	// The run goes on: stage 1 trains the next epoch with the survivor alone (every pass of the epoch is its
	// own) and merges it. Read from the chain and the pathway log, not from a status poll: epochs of `tiny`
	// take a few seconds, so the stage is epochs further on by the time this runs.
	let next = net
		.wait("stage 1 to merge the next epoch", TIMEOUT, &allowed, || async {
			chain.merge_manifest(epoch + 1, VICTIM_STAGE).await.ok()?
		})
		.await;
	let next_log = pathway_log(&net, &watcher, &store, epoch + 1).await;
	let by_it = next_log
		.records
		.iter()
		.filter(|r| r.backward[usize::from(VICTIM_STAGE)] == survivor)
		.count() as u32;
	eprintln!(
		"epoch {} at stage 1: {} members, {} samples merged, the survivor ran {by_it} of {} backward passes",
		epoch + 1,
		next.members,
		next.samples,
		next_log.records.len()
	);
	assert_eq!(next.members, 1, "the survivor merged epoch {} alone", epoch + 1);
	assert!(
		next.samples > 0 && by_it == next_log.records.len() as u32 && by_it == next.samples,
		"the survivor ran every pass of epoch {}: {by_it} of {}, {} merged",
		epoch + 1,
		next_log.records.len(),
		next.samples
	);
	eprintln!("done after {:?}", started.elapsed());
}
