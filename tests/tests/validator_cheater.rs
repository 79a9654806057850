//! A cheating miner is singled out, slashed and unpaid: a dev node, the embedded S3 server, the
//! orchestrator, 3 stages × 2 real `iota-miner` processes training `tiny` on Shakespeare, one of which
//! (a stage-0 miner) runs with `--fault perturb=0.5` (uniform noise added to every activation it
//! uploads), and one `iota-validator` (Bob, a genesis validator holding half the validator stake, which
//! is the dev run's slash quorum).
//!
//! Asserted: within the first 2 epochs the validator's `Fail` verdict on the cheater is on chain and the
//! cheater's bond is slashed (its miner record is gone); every verdict on an honest miner in those
//! epochs is `Pass`; the validator's weights for epoch 0 give the cheater nothing; epoch 0 is finalized
//! (by the validator, after the scoring window) and its emission split pays every honest miner and not
//! the cheater. The evidence object whose BLAKE3 is on chain with the `Fail` is in the bucket and says
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
use iota_storage::keys::{self, Id};

const RUN: &str = "e2e-validator";
/// Two epochs of the whole pipeline plus the scoring window on 2 shared cores: generous.
const TIMEOUT: Duration = Duration::from_secs(1200);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn a_perturbing_miner_is_failed_slashed_and_unpaid_within_two_epochs() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	prepare_data(&s3.store, &shakespeare_options(RUN, ModelConfig::tiny(), "bf16"))
		.await
		.unwrap();

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
	let orch = OrchestratorProcess::dev(&node, &s3, RUN, 8, 30_000, dir.path()).await;
	let _miners: Vec<Daemon> = SIX_MINERS
		.iter()
		.enumerate()
		.map(|(i, name)| {
			let fault: &[&str] =
				if *name == cheater_name { &["--fault", "perturb=0.5"] } else { &[] };
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
	for e in 0..=failed_at {
		for m in &honest {
			let v = verdicts(&client, e, m, &bob).await;
			assert!(v.iter().all(|v| *v == Verdict::Pass), "epoch {e}: honest miner {m} got {v:?}");
		}
	}
	// The validator's weights for epoch 0 give the cheater nothing; epoch 0 paid every honest miner and
	// not the cheater.
	let weights = client.weights(0, &bob).await.unwrap().expect("Bob set weights for epoch 0");
	assert!(weights.iter().all(|(m, w)| m != &cheater || *w == 0), "{weights:?}");
	let paid: BTreeMap<AccountId, u128> = split.miners.0.iter().cloned().collect();
	assert!(!paid.contains_key(&cheater), "the cheater was paid: {paid:?}");
	for m in &honest {
		assert!(paid.get(m).is_some_and(|a| *a > 0), "honest miner {m} unpaid: {paid:?}");
	}

	// The evidence behind the Fail is in the bucket under the validator's key, hashing to what is on chain.
	let check = client
		.spot_checks(failed_at, &cheater)
		.await
		.unwrap()
		.into_iter()
		.find(|c| c.validator == bob)
		.expect("Bob's verdict on the cheater");
	let key = keys::evidence(
		&Id::new(RUN).unwrap(),
		&Id::new(bob.to_string()).unwrap(),
		u64::from(failed_at),
		&Id::new(cheater.to_string()).unwrap(),
	);
	let bytes = s3
		.store
		.get(&key, &check.evidence)
		.await
		.expect("evidence object with the on-chain hash");
	let bundle: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
	assert_eq!(bundle["verdict"], "Fail", "{bundle}");

	// Metrics count what happened.
	let text = http_get(&metrics_addr, "/metrics").await;
	assert!(text.contains("iota_validator_checks_total{outcome=\"fail\"}"), "{text}");
	assert!(text.contains("iota_validator_verdicts_submitted_total{verdict=\"fail\"} 1"), "{text}");
	assert!(text.contains("iota_validator_weights_submitted_total"), "{text}");
	let log = validator.log_text();
	assert!(log.contains("verdict submitted"), "the validator logged no verdict");
}
