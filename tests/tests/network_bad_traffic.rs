//! Bad traffic against a training network: a whole network (`iota_devnet::Network`: dev node,
//! orchestrator with the embedded S3 server, 3 × 1 real `iota-miner` processes) trains the `tiny` preset
//! re-cut into 3 stages while a scripted attacker holding the head miner's dev key (a registered account)
//! takes one of the head's forward leases and sends, in order:
//!
//! | attack | refused with |
//! |---|---|
//! | the same signed `getWork` envelope twice (replay) | `NonceReused` |
//! | a `getWork` signed by the head's key but claiming another miner's account (forgery) | `BadSignature` |
//! | a signed `getWork` whose body was changed after signing | `BadSignature` |
//! | a `getWork` signed a minute ago | `StaleTimestamp` |
//! | a `getWork` from an unregistered account / from a validator / for another stage | `NotRegistered` / `WrongRole` / `WrongStage` |
//! | a result whose object key is longer than `MAX_KEY_LEN` / whose shape has rank 9 | `Oversize` |
//! | a valid activation uploaded, then reported with another hash | `HashMismatch` |
//! | an activation holding NaN uploaded and reported with its true hash | `ShapeMismatch` (the wire check: non-finite) |
//!
//! then hands the lease back. Asserted: each refusal carries its own `iota_rpc::ErrorCode` and is counted
//! in the orchestrator's metrics; the epoch of the attacked sample completes at every stage with every
//! sample in the pathway log; the attacked sample's accepted activation is neither of the attacker's
//! objects, and the bucket holds the accepted one under its key.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test network_bad_traffic -- --ignored --nocapture
//! ```
//! Logs stay in `$CARGO_TARGET_TMPDIR/network_bad_traffic/logs`.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use iota_chain::Signer;
use iota_e2e::*;
use iota_model::wire::Kind;
use iota_primitives::ContentHash;
use iota_rpc::api::methods;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{code_of, sign, ErrorCode};
use iota_storage::PresignedHttp;
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;

const RUN: &str = "e2e-net-bad-traffic";
const QUOTA: u32 = 8;
const TIMEOUT: Duration = Duration::from_secs(900);

