//! Restart safety (docs/design.md §7; the reference lost all state on restart): the orchestrator is killed with
//! SIGKILL twice mid-epoch and restarted on the same SQLite database. Nothing it acknowledged is lost:
//! accepted activations are still routed downstream, a loss reported before the kill is in the epoch's
//! mean, a lease granted before the kill can still be completed, a gradient submitted before the kill
//! still counts, a nonce used before the kill is still refused, and the epoch completes on chain.
//!
//! ```sh
//! cargo build -p iota-orchestrator
//! cargo test -p iota-e2e --test orchestrator_restart -- --ignored --nocapture
//! ```

use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;
use iota_rpc::api::methods;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{code_of, sign, ErrorCode, SignedClient};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

const RUN: &str = "e2e-restart";
const T: Duration = Duration::from_secs(120);

async fn connect_all(
	url: &str,
	signers: &[(Signer, u16)],
	spec: &iota_rpc::RunSpec,
	s3: &S3,
) -> Vec<Miner> {
	let mut miners = Vec::new();
	for (signer, stage) in signers {
		miners.push(Miner::connect(url, signer.clone(), *stage, spec.clone(), s3.http()).await);
	}
	miners.sort_by_key(|m| m.stage);
	miners
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node and iota-orchestrator (build both first; see the file's docs)"]
async fn kill_9_mid_epoch_loses_nothing_and_the_epoch_completes() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	let spec = tiny_spec(&s3.store, RUN).await;
	let registered = register_miners(&client, &["dave", "eve", "ferdie"]).await;
	let dir = work_dir();
	let mut orch = OrchestratorProcess::dev(&node, &s3, RUN, 2, 60_000, dir.path()).await;
	let status_client = |url: String| async move {
		SignedClient::connect(&url, Signer::dev("bob").unwrap().keypair().clone(), T)
			.await
			.unwrap()
	};
	let watcher = status_client(orch.url.clone()).await;
	wait_for("the stages in status", T, || async {
		watcher
			.status()
			.await
			.ok()?
			.stages
			.iter()
			.all(|s| s.miners.len() == 1)
			.then_some(())
	})
	.await;
	let miners = connect_all(&orch.url, &registered, &spec, &s3).await;

	// Both samples through the head and stage 1; the tail completes sample 0 and, for sample 1, gets
	// its lease and reports the loss, but has not submitted when the orchestrator dies.
	for m in &miners[..2] {
		for _ in 0..2 {
			let Work::Forward(f) = m.next_work(T).await else { panic!("forward") };
			m.forward(&f, 0.0).await;
		}
	}
	let Work::Forward(t0) = miners[2].next_work(T).await else { panic!("tail forward") };
	miners[2].forward(&t0, 3.0).await;
	let Work::Forward(t1) = miners[2].next_work(T).await else { panic!("tail forward") };
	miners[2].rpc.report_loss(t1.lease, 4.0).await.unwrap();
	let used = sign(
		miners[0].signer.keypair(),
		methods::GET_WORK,
		GetWork { stage: 0, session: None },
		7,
		now_ms(),
	)
	.unwrap();
	let _: Work = miners[0]
		.rpc
		.raw()
		.request(methods::GET_WORK, rpc_params![used.clone()])
		.await
		.unwrap();
	let before = watcher.status().await.unwrap();

	orch.kill9();
	orch.restart();
	let after = orch.wait_ready().await;
	assert_eq!(
		after
			.stages
			.iter()
			.map(|s| (s.backward_done, s.backward_queue, s.leases))
			.collect::<Vec<_>>(),
		before
			.stages
			.iter()
			.map(|s| (s.backward_done, s.backward_queue, s.leases))
			.collect::<Vec<_>>(),
		"every accepted activation and lease survived"
	);
	let miners = connect_all(&orch.url, &registered, &spec, &s3).await;
	let e = miners[0]
		.rpc
		.raw()
		.request::<Work, _>(methods::GET_WORK, rpc_params![used])
		.await
		.unwrap_err();
	assert_eq!(code_of(&e), Some(ErrorCode::NonceReused), "nonces survive a restart: {e}");
	// The tail completes the lease it got before the kill; its loss (reported before the kill) counts.
	let out = miners[2]
		.upload(
			&t1.output,
			miners[2].tensor(iota_model::wire::Kind::Gradient, t1.sample),
			spec.boundary_shape().to_vec(),
		)
		.await;
	let ack = miners[2].rpc.submit_activation(t1.lease, Some(out)).await.unwrap();
	assert_eq!(ack.backward_done, 2);
	for m in [&miners[1], &miners[0]] {
		for _ in 0..2 {
			let Work::Backward(b) = m.next_work(T).await else {
				panic!("backward at stage {}", m.stage)
			};
			m.backward(&b).await;
		}
	}

	// The tail's gradient is accepted, then the orchestrator dies again.
	let tail = &miners[2];
	let Work::UploadGradient { epoch, output } = tail.next_work(T).await else {
		panic!("gradient upload")
	};
	tail.submit_gradient(epoch, &output, 2).await;
	orch.kill9();
	orch.restart();
	let after = orch.wait_ready().await;
	assert_eq!(after.stages[2].gradients_submitted, 1, "the gradient survived");
	let miners = connect_all(&orch.url, &registered, &spec, &s3).await;
	miners[2].merge(0, T).await;
	for m in miners[..2].iter().rev() {
		let Work::UploadGradient { epoch, output } = m.next_work(T).await else {
			panic!("gradient upload at stage {}", m.stage)
		};
		m.submit_gradient(epoch, &output, 2).await;
		m.merge(epoch, T).await;
	}
	let watcher = status_client(orch.url.clone()).await;
	let status = wait_for("epoch 0 complete", T, || async {
		let s = watcher.status().await.ok()?;
		(!s.epochs.is_empty()).then_some(s)
	})
	.await;
	assert_eq!(status.epochs[0].samples, 2);
	assert!(
		(status.epochs[0].loss - 3.5).abs() < 1e-6,
		"both losses count: {}",
		status.epochs[0].loss
	);
	// Committed in a best block when the orchestrator reports the epoch; the client reads finalized state.
	wait_for("epoch 0 complete in finalized state", T, || async {
		client.epoch_completed_at(0).await.ok()?
	})
	.await;
	for s in 0..3 {
		assert!(client.merge_manifest(0, s).await.unwrap().is_some(), "stage {s} committed");
	}
}
