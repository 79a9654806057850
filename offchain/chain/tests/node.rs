//! Against a real `iota-node --dev`: register a miner and a validator through iota-chain, read the stage
//! back, watch the finalized event stream, and see pallet errors by name (directly and through sudo);
//! batches (`batch_all`) that wait for a best block only, and the client's nonce counter; and a client
//! given two nodes of one chain that goes on reading through the second when the first is killed.
//!
//! Needs the node binary built with its WASM runtime, so it is ignored by default:
//!
//! ```sh
//! cargo build -p iota-node          # without SKIP_WASM_BUILD
//! cargo test -p iota-chain --test node -- --ignored
//! ```
//!
//! The binary is `$IOTA_NODE_BIN`, or `iota-node` in the target directory this test was built into
//! (`iota_e2e::DevNode` starts it).

use futures_util::StreamExt;
use iota_chain::{Error, IotaClient, IotaEvent, Signer};
use iota_e2e::{free_port, DevNode};
use std::time::{Duration, Instant};

/// How long the debug node may take to start answering RPC.
const STARTUP: Duration = iota_e2e::NODE_STARTUP;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the iota-node binary built with its WASM runtime (see the file's docs)"]
async fn register_read_back_and_typed_errors() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let alice = Signer::dev("alice").unwrap();
	let dave = Signer::dev("dave").unwrap();
	let eve = Signer::dev("eve").unwrap();
	let ferdie = Signer::dev("ferdie").unwrap();

	// Genesis: the development preset.
	let cfg = client.run_config().await.unwrap().expect("the dev chain has a run config");
	assert_eq!(cfg.stages, 3);
	assert_eq!(client.orchestrator().await.unwrap(), Some(alice.account_id()));
	let genesis_validators: Vec<_> =
		client.validators().await.unwrap().into_iter().map(|(a, _)| a).collect();
	assert!(genesis_validators.contains(&Signer::dev("bob").unwrap().account_id()));
	assert!(genesis_validators.contains(&Signer::dev("charlie").unwrap().account_id()));
	assert!(client.miners().await.unwrap().is_empty());

	let mut events = client.finalized_events().await.unwrap();

	// A miner registers and gets a stage.
	let included = client.register_miner(&dave).await.unwrap();
	let stage = included
		.events
		.iter()
		.find_map(|e| match e {
			IotaEvent::MinerRegistered { who, stage, .. } if *who == dave.account_id() => {
				Some(*stage)
			},
			_ => None,
		})
		.expect("MinerRegistered for dave");
	assert!(stage < cfg.stages);
	let record = client.miner(&dave.account_id()).await.unwrap().expect("dave is a miner");
	assert_eq!(record.stage, stage);
	assert_eq!(record.bond, cfg.miner_bond);
	assert_eq!(client.stage_members(stage).await.unwrap(), vec![dave.account_id()]);
	assert_eq!(client.miners().await.unwrap().len(), 1);

	// The finalized event stream saw it too.
	let seen = tokio::time::timeout(Duration::from_secs(60), async {
		while let Some(block) = events.next().await {
			let block = block.unwrap();
			if block.events.iter().any(
				|e| matches!(e, IotaEvent::MinerRegistered { who, .. } if *who == dave.account_id()),
			) {
				return block.number;
			}
		}
		panic!("finalized event stream ended");
	})
	.await
	.expect("MinerRegistered in a finalized block within 60 s");
	assert!(seen > 0);

	// A validator registers with the minimum stake.
	client.register_validator(&eve, cfg.min_validator_stake).await.unwrap();
	let v = client.validator(&eve.account_id()).await.unwrap().expect("eve is a validator");
	assert_eq!(v.stake, cfg.min_validator_stake);

	// Weights from a non-validator fail with the pallet's error name, and change nothing.
	let w = vec![(dave.account_id(), 1)];
	let commitment = iota_primitives::weights_commitment(0, &ferdie.account_id(), &w, &[1; 32]);
	let err = client.commit_weights(&ferdie, 0, commitment).await.unwrap_err();
	assert_eq!(err.pallet_error(), Some("NotValidator"), "{err}");
	assert!(matches!(&err, Error::Pallet { pallet, .. } if pallet == "Iota"), "{err:?}");
	assert!(client.weight_commit(0, &ferdie.account_id()).await.unwrap().is_none());
	let err = client
		.reveal_weights(&ferdie, 0, w, [1; 32], cfg.weights_version)
		.await
		.unwrap_err();
	assert_eq!(err.pallet_error(), Some("NotValidator"), "{err}");
	assert!(client.weights(0, &ferdie.account_id()).await.unwrap().is_none());
	assert!(client.weight_committers(0).await.unwrap().is_empty());

	// A root call through sudo: an invalid config comes back as the inner pallet error.
	let mut bad = cfg.clone();
	bad.stages = 0;
	let err = client.set_run_config(&alice, bad).await.unwrap_err();
	assert_eq!(err.pallet_error(), Some("InvalidRunConfig"), "{err}");
	assert_eq!(client.run_config().await.unwrap(), Some(cfg));

	// Read-only views the dashboard uses: best height is at least the finalized one; nothing was
	// checked or slashed yet.
	let finalized = client.finalized_number().await.unwrap();
	assert!(client.best_number().await.unwrap() >= finalized);
	assert!(client.spot_checks_of_epoch(0).await.unwrap().is_empty());
	assert!(client.slashes(0).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the iota-node binary built with its WASM runtime (see the file's docs)"]
async fn batches_inclusion_waits_and_counted_nonces() {
	use iota_chain::{calls, Phase, StageReport, Wait};
	let mut node = DevNode::start();
	let client = node.client().await;
	let alice = Signer::dev("alice").unwrap();
	let bob = Signer::dev("bob").unwrap();
	let cfg = client.run_config().await.unwrap().expect("the dev chain has a run config");
	let done = StageReport { backward_done: cfg.backward_quota, gradients_submitted: 0 };

	// Nothing due sends nothing.
	assert!(client.submit_calls(&bob, vec![], Wait::InBlock).await.unwrap().is_none());

	// A batch is all or nothing: stage 0's valid phase change is undone by the unknown stage after it.
	let stage0 = client.stage(0).await.unwrap();
	assert_eq!(stage0.phase, Phase::Training);
	let err = client
		.submit_calls(
			&alice,
			vec![calls::advance_phase(0, 0, done), calls::advance_phase(99, 0, done)],
			Wait::InBlock,
		)
		.await
		.unwrap_err();
	assert_eq!(err.pallet_error(), Some("UnknownStage"), "{err}");

	// Two valid changes in one extrinsic, waiting for a best block only; the client pinned to that block
	// reads what it wrote before finality.
	let inc = client
		.submit_calls(
			&alice,
			vec![calls::advance_phase(0, 0, done), calls::advance_phase(1, 0, done)],
			Wait::InBlock,
		)
		.await
		.unwrap()
		.expect("two calls sent");
	let moved: Vec<u16> = inc
		.events
		.iter()
		.filter_map(|e| match e {
			IotaEvent::PhaseAdvanced { stage, to: Phase::WeightsUploading, .. } => Some(*stage),
			_ => None,
		})
		.collect();
	assert_eq!(moved, vec![0, 1], "{:?}", inc.events);
	let pinned = client.at_block(inc.block_hash);
	assert_eq!(pinned.stage(0).await.unwrap().phase, Phase::WeightsUploading);
	assert_eq!(pinned.stage(2).await.unwrap().phase, Phase::Training);

	// Back to back from one key, none waiting for finality: each takes the counted nonce (the finalized
	// state's would still be the first one's) and is dispatched, here to the pallet's refusal.
	for _ in 0..3 {
		let err = client
			.submit_calls(&bob, vec![calls::finalize_epoch(0)], Wait::InBlock)
			.await
			.unwrap_err();
		assert!(err.pallet_error().is_some(), "a dispatch refusal, not a nonce error: {err}");
	}
	// Another client used the key meanwhile, so the counted nonce is stale: resynced, not stuck.
	let other = IotaClient::connect(&node.rpc_url).await.unwrap();
	let err = other
		.submit_calls(&bob, vec![calls::finalize_epoch(0)], Wait::InBlock)
		.await
		.unwrap_err();
	assert!(err.pallet_error().is_some(), "{err}");
	let err = client
		.submit_calls(&bob, vec![calls::finalize_epoch(0)], Wait::Finalized)
		.await
		.unwrap_err();
	assert!(err.pallet_error().is_some(), "resynced nonce, dispatched and refused: {err}");
}

/// `--chain-rpc` with two endpoints (issue 18): the client connects to the first node; when that node is
/// killed, its reads go on through the second, a full node of the same chain (synced from the first).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the iota-node binary built with its WASM runtime (see the file's docs)"]
async fn a_client_of_two_nodes_reads_through_the_second_when_the_first_dies() {
	// The authoring node's p2p identity is fixed, so the second can name it as its bootnode.
	let key = tempfile::NamedTempFile::new().unwrap();
	std::fs::write(key.path(), "0000000000000000000000000000000000000000000000000000000000000001")
		.unwrap();
	let p2p = free_port();
	let mut first = DevNode::start_with(&[
		"--dev",
		"--node-key-file",
		key.path().to_str().unwrap(),
		&format!("--port={p2p}"),
	]);
	let boot = format!(
		"/ip4/127.0.0.1/tcp/{p2p}/p2p/12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"
	);
	let mut second = DevNode::start_with(&["--chain", "dev", "--tmp", "--bootnodes", &boot]);
	let direct = second.client().await;
	first.client().await;
	let both = IotaClient::connect(&format!("{},{}", first.rpc_url, second.rpc_url))
		.await
		.unwrap();
	// Wait until the second node has followed the first for a few blocks.
	let start = Instant::now();
	let synced = loop {
		let (a, _) = both.best_block().await.unwrap();
		let (b, _) = direct.best_block().await.unwrap();
		if a >= 3 && b >= a.saturating_sub(1) {
			break b;
		}
		assert!(start.elapsed() < STARTUP, "the second node did not sync (first {a}, second {b})");
		tokio::time::sleep(Duration::from_millis(500)).await;
	};
	let cfg = both.run_config().await.unwrap();
	assert!(cfg.is_some(), "the dev chain has a run config");
	first.kill();
	// The client's next calls fail over to the second node: the same chain, the same state.
	let (after, _) = both.best_block().await.expect("a read after the first node died");
	assert!(after >= synced, "best block {after} went back from {synced}");
	assert_eq!(both.run_config().await.unwrap(), cfg);
	assert!(both.finalized_number().await.is_ok());
}