/// The refusal's code (panics on success or a transport error), and its message.
fn refused<T: std::fmt::Debug>(
	what: &str,
	r: Result<T, jsonrpsee::core::ClientError>,
	code: ErrorCode,
) -> String {
	match r {
		Err(e) => {
			assert_eq!(code_of(&e), Some(code), "{what}: {e}");
			eprintln!("{what}: {code:?} ({e})");
			e.to_string()
		},
		Ok(v) => panic!("{what}: expected {code:?}, got {v:?}"),
	}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and three iota-miner processes (see the file's docs)"]
async fn replayed_forged_oversize_nan_and_mismatched_traffic_is_refused_while_training_completes() {
	let started = Instant::now();
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_bad_traffic");
	let mut net = TestNetwork::start(tiny_network(RUN, &dir, 3, 1, 0, QUOTA)).await;
	let chain = net.chain().await.unwrap();
	let spec = net.prepared.spec.clone();
	let (miners, _) = net.accounts();
	let watcher = net.client_as("//Bob").await;

	// Who holds which stage (once the orchestrator sees every registration).
	let stages = net
		.wait("every stage seated in the orchestrator's view", TIMEOUT, &[], || async {
			let s = watcher.status().await.ok()?;
			s.stages
				.iter()
				.all(|st| st.miners.len() == 1)
				.then(|| s.stages.iter().map(|st| st.miners[0].clone()).collect::<Vec<_>>())
		})
		.await;
	let suri_of = |a: &iota_rpc::AccountId| {
		*miners.iter().find(|s| Signer::from_uri(s).unwrap().account_id() == *a).unwrap()
	};
	let head = Signer::from_uri(suri_of(&stages[0])).unwrap();
	let other = stages[1].clone();
	let http = PresignedHttp::from_config(&net.store_config).unwrap();
	let attacker = Miner::connect(&net.orchestrator_url, head.clone(), 0, spec.clone(), http).await;
	let raw = attacker.rpc.raw();
	let work = |nonce: u64| {
		sign(
			head.keypair(),
			methods::GET_WORK,
			GetWork { stage: 0, session: None },
			nonce,
			now_ms(),
		)
		.unwrap()
	};
	let mut nonce = now_ms() * 1000 + 777_000;

	// Replay: the first envelope is served, the same one again is refused. Then poll (fresh nonces) until
	// the attacker holds a forward lease of the head (the head's own miner competes for the same items).
	let first = work(nonce);
	let served: Work = raw.request(methods::GET_WORK, rpc_params![first.clone()]).await.unwrap();
	refused(
		"replayed getWork",
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![first]).await,
		ErrorCode::NonceReused,
	);
	let f = match served {
		Work::Forward(f) => f,
		_ => {
			net.wait("a forward lease at the head", TIMEOUT, &[], || {
				nonce += 1;
				let signed = work(nonce);
				async move {
					match raw
						.request::<Work, _>(methods::GET_WORK, rpc_params![signed])
						.await
						.ok()?
					{
						Work::Forward(f) => Some(f),
						_ => None,
					}
				}
			})
			.await
		},
	};
	eprintln!(
		"attacker holds lease {} of sample {} (epoch {}) after {:?}",
		f.lease,
		f.sample,
		f.epoch,
		started.elapsed()
	);

	// Forgeries.
	nonce += 1;
	let mut forged = work(nonce);
	forged.account = other.clone();
	refused(
		"getWork claiming another account",
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![forged]).await,
		ErrorCode::BadSignature,
	);
	nonce += 1;
	let mut tampered = work(nonce);
	tampered.body.stage = 1;
	refused(
		"getWork with a changed body",
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![tampered]).await,
		ErrorCode::BadSignature,
	);
	nonce += 1;
	let stale = sign(
		head.keypair(),
		methods::GET_WORK,
		GetWork { stage: 0, session: None },
		nonce,
		now_ms() - 60_000,
	)
	.unwrap();
	refused(
		"getWork signed a minute ago",
		raw.request::<Work, _>(methods::GET_WORK, rpc_params![stale]).await,
		ErrorCode::StaleTimestamp,
	);
	refused(
		"getWork from an unregistered account",
		net.client_as("//Eve//stash").await.get_work(0).await,
		ErrorCode::NotRegistered,
	);
	refused("getWork from a validator", watcher.get_work(0).await, ErrorCode::WrongRole);
	refused("getWork for another stage", attacker.rpc.get_work(1).await, ErrorCode::WrongStage);

	// Oversized params.
	let shape = spec.boundary_shape().to_vec();
	let long = TensorRef {
		key: "k".repeat(MAX_KEY_LEN + 1),
		hash: ContentHash::of(b"x"),
		size: 1,
		shape: shape.clone(),
	};
	refused(
		"a result key over MAX_KEY_LEN",
		attacker.rpc.submit_activation(f.lease, Some(long)).await,
		ErrorCode::Oversize,
	);
	let deep = TensorRef {
		key: f.output.key.clone(),
		hash: ContentHash::of(b"x"),
		size: 1,
		shape: vec![1; MAX_SHAPE_RANK + 1],
	};
	refused(
		"a result shape of rank 9",
		attacker.rpc.submit_activation(f.lease, Some(deep)).await,
		ErrorCode::Oversize,
	);

	// An object whose hash does not match what is reported.
	let valid = attacker.tensor(Kind::Activation, f.sample);
	let mut t = attacker.upload(&f.output, valid.clone(), shape.clone()).await;
	let valid_hash = t.hash;
	t.hash = ContentHash::of(b"not the upload");
	refused(
		"a result reported with another hash",
		attacker.rpc.submit_activation(f.lease, Some(t)).await,
		ErrorCode::HashMismatch,
	);

	// A NaN activation (bf16 NaN in its last element), reported with its true hash.
	let mut nan = valid.to_vec();
	let n = nan.len();
	nan[n - 2..].copy_from_slice(&half_nan_bf16());
	let t = attacker.upload(&f.output, Bytes::from(nan), shape.clone()).await;
	let nan_hash = t.hash;
	let msg = refused(
		"a NaN activation",
		attacker.rpc.submit_activation(f.lease, Some(t)).await,
		ErrorCode::ShapeMismatch,
	);
	assert!(msg.contains("non-finite"), "the refusal names the NaN: {msg}");

	// Hand the lease back: the item is re-listed for the head's own miner.
	attacker.rpc.release_lease(f.lease).await.unwrap();

	// Every refusal is counted.
	let metrics = http_get(&net.metrics_addr, "/metrics").await;
	for code in [
		ErrorCode::NonceReused,
		ErrorCode::BadSignature,
		ErrorCode::StaleTimestamp,
		ErrorCode::NotRegistered,
		ErrorCode::WrongRole,
		ErrorCode::WrongStage,
		ErrorCode::Oversize,
		ErrorCode::HashMismatch,
		ErrorCode::ShapeMismatch,
	] {
		let label = format!("iota_orchestrator_refusals_total{{code=\"{}\"}}", code.name());
		assert!(metrics.contains(&label), "{label} counted:\n{metrics}");
	}

	// Training goes on: the attacked epoch completes at every stage with every sample.
	let epoch = f.epoch;
	net.wait(&format!("epoch {epoch} committed at every stage"), TIMEOUT, &[], || async {
		for s in 0..3u16 {
			chain.merge_manifest(epoch, s).await.ok()??;
		}
		Some(())
	})
	.await;
	let store = net.bucket().await;
	for s in 0..3u16 {
		let m = chain.merge_manifest(epoch, s).await.unwrap().unwrap();
		check_manifest(&store, &spec, s, epoch, &m, 1).await;
		assert_eq!(m.samples, QUOTA, "stage {s}: every backward pass merged");
	}
	let log = pathway_log(&net, &watcher, &store, epoch).await;
	assert_eq!(log.records.len() as u32, QUOTA, "every sample of epoch {epoch} completed");
	let r = log
		.records
		.iter()
		.find(|r| r.sample == f.sample)
		.expect("the attacked sample completed");
	let accepted = &r.forward_outputs[0];
	assert!(
		accepted.hash != nan_hash && accepted.hash != valid_hash,
		"an attacker's object was accepted"
	);
	store
		.get(&accepted.key, &accepted.hash)
		.await
		.expect("the accepted activation is in the bucket");
	net.assert_alive(&[]);
	eprintln!("done after {:?}", started.elapsed());
}

/// A bf16 quiet NaN, little-endian.
fn half_nan_bf16() -> [u8; 2] {
	0x7fc0u16.to_le_bytes()
}
