//! A cheating miner is singled out, slashed and unpaid: a dev node, the embedded S3 server, the
//! orchestrator, 3 stages × 2 real `iota-miner` processes training `tiny` on Shakespeare, one of which
//! (a stage-0 miner) runs with `--fault perturb=0.5` (uniform noise added to every activation it
//! uploads), and one `iota-validator` (Bob, a genesis validator holding half the validator stake, which
//! is the dev run's slash quorum).
//!
//! The same in local mode (inner AdamW steps every 2 backward passes, int8 pseudo-gradient merges):
//! the validator checks the cheater's passes at the inner states it revealed when challenged, and every
//! honest miner's challenged inner steps replay, its passes recompute at their revealed states and its
//! pseudo-gradient is the delta to its last reported state. The scenarios stop at the cheater's epoch
//! (a 10-epoch run once stalled after epoch 4: the cheater was slashed while its stage's merge round
//! named it and the predicted commit was refused as `InvalidMemberCount`, which `commit_merge` no
//! longer does; another gave 41 honest `Pass` verdicts and no `Fail`). Two more local-mode cheaters, each
//! failed, slashed and unpaid the same way: one that never reveals a challenged state (failed once the
//! reveal deadline passed) and one that submits 1.5 times its pseudo-gradient (its inner steps and
//! passes are honest); and one that perturbs its state at inner steps a fixed coin picks
//! (`perturb-state`: the step's gradient plus noise, logged so its reveals match its hashes), failed on
//! the validator's replay of a challenged step. With about two inner steps per replica per epoch here,
//! every step is challenged (the last one and two drawn), so a perturbed step is always caught; with
//! `H` steps per epoch a single perturbed step is caught with probability `min(3, H) / H` per epoch.
//!
//! Asserted: within the first 2 epochs the validator's `Fail` verdict on the cheater is on chain and the
//! cheater's bond is slashed (its miner record is gone); every verdict on an honest miner in those
//! epochs is `Pass`; the validator's weights for epoch 0 give the cheater nothing; epoch 0 is finalized
//! (by the validator, after the scoring window) and its emission split pays every honest miner that ran a
//! pass in epoch 0 (its pathway log), no other, and not the cheater. The evidence object whose BLAKE3 is on chain with the `Fail` is in the bucket and says
//! `Fail`; the validator's `/metrics` counts the failed checks and the submitted verdicts.
//!
//! ```sh
//! ./scripts/fetch-data.sh                                             # data/shakespeare
//! cargo build -p iota-orchestrator -p iota-validator
//! cargo build -p iota-miner --features fault-injection                # honest miners use it too
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test validator_cheater -- --ignored --nocapture
//! ```
//! (`$IOTA_MINER_BIN`, `$IOTA_VALIDATOR_BIN` override the binaries' paths.)

use std::collections::BTreeMap;
use std::time::Duration;

use iota_chain::{AccountId, Signer, Verdict};
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::prepare_data;
use iota_protocol::codec::MergeCodec;
use iota_protocol::optim::Training;
use iota_rpc::SignedClient;
use iota_storage::keys::{self, Id};

