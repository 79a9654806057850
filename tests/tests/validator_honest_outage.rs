//! Honest miners are never failed, and the validator rides out an orchestrator crash: a dev node, the
//! embedded S3 server, the orchestrator, 3 stages × 2 honest `iota-miner` processes training `tiny` on
//! Shakespeare, and one `iota-validator` (Bob). When epoch 0 completes on chain the orchestrator is
//! killed with SIGKILL and restarted 10 s later on the same database; once the validator's commitment to
//! its epoch-0 weights is on chain, the validator is killed with SIGKILL too and restarted on the same
//! state folder: it must reveal that very commitment (the salt survived the crash).
//!
//! Asserted over epochs 0..=3 (epoch 1's stage weights come from the checkpoints the chain's epoch-0
//! manifests name): every verdict the validator put on chain is `Pass`, each epoch has verdicts, every
//! miner is judged at least once (a miner is spot-checked in an epoch only when it served a sample of
//! it; while one reconnects after the crash its stage peer may take the whole quota), it set weights for
//! every epoch and each judged miner has a positive weight, every verdict's evidence object is in the
//! bucket with the BLAKE3 on chain (a verdict is sent only once its evidence is stored), nobody was
//! slashed, and its metrics count no failed check.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-validator -p iota-miner
//! RAYON_NUM_THREADS=1 cargo test -p iota-e2e --test validator_honest_outage -- --ignored --nocapture
//! ```
//! (`$IOTA_MINER_BIN`, `$IOTA_VALIDATOR_BIN` override the binaries' paths.)

use std::collections::BTreeMap;
use std::time::Duration;

use iota_chain::{AccountId, Signer, Verdict};
use iota_e2e::*;
use iota_model::ModelConfig;
use iota_orchestrator::data::prepare_data;
use iota_storage::keys::{self, Id};

const RUN: &str = "e2e-validator-honest";
const TIMEOUT: Duration = Duration::from_secs(900);
/// Epochs 0..=LAST_EPOCH are checked (two after the crash's epoch 1, so a miner that served no sample in
/// one epoch is still judged in another).
const LAST_EPOCH: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator, six iota-miner processes and iota-validator (see the file's docs)"]
async fn honest_miners_pass_every_check_across_an_orchestrator_crash() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	prepare_data(&s3.store, &shakespeare_options(RUN, ModelConfig::tiny(), "u8"))
		.await
		.unwrap();
	let by_stage = register_seated(&client, &SIX_MINERS).await;
	assert_eq!(by_stage.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{by_stage:?}");
	let miners: Vec<AccountId> =
		SIX_MINERS.iter().map(|n| Signer::from_uri(n).unwrap().account_id()).collect();
	let bob = Signer::dev("bob").unwrap().account_id();

	let dir = work_dir();
	let mut orch = OrchestratorProcess::dev(&node, &s3, RUN, 8, 30_000, dir.path()).await;
	let _miners: Vec<Daemon> = SIX_MINERS
		.iter()
		.enumerate()
		.map(|(i, name)| Daemon::miner(name, &node.rpc_url, &orch.url, dir.path(), i, &[]))
		.collect();
	let metrics_addr = format!("127.0.0.1:{}", free_port());
	let mut validator =
		Daemon::validator("//Bob", &node.rpc_url, &orch.url, &metrics_addr, dir.path());

	// Crash the orchestrator as epoch 0 completes; restart it on the same database.
	wait_for("epoch 0 complete", TIMEOUT, || async { client.epoch_completed_at(0).await.ok()? })
		.await;
	orch.kill9();
	tokio::time::sleep(Duration::from_secs(10)).await;
	orch.restart();
	orch.wait_ready().await;

	// Crash the validator between its commit and its reveal of epoch 0's weights; restart it on the
	// same state folder (its first log kept as validator-1.log).
	let committed = wait_for("Bob's commitment to epoch 0's weights", TIMEOUT, || async {
		client.weight_commit(0, &bob).await.ok()?
	})
	.await;
	assert!(
		client.weights(0, &bob).await.unwrap().is_none(),
		"epoch 0's weights were revealed before the validator could be restarted"
	);
	drop(validator);
	std::fs::rename(dir.path().join("validator.log"), dir.path().join("validator-1.log")).unwrap();
	validator = Daemon::validator("//Bob", &node.rpc_url, &orch.url, &metrics_addr, dir.path());

	// The validator has processed epochs 0..=LAST_EPOCH (its gauge moves after the verdicts are in).
	wait_for(&format!("the validator to process epoch {LAST_EPOCH}"), TIMEOUT, || async {
		// (None while the restarted validator is still starting.)
		let text = try_http_get(&metrics_addr, "/metrics").await?;
		let last = text.lines().find_map(|l| {
			l.strip_prefix("iota_validator_last_epoch ")?.trim().parse::<i64>().ok()
		})?;
		(last >= i64::from(LAST_EPOCH)).then_some(())
	})
	.await;
	let mut judged: BTreeMap<AccountId, usize> = BTreeMap::new();
	for epoch in 0..=LAST_EPOCH {
		// Weights and verdicts go on chain in one extrinsic that the validator waits to see in a best
		// block; the client reads finalized state.
		let w = wait_for(
			&format!("the validator's weights for epoch {epoch} finalized"),
			TIMEOUT,
			|| async { client.weights(epoch, &bob).await.ok()? },
		)
		.await;
		let w: BTreeMap<AccountId, u16> = w.into_iter().collect();
		if epoch == 0 {
			assert_eq!(
				client.weight_commit(0, &bob).await.unwrap(),
				Some(committed),
				"the restarted validator replaced its commitment instead of revealing it"
			);
		}
		let mut in_epoch = 0;
		for m in &miners {
			let v = verdicts(&client, epoch, m, &bob).await;
			assert!(
				v.iter().all(|x| *x == Verdict::Pass),
				"epoch {epoch}: honest miner {m} got {v:?}"
			);
			for check in client.spot_checks(epoch, m).await.unwrap() {
				if check.validator != bob {
					continue;
				}
				let key = keys::evidence(
					&Id::new(RUN).unwrap(),
					&Id::new(bob.to_string()).unwrap(),
					u64::from(epoch),
					&Id::new(m.to_string()).unwrap(),
				);
				s3.store.get(&key, &check.evidence).await.unwrap_or_else(|e| {
					panic!("epoch {epoch}: the evidence of the verdict on {m} is not stored: {e}")
				});
			}
			if !v.is_empty() {
				in_epoch += 1;
				*judged.entry(m.clone()).or_default() += 1;
				assert!(
					w.get(m).is_some_and(|x| *x > 0),
					"epoch {epoch}: judged miner {m} weighted {:?}",
					w.get(m)
				);
			}
		}
		assert!(in_epoch > 0, "epoch {epoch}: no miner judged");
	}
	for m in &miners {
		assert!(
			judged.contains_key(m),
			"honest miner {m} never judged in epochs 0..={LAST_EPOCH}: {judged:?}"
		);
	}
	for m in &miners {
		assert!(client.miner(m).await.unwrap().is_some(), "honest miner {m} lost its seat");
	}
	let text = http_get(&metrics_addr, "/metrics").await;
	assert!(!text.contains("iota_validator_checks_total{outcome=\"fail\"}"), "{text}");
	assert!(text.contains("iota_validator_checks_total{outcome=\"pass\"}"), "{text}");
	eprintln!(
		"{}",
		text.lines()
			.filter(|l| l.starts_with("iota_validator_"))
			.collect::<Vec<_>>()
			.join("\n")
	);
	assert!(validator.log_text().contains("epoch processed"));
}
