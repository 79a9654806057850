//! The orchestrator against a real dev node and the embedded S3 server: three miners registered on
//! chain (one per stage) pull work over signed JSON-RPC, upload real wire tensors of the `tiny` preset
//! through presigned URLs, and complete a whole epoch (forward, loss, backward, gradient upload,
//! butterfly merge, state attestation, `commit_merge` on chain, pathway log). On the way: a lease expires
//! and its item is re-listed; a replayed request (NonceReused), a forged one (BadSignature), a stale one,
//! unregistered and wrong-role callers, a wrong stage, an unknown lease and an oversize key are refused
//! with their own codes and counted in the metrics. At the end a miner registered mid-run (its extrinsic
//! waited for the best block only) is served within two blocks of its registration.
//!
//! ```sh
//! cargo build -p iota-orchestrator        # the node binary must exist too (scripts/test.sh builds it)
//! cargo test -p iota-e2e --test orchestrator_flow -- --ignored --nocapture
//! ```

use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;
use iota_rpc::api::methods;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{code_of, sign, ErrorCode, PathwayLog, SignedClient};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

const RUN: &str = "e2e-flow";
const T: Duration = Duration::from_secs(120);

fn expect_code<T: std::fmt::Debug>(r: Result<T, jsonrpsee::core::ClientError>, code: ErrorCode) {
	match r {
		Err(e) => assert_eq!(code_of(&e), Some(code), "{e}"),
		Ok(v) => panic!("expected {code:?}, got {v:?}"),
	}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node and iota-orchestrator (build both first; see the file's docs)"]
async fn signed_flow_expiry_refusals_and_a_full_epoch() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	let spec = tiny_spec(&s3.store, RUN).await;
	let registered = register_miners(&client, &["dave", "eve", "ferdie"]).await;
	let mut stages: Vec<u16> = registered.iter().map(|(_, s)| *s).collect();
	stages.sort();
	assert_eq!(stages, vec![0, 1, 2], "one miner per stage");

	let dir = work_dir();
	let orch = OrchestratorProcess::dev(&node, &s3, RUN, 2, 3_000, dir.path()).await;
	let watcher =
		SignedClient::connect(&orch.url, Signer::dev("bob").unwrap().keypair().clone(), T)
			.await
			.unwrap();
	let mut phases = watcher.subscribe_phases().await.unwrap();
	wait_for("the registry and stages in status", T, || async {
		let s = watcher.status().await.ok()?;
		s.stages.iter().all(|st| st.miners.len() == 1).then_some(())
	})
	.await;
	// The chain now commits to the spec.
	let cfg = client.run_config().await.unwrap().unwrap();
	assert_eq!(cfg.model_hash.0, spec.hash().0);
	assert_eq!(cfg.backward_quota, 2);

	let mut miners = Vec::new();
	for (signer, stage) in registered {
		miners.push(Miner::connect(&orch.url, signer, stage, spec.clone(), s3.http()).await);
	}
	miners.sort_by_key(|m| m.stage);
	let head = &miners[0];

	// ---- refusals -----------------------------------------------------------------------------
	let raw = head.rpc.raw();
	let signed = sign(
		head.signer.keypair(),
		methods::GET_WORK,
		GetWork { stage: 0, session: None },
		42,
		now_ms(),
	)
	.unwrap();
	let first: Work = raw.request(methods::GET_WORK, rpc_params![signed.clone()]).await.unwrap();
	let Work::Forward(first) = first else { panic!("the head gets a forward, got {first:?}") };
	assert_eq!(first.sample, 0);
	expect_code(
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![signed.clone()]).await,
		ErrorCode::NonceReused,
	);
	let mut forged = sign(
		head.signer.keypair(),
		methods::GET_WORK,
		GetWork { stage: 0, session: None },
		43,
		now_ms(),
	)
	.unwrap();
	forged.account = miners[1].account();
	expect_code(
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![forged]).await,
		ErrorCode::BadSignature,
	);
	let stale = sign(
		head.signer.keypair(),
		methods::GET_WORK,
		GetWork { stage: 0, session: None },
		44,
		now_ms() - 60_000,
	)
	.unwrap();
	expect_code(
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![stale]).await,
		ErrorCode::StaleTimestamp,
	);
	let alice =
		SignedClient::connect(&orch.url, Signer::dev("alice").unwrap().keypair().clone(), T)
			.await
			.unwrap();
	expect_code(alice.get_work(0).await, ErrorCode::NotRegistered);
	expect_code(watcher.get_work(0).await, ErrorCode::WrongRole);
	expect_code(head.rpc.get_work(1).await, ErrorCode::WrongStage);
	expect_code(head.rpc.submit_activation(999_999, None).await, ErrorCode::Unknown);
	let long = TensorRef {
		key: "k".repeat(MAX_KEY_LEN + 1),
		hash: iota_primitives::ContentHash::of(b""),
		size: 1,
		shape: vec![1],
	};
	expect_code(head.rpc.submit_activation(first.lease, Some(long)).await, ErrorCode::Oversize);
	expect_code(watcher.epoch_record(99).await, ErrorCode::Unknown);
	// A hash that is not the upload's.
	let bytes = head.tensor(iota_model::wire::Kind::Activation, 0);
	let mut t = head.upload(&first.output, bytes, spec.boundary_shape().to_vec()).await;
	t.hash = iota_primitives::ContentHash::of(b"other");
	expect_code(head.rpc.submit_activation(first.lease, Some(t)).await, ErrorCode::HashMismatch);
	let m = http_get(&orch.metrics_addr, "/metrics").await;
	for code in [
		"nonce_reused",
		"bad_signature",
		"stale_timestamp",
		"not_registered",
		"wrong_role",
		"wrong_stage",
		"unknown",
		"oversize",
		"hash_mismatch",
	] {
		assert!(
			m.contains(&format!("iota_orchestrator_refusals_total{{code=\"{code}\"}}")),
			"{code} counted:\n{m}"
		);
	}

	// ---- a lease expires and its item is re-listed ----------------------------------------------
	tokio::time::sleep(Duration::from_millis(3_800)).await;
	let out = head
		.upload(
			&first.output,
			head.tensor(iota_model::wire::Kind::Activation, 0),
			spec.boundary_shape().to_vec(),
		)
		.await;
	expect_code(head.rpc.submit_activation(first.lease, Some(out)).await, ErrorCode::LeaseExpired);
	let s = watcher.status().await.unwrap();
	assert!(
		s.miners.iter().any(|m| m.account == head.account() && m.leases_expired == 1),
		"{:?}",
		s.miners
	);
	assert!(http_get(&orch.metrics_addr, "/metrics")
		.await
		.contains("iota_orchestrator_leases_expired_total 1"));

	// ---- two samples, forward and back ----------------------------------------------------------
	let mut seen = Vec::new();
	for _ in 0..2 {
		let Work::Forward(f) = head.next_work(T).await else { panic!("forward") };
		seen.push(f.sample);
		head.forward(&f, 0.0).await;
	}
	assert_eq!(seen, vec![0, 1], "the re-listed sample 0 comes first");
	assert_eq!(
		head.work().await,
		// Held for the orchestrator's --work-wait-ms, then answered with a wait of 0.
		Work::Idle { reason: IdleReason::QuotaIssued, retry_after_ms: 0 }
	);
	for _ in 0..2 {
		let Work::Forward(f) = miners[1].next_work(T).await else { panic!("forward at stage 1") };
		assert!(f.input.is_some());
		miners[1].forward(&f, 0.0).await;
	}
	for loss in [3.0, 4.0] {
		let Work::Forward(f) = miners[2].next_work(T).await else { panic!("forward at the tail") };
		assert!(f.data.is_some(), "the tail gets its targets");
		miners[2].forward(&f, loss).await;
	}
	for m in [&miners[1], &miners[0]] {
		for _ in 0..2 {
			let Work::Backward(b) = m.next_work(T).await else {
				panic!("backward at stage {}", m.stage)
			};
			assert_eq!(b.forward_by, m.account());
			let ack = m.backward(&b).await;
			assert!(ack.backward_done >= 1 && ack.backward_quota == 2);
		}
	}

	// ---- merge, stage by stage (the tail first) -------------------------------------------------
	// Every gradient goes in first: a member with accepted passes that asks nothing for a lease's
	// length (3 s here) after its stage's uploads opened is taken for gone (`State::gone_miners`), and
	// one merge takes longer than that.
	for m in miners.iter().rev() {
		let Work::UploadGradient { epoch, output } = m.next_work(T).await else {
			panic!("gradient upload at stage {}", m.stage)
		};
		assert_eq!(epoch, 0);
		m.submit_gradient(0, &output, 2).await;
	}
	for m in miners.iter().rev() {
		let h = m.merge(0, T).await;
		wait_for("the merge committed on chain", T, || async {
			matches!(m.rpc.get_manifest(0).await.ok()?, MergeView::Committed { state_hash } if state_hash == h).then_some(())
		})
		.await;
		// The orchestrator reports the commit once it is in a best block; the client reads finalized state.
		let manifest = wait_for("the manifest finalized", T, || async {
			client.merge_manifest(0, m.stage).await.ok()?
		})
		.await;
		assert_eq!((manifest.members, manifest.samples, manifest.state_hash.0), (1, 2, h.0));
		assert!(manifest.checkpoint.is_some());
	}
	let status = wait_for("epoch 0 complete", T, || async {
		let s = watcher.status().await.ok()?;
		(!s.epochs.is_empty()).then_some(s)
	})
	.await;
	let e0 = &status.epochs[0];
	assert_eq!((e0.epoch, e0.samples), (0, 2));
	assert!((e0.loss - 3.5).abs() < 1e-6, "mean loss {}", e0.loss);
	assert!(status.stages.iter().all(|s| s.epoch == 1));

	// ---- the pathway log, as a validator reads it -----------------------------------------------
	let record = wait_for("the pathway log", T, || async {
		let r = watcher.epoch_record(0).await.ok()?;
		r.pathway_log.is_some().then_some(r)
	})
	.await;
	let log_obj = record.pathway_log.unwrap();
	let log =
		PathwayLog::from_slice(&s3.http().get(&log_obj.get, &log_obj.hash).await.unwrap()).unwrap();
	assert_eq!(log.records.len(), 2);
	assert_eq!(log.records[0].forward, miners.iter().map(|m| m.account()).collect::<Vec<_>>());
	assert_eq!(log.records.iter().map(|r| r.loss).sum::<f32>(), 7.0);
	assert_eq!(record.shard_copies.len(), 3);
	assert_eq!(record.submissions.len(), 3);
	assert!(record.shard_mismatches.is_empty());

	// ---- a miner registered mid-run is served from the best block -----------------------------------
	// The orchestrator reads registrations at the best block it acts on (money waits for finality), so a
	// new miner's getWork is accepted within two blocks of the block holding its registration.
	let included = client
		.submit_calls(
			&Signer::dev("alice").unwrap(),
			vec![iota_chain::calls::register_miner()],
			iota_chain::Wait::InBlock,
		)
		.await
		.unwrap()
		.unwrap()
		.block_number;
	let alice_stage = client
		.at_block(client.best_hash().await.unwrap())
		.miner(&alice.account())
		.await
		.unwrap()
		.expect("registered at the best block")
		.stage;
	let served_at = wait_for("the new miner served", T, || async {
		match alice.get_work(alice_stage).await {
			Err(e) if code_of(&e) == Some(ErrorCode::NotRegistered) => None,
			// The best block after the answer: an upper bound of the one it was served at.
			_ => client.best_number().await.ok(),
		}
	})
	.await;
	let finalized = client.finalized_number().await.unwrap();
	eprintln!(
		"registered in block {included}, served by best block {served_at} (finalized: {finalized})"
	);
	assert!(
		served_at <= included + 2,
		"a new miner is served within two blocks of its registration: block {included}, served at {served_at}"
	);

	// ---- phase changes were pushed --------------------------------------------------------------
	let mut events = Vec::new();
	while let Ok(Some(Ok(e))) =
		tokio::time::timeout(Duration::from_millis(200), phases.next()).await
	{
		events.push(e);
	}
	for s in 0..3u16 {
		assert!(
			events
				.iter()
				.any(|e| e.stage == s && e.phase == iota_primitives::Phase::Merging),
			"stage {s} merging pushed: {events:?}"
		);
		assert!(events.iter().any(|e| e.stage == s && e.epoch == 1), "stage {s} epoch 1 pushed");
	}
}