/// Two epochs of the whole pipeline plus the scoring window on 2 shared cores: generous.
const TIMEOUT: Duration = Duration::from_secs(1200);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn a_perturbing_miner_is_failed_slashed_and_unpaid_within_two_epochs() {
	cheater_scenario("e2e-validator", Training::Sync, MergeCodec::F32, PERTURB).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn local_mode_a_perturbing_miner_is_caught_at_its_revealed_states_and_honest_steps_pass() {
	let bundles = cheater_scenario("e2e-val-local", LOCAL, MergeCodec::Int8, PERTURB).await;
	// Honest miners were judged by their challenged inner steps (replayed), their passes at revealed
	// states and their pseudo-gradients, all passing; the cheater's Fail came from a pass recomputed
	// at a revealed state.
	let (cheater, honest) = bundles;
	let at_revealed = |b: &serde_json::Value| {
		b["checks"]
			.as_array()
			.is_some_and(|c| c.iter().any(|c| c["weights"]["source"] == "revealed"))
	};
	assert!(
		cheater["checks"]
			.as_array()
			.unwrap()
			.iter()
			.any(|c| c["verdict"] == "Fail" && c["weights"]["source"] == "revealed"),
		"{cheater}"
	);
	let mut steps = 0;
	let mut pseudo = 0;
	for b in &honest {
		assert_eq!(b["verdict"], "Pass", "{b}");
		assert!(at_revealed(b), "no pass checked at a revealed state: {b}");
		for s in b["innerSteps"].as_array().into_iter().flatten() {
			assert_eq!(s["verdict"], "Pass", "{s}");
			steps += 1;
		}
		for g in b["pseudoGradients"].as_array().into_iter().flatten() {
			assert_eq!(g["verdict"], "Pass", "{g}");
			pseudo += 1;
		}
	}
	eprintln!("honest evidence: {steps} inner steps replayed, {pseudo} pseudo-gradients checked");
	assert!(steps > 0 && pseudo > 0, "honest miners' inner steps and pseudo-gradients were judged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn local_mode_a_miner_that_reveals_nothing_is_failed_at_the_reveal_deadline() {
	let fault = &["--fault", "ignore-challenges"];
	let (cheater, _) = cheater_scenario("e2e-val-hide", LOCAL, MergeCodec::Int8, fault).await;
	let steps = cheater["innerSteps"].as_array().expect("judged inner steps");
	assert!(!steps.is_empty(), "{cheater}");
	for s in steps {
		assert_eq!(s["verdict"], "Fail", "{s}");
		assert!(s["reason"].as_str().unwrap().contains("not revealed"), "{s}");
	}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn local_mode_a_pseudo_gradient_that_is_not_the_miners_delta_is_failed() {
	let fault = &["--fault", "pseudo-gradient=1.5"];
	let (cheater, _) = cheater_scenario("e2e-val-pseudo", LOCAL, MergeCodec::Int8, fault).await;
	let g = &cheater["pseudoGradients"][0];
	assert_eq!(g["verdict"], "Fail", "{cheater}");
	assert_eq!(g["finding"]["finding"], "differs", "{g}");
	// Everything else it did was honest: its inner steps replay and its passes recompute.
	assert!(
		cheater["checks"].as_array().unwrap().iter().all(|c| c["verdict"] == "Pass"),
		"{cheater}"
	);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn local_mode_a_miner_that_perturbs_its_state_at_an_inner_step_is_failed() {
	let fault = &["--fault", "perturb-state=0.05"];
	let (cheater, _) = cheater_scenario("e2e-val-state", LOCAL, MergeCodec::Int8, fault).await;
	// Its reveals hash to what it reported (it logged the noised step), so only the replay tells.
	let steps = cheater["innerSteps"].as_array().expect("judged inner steps");
	assert!(
		steps
			.iter()
			.any(|s| s["verdict"] == "Fail" && s["judgement"]["fault"]["kind"] == "replay"),
		"{cheater}"
	);
	for s in steps {
		assert_ne!(s["judgement"]["fault"]["kind"], "hashMismatch", "{s}");
	}
}

/// Local mode: an inner AdamW step every 2 backward passes, IOTA's outer Nesterov step.
const LOCAL: Training = Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
/// The cheater of the first two scenarios.
const PERTURB: &[&str] = &["--fault", "perturb=0.5"];

/// Runs the scenario (module docs) for `training` and `codec`, the cheater running with the miner
/// arguments `cheat`; returns the evidence bundles of the cheater's `Fail` and of every honest miner's
/// verdicts up to the cheater's epoch.
async fn cheater_scenario(
	run: &str,
	training: Training,
	codec: MergeCodec,
	cheat: &[&str],
) -> (serde_json::Value, Vec<serde_json::Value>) {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	let mut opts = shakespeare_options(run, ModelConfig::tiny(), "bf16");
	opts.training = training;
	opts.merge_codec = codec;
	prepare_data(&s3.store, &opts).await.unwrap();

	// Six miners, two per stage; the cheater is the first one seated at stage 0 (its activations feed
	// stage 1, so the noise reaches the loss).
	let by_stage = register_seated(&client, &SIX_MINERS).await;
	assert_eq!(by_stage.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{by_stage:?}");
	let cheater_name = by_stage[&0][0];
	let cheater = Signer::from_uri(cheater_name).unwrap().account_id();
	let honest: Vec<AccountId> = SIX_MINERS
		.iter()
		.filter(|n| **n != cheater_name)
		.map(|n| Signer::from_uri(n).unwrap().account_id())
		.collect();
	let bob = Signer::dev("bob").unwrap().account_id();
	assert!(client.validator(&bob).await.unwrap().is_some(), "Bob is a genesis validator");

	let dir = work_dir();
	let orch = OrchestratorProcess::dev(&node, &s3, run, 8, 30_000, dir.path()).await;
	let _miners: Vec<Daemon> = SIX_MINERS
		.iter()
		.enumerate()
		.map(|(i, name)| {
			let fault: &[&str] = if *name == cheater_name { cheat } else { &[] };
			Daemon::miner(name, &node.rpc_url, &orch.url, dir.path(), i, fault)
		})
		.collect();
	let metrics_addr = format!("127.0.0.1:{}", free_port());
	let validator = Daemon::validator("//Bob", &node.rpc_url, &orch.url, &metrics_addr, dir.path());

	// The cheater is failed and slashed within the first two epochs.
	let failed_at = wait_for("a Fail verdict on the cheater and its slash", TIMEOUT, || async {
		if client.miner(&cheater).await.ok()?.is_some() {
			return None;
		}
		for e in 0..2u32 {
			if verdicts(&client, e, &cheater, &bob).await.contains(&Verdict::Fail) {
				return Some(e);
			}
		}
		None
	})
	.await;
	eprintln!("cheater failed and slashed in epoch {failed_at}");

	// Epoch 0 is finalized (by the validator, once its scoring window closed).
	let split =
		wait_for("epoch 0 finalized", TIMEOUT, || async { client.emission_split(0).await.ok()? })
			.await;

	// Honest miners passed every check the validator made in the epochs it judged.
	let mut passes = 0;
	for e in 0..=failed_at {
		for m in &honest {
			let v = verdicts(&client, e, m, &bob).await;
			assert!(v.iter().all(|v| *v == Verdict::Pass), "epoch {e}: honest miner {m} got {v:?}");
			passes += v.len();
		}
	}
	eprintln!("{passes} Pass verdicts on honest miners over epochs 0..={failed_at}, no Fail");
	// The validator's weights for epoch 0 give the cheater nothing; epoch 0 did not pay the cheater.
	let weights = client.weights(0, &bob).await.unwrap().expect("Bob set weights for epoch 0");
	assert!(weights.iter().all(|(m, w)| m != &cheater || *w == 0), "{weights:?}");
	let paid: BTreeMap<AccountId, u128> = split.miners.0.iter().cloned().collect();
	assert!(!paid.contains_key(&cheater), "the cheater was paid: {paid:?}");
	// Paid is who worked: CLASP scores a miner's items (passes) in the epoch's pathway log, so an honest
	// miner that ran no pass in epoch 0 (the last one started can find its stage's passes all taken by
	// its peer, as clean-clone CI once saw) earns nothing; every honest miner that ran one is paid, and
	// so is one of each stage without the cheater (someone ran the stage's passes).
	let watcher =
		SignedClient::connect(&orch.url, Signer::dev("bob").unwrap().keypair().clone(), TIMEOUT)
			.await
			.unwrap();
	let log = pathway_log_of(run, &watcher, &s3.store, 0).await;
	let worked =
		|m: &AccountId| log.records.iter().any(|r| r.forward.contains(m) || r.backward.contains(m));
	let clasp: Vec<String> = validator
		.log_text()
		.lines()
		.filter(|l| l.contains("CLASP"))
		.map(String::from)
		.collect();
	eprintln!("the validator's CLASP lines:\n{}", clasp.join("\n"));
	// The evidence behind each verdict is in the bucket under the validator's key, hashing to what is
	// on chain: `Ok(None)` when Bob put no verdict, `Err` when the lookup failed.
	let evidence = |e: u32, m: AccountId| {
		let (client, s3, bob) = (&client, &s3, &bob);
		async move {
			let checks = client.spot_checks(e, &m).await.map_err(|e| e.to_string())?;
			let Some(check) = checks.into_iter().find(|c| c.validator == *bob) else {
				return Ok(None);
			};
			let key = keys::evidence(
				&Id::new(run).unwrap(),
				&Id::new(bob.to_string()).unwrap(),
				u64::from(e),
				&Id::new(m.to_string()).unwrap(),
			);
			let bytes = s3.store.get(&key, &check.evidence).await.map_err(|e| e.to_string())?;
			serde_json::from_slice::<serde_json::Value>(&bytes)
				.map(Some)
				.map_err(|e| e.to_string())
		}
	};
	for m in &honest {
		let ok = paid.get(m).is_some_and(|a| *a > 0) == worked(m);
		// An honest miner slashed after the cheater's epoch is not paid for epoch 0: show the
		// evidence of each Fail it got.
		let mut fails = Vec::new();
		for e in 0..(if ok { 0 } else { failed_at + 4 }) {
			if verdicts(&client, e, m, &bob).await.contains(&Verdict::Fail) {
				fails.push((e, evidence(e, m.clone()).await));
			}
		}
		assert!(
			ok,
			"honest miner {m}: paid {:?}, ran a pass in epoch 0: {}; Bob's epoch-0 weights {weights:?}; \
			 split {split:?}; registered now: {}; its epoch-0 checks {:?}; its Fail verdicts with their \
			 evidence {fails:?}",
			paid.get(m),
			worked(m),
			client.miner(m).await.ok().flatten().is_some(),
			client.spot_checks(0, m).await.ok()
		);
	}
	for (stage, miners) in by_stage.iter().filter(|(s, _)| **s != 0) {
		let paid_here = miners
			.iter()
			.map(|n| Signer::from_uri(n).unwrap().account_id())
			.filter(|m| *m != cheater && paid.contains_key(m))
			.count();
		assert!(paid_here > 0, "no honest miner of stage {stage} paid: {paid:?}");
	}
	let idle: Vec<&AccountId> = honest.iter().filter(|m| !worked(m)).collect();
	eprintln!("epoch 0 paid {} honest miners; ran no pass: {idle:?}", honest.len() - idle.len());

	// The cheater's says `Fail`.
	let bundle = evidence(failed_at, cheater.clone())
		.await
		.expect("evidence object with the on-chain hash")
		.expect("Bob's verdict on the cheater");
	assert_eq!(bundle["verdict"], "Fail", "{bundle}");
	let mut honest_bundles = Vec::new();
	for e in 0..=failed_at {
		for m in &honest {
			honest_bundles.extend(
				evidence(e, m.clone()).await.expect("evidence object with the on-chain hash"),
			);
		}
	}

	// Metrics count what happened.
	let text = http_get(&metrics_addr, "/metrics").await;
	assert!(text.contains("iota_validator_checks_total{outcome=\"fail\"}"), "{text}");
	assert!(text.contains("iota_validator_verdicts_submitted_total{verdict=\"fail\"} 1"), "{text}");
	assert!(text.contains("iota_validator_weights_submitted_total"), "{text}");
	let log = validator.log_text();
	assert!(log.contains("verdict submitted"), "the validator logged no verdict");
	(bundle, honest_bundles)
}
