//! The JSON-RPC server in-process, without a chain: the registry is set in memory (a stand-in for the
//! chain refresh), the stage view is recorded as chain events, the object store is the embedded S3
//! server. Every kind of bad input gets its own error code and changes nothing, the server survives a
//! flood of them, and good requests still go through afterwards.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iota_model::wire::{self, Kind};
use iota_model::ModelConfig;
use iota_orchestrator::auth::{MinerStanding, Registry};
use iota_orchestrator::db::Db;
use iota_orchestrator::metrics::Metrics;
use iota_orchestrator::server::{serve, Orchestrator, ServerConfig};
use iota_orchestrator::state::{Event, Lease, State, StateConfig, WorkKind};
use iota_primitives::{ContentHash, Phase};
use iota_rpc::api::methods;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{code_of, sign, DataManifest, ErrorCode, LrSchedule, RunSpec, SignedClient};
use iota_storage::{keys, EmbeddedConfig, EmbeddedS3, ObjectStore, PresignedHttp};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use subxt_signer::sr25519::Keypair;

fn key(uri: &str) -> Keypair {
	Keypair::from_uri(&uri.parse().unwrap()).unwrap()
}

/// `n` accepted backward passes of `who` at `stage` in epoch 0 (leases `2^40 + first + i`, far above the
/// server's own ids, granted and completed as the server records them), for merge tests that run no
/// samples: they bound the weight of the miner's gradient submission and count for nothing else.
fn passes(who: &Keypair, stage: u16, first: u64, n: u64) -> Vec<Event> {
	let miner = who.public_key().to_account_id();
	let now = now_ms();
	(0..n)
		.flat_map(|i| {
			let id = (1 << 40) + first + i;
			let lease = Lease {
				id,
				miner: miner.clone(),
				stage,
				epoch: 0,
				sample: u64::MAX - id,
				kind: WorkKind::Backward,
				granted_ms: now,
				expires_at_ms: now + 60_000,
				output_key: None,
				recompute: false,
			};
			[
				Event::LeaseGranted { lease, fresh: false },
				Event::LeaseCompleted { lease: id, output: None, now_ms: now, inner_step: 0 },
			]
		})
		.collect()
}

/// The chain's view of stage 0 in epoch 0 (round 0) with `members`, in `phase`, as an event.
fn stage_zero(members: &[iota_rpc::AccountId], phase: Phase) -> Event {
	Event::ChainStage {
		stage: 0,
		epoch: 0,
		phase,
		round: 0,
		members: members.to_vec(),
		block: 2,
		now_ms: now_ms(),
	}
}

struct World {
	orch: Arc<Orchestrator>,
	url: String,
	spec: RunSpec,
	http: PresignedHttp,
	_s3: EmbeddedS3,
	_dir: tempfile::TempDir,
}

async fn world() -> World {
	world_holding(ServerConfig::default().work_wait_ms).await
}

/// [`world`] with an idle `iota_getWork` held up to `work_wait_ms`.
async fn world_holding(work_wait_ms: u64) -> World {
	let dir = tempfile::tempdir().unwrap();
	let s3 = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3"))).await.unwrap();
	let store = ObjectStore::connect(s3.store_config()).await.unwrap();
	let run = keys::Id::new("srv").unwrap();
	let shard = store
		.put(&keys::data_shard(&run, 0), Bytes::from(vec![0u8; 8 * 9 * 4]))
		.await
		.unwrap();
	let spec = RunSpec {
		init: None,
		run: "srv".into(),
		model: ModelConfig::tiny(),
		seed: 1,
		encoding: "f32".into(),
		adamw: iota_model::optim::AdamW::default(),
		lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
		max_norm: None,
		merge_codec: Default::default(),
		training: Default::default(),
		data: DataManifest {
			tokenizer: shard.clone(),
			seq_len: 8,
			batch_rows: 2,
			rows_per_shard: 8,
			shards: vec![shard],
			heldout: None,
		},
	};
	let state = State::new(StateConfig {
		run: run.clone(),
		stages: 3,
		backward_quota: 4,
		lease_ms: 60_000,
		max_leases: 2,
		tokens_per_sample: spec.tokens_per_sample(),
		boundary_shape: spec.boundary_shape(),
		param_counts: (0..3).map(|s| spec.model.stage_param_count(s).unwrap() as u64).collect(),
		merge_codec: spec.merge_codec,
		accumulate: spec.training.accumulate(),
		max_in_flight: None,
	});
	let db = Db::open(&dir.path().join("o.db"), "srv").unwrap();
	let json = String::from_utf8(spec.to_bytes()).unwrap();
	let cfg =
		ServerConfig { max_request_bytes: 64 * 1024, work_wait_ms, ..ServerConfig::default() };
	let orch = Orchestrator::new(
		state,
		db,
		store.clone(),
		spec.clone(),
		json,
		cfg,
		Metrics::new().unwrap(),
	)
	.unwrap();
	let mut reg = Registry::default();
	for (i, s) in ["//Dave", "//Eve", "//Ferdie"].iter().enumerate() {
		reg.miners
			.insert(key(s).public_key().to_account_id().0, (i as u16, MinerStanding::Active));
	}
	reg.miners
		.insert(key("//Leaver").public_key().to_account_id().0, (0, MinerStanding::Unbonding));
	reg.validators.insert(key("//Bob").public_key().to_account_id().0, true);
	orch.set_registry(reg);
	let members = |s: &str| vec![key(s).public_key().to_account_id()];
	orch.record(
		[("//Dave", 0u16), ("//Eve", 1), ("//Ferdie", 2)]
			.into_iter()
			.map(|(m, s)| Event::ChainStage {
				stage: s,
				epoch: 0,
				phase: Phase::Training,
				round: 0,
				members: members(m),
				block: 1,
				now_ms: now_ms(),
			})
			.collect(),
	)
	.unwrap();
	let (addr, _handle) = serve(orch.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
	std::mem::forget(_handle);
	let http = PresignedHttp::from_config(store.config()).unwrap();
	World { orch, url: format!("ws://{addr}"), spec, http, _s3: s3, _dir: dir }
}

async fn client(w: &World, uri: &str) -> SignedClient {
	SignedClient::connect(&w.url, key(uri), Duration::from_secs(30)).await.unwrap()
}

fn expect<T: std::fmt::Debug>(r: Result<T, jsonrpsee::core::ClientError>, code: ErrorCode) {
	match r {
		Err(e) => assert_eq!(code_of(&e), Some(code), "{e}"),
		Ok(v) => panic!("expected {code:?}, got {v:?}"),
	}
}

fn tensor(spec: &RunSpec, kind: Kind, shape: (usize, usize, usize)) -> Bytes {
	let v: Vec<f32> = (0..shape.0 * shape.1 * shape.2).map(|i| i as f32 / 10.0).collect();
	let x = candle_core::Tensor::from_vec(v, shape, &candle_core::Device::Cpu).unwrap();
	Bytes::from(wire::encode(&x, kind, spec.wire_encoding().unwrap()).unwrap())
}

/// A well-formed activation of the run's boundary shape, uploaded through a forward's `output` PUT:
/// the reference its submission carries, and the bytes.
async fn upload_activation(w: &World, output: &ObjectPut) -> (TensorRef, Bytes) {
	let [b, t, width] = w.spec.boundary_shape().map(|x| x as usize);
	let good = tensor(&w.spec, Kind::Activation, (b, t, width));
	let hash = w.http.put(&output.put, good.clone()).await.unwrap();
	let tref = TensorRef {
		key: output.key.clone(),
		hash,
		size: good.len() as u64,
		shape: vec![b as u64, t as u64, width as u64],
	};
	(tref, good)
}

fn fingerprint(w: &World) -> String {
	let s = w.orch.status();
	format!("{:?}{:?}{:?}", s.stages, s.tokens_trained, s.wire_bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_has_its_code_and_changes_nothing() {
	let w = world().await;
	let dave = client(&w, "//Dave").await;
	let Work::Forward(f) = dave.get_work(0).await.unwrap() else { panic!("forward") };
	assert!(f.data.is_some() && f.input.is_none());
	let before = fingerprint(&w);
	let [b, t, width] = w.spec.boundary_shape().map(|x| x as usize);

	// Envelope.
	let raw = dave.raw();
	let s = sign(&key("//Dave"), methods::RELEASE_LEASE, ReleaseLease { lease: 999 }, 5, now_ms())
		.unwrap();
	let mut forged = s.clone();
	forged.body.lease = 998;
	expect(
		raw.request::<(), _>(methods::RELEASE_LEASE, rpc_params![forged]).await,
		ErrorCode::BadSignature,
	);
	let wrong_method =
		sign(&key("//Dave"), methods::GET_WORK, ReleaseLease { lease: 999 }, 6, now_ms()).unwrap();
	expect(
		raw.request::<(), _>(methods::RELEASE_LEASE, rpc_params![wrong_method]).await,
		ErrorCode::BadSignature,
	);
	let stale = sign(
		&key("//Dave"),
		methods::RELEASE_LEASE,
		ReleaseLease { lease: f.lease },
		7,
		now_ms() + 31_000,
	)
	.unwrap();
	expect(
		raw.request::<(), _>(methods::RELEASE_LEASE, rpc_params![stale]).await,
		ErrorCode::StaleTimestamp,
	);
	// Roles and stages.
	expect(client(&w, "//Nobody").await.get_work(0).await, ErrorCode::NotRegistered);
	expect(client(&w, "//Leaver").await.get_work(0).await, ErrorCode::WrongRole);
	expect(client(&w, "//Bob").await.get_work(0).await, ErrorCode::WrongRole);
	expect(dave.get_work(2).await, ErrorCode::WrongStage);
	expect(
		dave.presign_put("v1/runs/srv/validators/x/epochs/00000000/evidence/y".into())
			.await,
		ErrorCode::WrongRole,
	);
	// Leases and submissions.
	expect(dave.submit_activation(f.lease + 100, None).await, ErrorCode::Unknown);
	expect(client(&w, "//Eve").await.submit_activation(f.lease, None).await, ErrorCode::Invalid);
	expect(dave.report_loss(f.lease, 1.0).await, ErrorCode::WrongStage);
	let (tref, good) = upload_activation(&w, &f.output).await;
	expect(
		dave.submit_activation(
			f.lease,
			Some(TensorRef { hash: ContentHash::of(b"x"), ..tref.clone() }),
		)
		.await,
		ErrorCode::HashMismatch,
	);
	expect(
		dave.submit_activation(f.lease, Some(TensorRef { shape: vec![1, 2, 3], ..tref.clone() }))
			.await,
		ErrorCode::ShapeMismatch,
	);
	expect(
		dave.submit_activation(f.lease, Some(TensorRef { shape: vec![1; 9], ..tref.clone() }))
			.await,
		ErrorCode::Oversize,
	);
	expect(
		dave.submit_activation(
			f.lease,
			Some(TensorRef { key: format!("{}x", tref.key), ..tref.clone() }),
		)
		.await,
		ErrorCode::Invalid,
	);
	// An upload of the wrong shape or kind under the right key.
	let wrong = tensor(&w.spec, Kind::Activation, (b, t, width + 1));
	let wh = w.http.put(&f.output.put, wrong.clone()).await.unwrap();
	expect(
		dave.submit_activation(
			f.lease,
			Some(TensorRef { hash: wh, size: wrong.len() as u64, ..tref.clone() }),
		)
		.await,
		ErrorCode::ShapeMismatch,
	);
	let grad = tensor(&w.spec, Kind::Gradient, (b, t, width));
	let gh = w.http.put(&f.output.put, grad.clone()).await.unwrap();
	expect(
		dave.submit_activation(
			f.lease,
			Some(TensorRef { hash: gh, size: grad.len() as u64, ..tref.clone() }),
		)
		.await,
		ErrorCode::ShapeMismatch,
	);
	// Merge calls in the wrong phase.
	let g = TensorRef { key: "k".into(), hash: ContentHash::of(b""), size: 4, shape: vec![1] };
	expect(
		dave.submit_gradient(GradientSubmission {
			epoch: 0,
			gradient: g,
			chunk_hashes: vec![],
			samples: 1,
		})
		.await,
		ErrorCode::WrongPhase,
	);
	expect(dave.get_shards(0).await, ErrorCode::WrongPhase);
	// Validators.
	let bob = client(&w, "//Bob").await;
	expect(bob.presign_get(vec!["k".into(); MAX_PRESIGN_KEYS + 1]).await, ErrorCode::Oversize);
	expect(
		bob.presign_get(vec!["v1/runs/other/orchestrator/spec.json".into()]).await,
		ErrorCode::Invalid,
	);
	expect(bob.presign_put("v1/runs/srv/orchestrator/spec.json".into()).await, ErrorCode::Invalid);
	expect(bob.epoch_record(5).await, ErrorCode::Unknown);
	expect(dave.epoch_record(0).await, ErrorCode::WrongRole);
	assert_eq!(
		bob.presign_get(vec!["v1/runs/srv/orchestrator/spec.json".into()])
			.await
			.unwrap()
			.len(),
		1
	);
	expect(
		dave.presign_get(vec!["v1/runs/srv/orchestrator/spec.json".into()]).await,
		ErrorCode::WrongRole,
	);

	// A flood of bad requests, and one oversize request body: the server stays up, nothing changed.
	for i in 0..300u64 {
		let bad = sign(
			&key("//Dave"),
			methods::GET_WORK,
			GetWork { stage: 0, session: None },
			1_000 + i,
			now_ms() - 120_000,
		)
		.unwrap();
		expect(
			raw.request::<Work, _>(methods::GET_WORK, rpc_params![bad]).await,
			ErrorCode::StaleTimestamp,
		);
	}
	let huge = sign(
		&key("//Bob"),
		methods::PRESIGN_GET,
		PresignGet { keys: vec!["x".repeat(100_000)] },
		1,
		now_ms(),
	)
	.unwrap();
	assert!(bob
		.raw()
		.request::<Vec<iota_storage::PresignedRequest>, _>(methods::PRESIGN_GET, rpc_params![huge])
		.await
		.is_err());
	assert_eq!(fingerprint(&w), before, "refused requests changed the state");
	let metrics = w.orch.metrics().render();
	// NonFinite and SampleCountMismatch need a merge phase: the merge test below provokes and counts
	// them; SessionSuperseded a restart (the held-request test).
	for code in ErrorCode::ALL.iter().filter(|c| {
		!matches!(
			c,
			ErrorCode::NonceReused
				| ErrorCode::LeaseExpired
				| ErrorCode::Unavailable
				| ErrorCode::NonFinite
				| ErrorCode::SampleCountMismatch
				| ErrorCode::SessionSuperseded
		)
	}) {
		assert!(metrics.contains(&format!("code=\"{}\"", code.name())), "{} counted", code.name());
	}

	// The good submission still goes through, once; its replay is refused.
	w.http.put(&f.output.put, good.clone()).await.unwrap();
	let ok = sign(
		&key("//Dave"),
		methods::SUBMIT_ACTIVATION,
		SubmitActivation { lease: f.lease, output: Some(tref.clone()), inner_step: 0 },
		77,
		now_ms(),
	)
	.unwrap();
	let ack: Ack = raw.request(methods::SUBMIT_ACTIVATION, rpc_params![ok.clone()]).await.unwrap();
	assert_eq!(ack, Ack { backward_done: 0, backward_quota: 4 });
	expect(
		raw.request::<Ack, _>(methods::SUBMIT_ACTIVATION, rpc_params![ok]).await,
		ErrorCode::NonceReused,
	);
	expect(dave.submit_activation(f.lease, Some(tref.clone())).await, ErrorCode::Unknown);
	assert_eq!(w.orch.status().stages[1].forward_queue, 1, "the activation is queued for stage 1");
	let eve = client(&w, "//Eve").await;
	let Work::Forward(f1) = eve.get_work(1).await.unwrap() else { panic!("stage 1 forward") };
	assert_eq!(f1.input.as_ref().map(|i| i.hash), Some(tref.hash));
	// In-flight limit (2 per miner) and release.
	dave.get_work(0).await.unwrap();
	let Work::Forward(f2) = dave.get_work(0).await.unwrap() else { panic!("forward") };
	assert!(matches!(
		dave.get_work(0).await.unwrap(),
		Work::Idle { reason: IdleReason::InFlightLimit, .. }
	));
	dave.release_lease(f2.lease).await.unwrap();
	let Work::Forward(again) = dave.get_work(0).await.unwrap() else { panic!("re-listed") };
	assert_eq!(again.sample, f2.sample);
	expect(dave.release_lease(f2.lease).await, ErrorCode::LeaseExpired);
	// Dave's refusals, by what was refused ("no work for now", the in-flight limit, is an answer, not a
	// refusal).
	let d = w
		.orch
		.status()
		.miners
		.into_iter()
		.find(|m| m.account == dave.account())
		.unwrap();
	assert_eq!(d.refused, d.refusals.values().sum::<u64>());
	for code in ["stale_timestamp", "nonce_reused", "unknown", "lease_expired"] {
		assert!(d.refusals.get(code).is_some_and(|n| *n > 0), "{code} in {:?}", d.refusals);
	}
	assert!(d.refusals.get("stale_timestamp").is_some_and(|n| *n >= 300));
	assert!(serde_json::from_str::<RunSpec>(&dave.run_spec().await.unwrap().json).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_mismatch_is_recorded_and_resolved_by_recomputation() {
	let w = world().await;
	// Stage 0 gets a second miner; the chain (recorded here) moves it to WeightsUploading.
	let mut reg = Registry::default();
	for (s, stage) in [("//Dave", 0u16), ("//Alt", 0), ("//Eve", 1), ("//Ferdie", 2)] {
		reg.miners
			.insert(key(s).public_key().to_account_id().0, (stage, MinerStanding::Active));
	}
	reg.validators.insert(key("//Bob").public_key().to_account_id().0, true);
	w.orch.set_registry(reg);
	let members: Vec<_> = ["//Dave", "//Alt"]
		.iter()
		.map(|s| key(s).public_key().to_account_id())
		.collect();
	let chain = |phase| stage_zero(&members, phase);
	// Each ran two backward passes in training.
	let mut events = passes(&key("//Dave"), 0, 0, 2);
	events.extend(passes(&key("//Alt"), 0, 2, 2));
	events.push(chain(Phase::WeightsUploading));
	w.orch.record(events).unwrap();
	let (dave, alt) = (client(&w, "//Dave").await, client(&w, "//Alt").await);
	let p = w.spec.model.stage_param_count(0).unwrap() as u64;
	for (c, scale) in [(&dave, 1.0f32), (&alt, 3.0)] {
		let Work::UploadGradient { epoch, output } = c.get_work(0).await.unwrap() else {
			panic!("gradient upload")
		};
		let values: Vec<f32> = (0..p).map(|j| (j % 5) as f32 * scale).collect();
		let bytes = Bytes::from(iota_protocol::f32le::to_bytes(&values));
		let chunks = chunk_hashes(MergeCodec::F32, &bytes, bytes.len() as u64 / 4);
		let hash = w.http.put(&output.put, bytes.clone()).await.unwrap();
		let gradient = TensorRef { key: output.key, hash, size: p * 4, shape: vec![p] };
		// A wrong chunk list is refused before anything is recorded.
		expect(
			c.submit_gradient(GradientSubmission {
				epoch,
				gradient: gradient.clone(),
				chunk_hashes: vec![ContentHash::of(b"x"); chunks.len()],
				samples: 2,
			})
			.await,
			ErrorCode::HashMismatch,
		);
		// So is a NaN whose chunk hashes are right (only the finiteness rule sees it), under the
		// same key: the honest upload afterwards is accepted.
		let mut nan: Vec<u8> = bytes.to_vec();
		nan[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
		let nan_chunks = chunk_hashes(MergeCodec::F32, &nan, nan.len() as u64 / 4);
		let nan_hash = w.http.put(&output.put, Bytes::from(nan)).await.unwrap();
		expect(
			c.submit_gradient(GradientSubmission {
				epoch,
				gradient: TensorRef { hash: nan_hash, ..gradient.clone() },
				chunk_hashes: nan_chunks,
				samples: 2,
			})
			.await,
			ErrorCode::NonFinite,
		);
		w.http.put(&output.put, bytes.clone()).await.unwrap();
		// More samples than the miner's accepted passes: refused, whatever the bytes.
		expect(
			c.submit_gradient(GradientSubmission {
				epoch,
				gradient: gradient.clone(),
				chunk_hashes: chunks.clone(),
				samples: 1_000,
			})
			.await,
			ErrorCode::SampleCountMismatch,
		);
		c.submit_gradient(GradientSubmission { epoch, gradient, chunk_hashes: chunks, samples: 2 })
			.await
			.unwrap();
	}
	w.orch
		.record(vec![
			chain(Phase::Merging),
			Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [3; 32] },
		])
		.unwrap();
	// Both members own the single shard; Alt uploads a wrong reduction.
	let mut right = None;
	for (c, cheat) in [(&dave, 0.0f32), (&alt, 1.0)] {
		let a = c.get_shards(0).await.unwrap();
		assert_eq!((a.submissions.len(), a.shards.len(), a.param_count), (2, 1, p));
		let task = &a.shards[0];
		let out: Vec<u8> = (task.range[0]..task.range[1])
			.flat_map(|j| {
				let sum = f64::from((j % 5) as f32) + f64::from((j % 5) as f32 * 3.0);
				(((sum / 4.0) as f32) + cheat).to_le_bytes()
			})
			.collect();
		let len = task.range[1] - task.range[0];
		let hash = w.http.put(&task.output.put, Bytes::from(out)).await.unwrap();
		let reduced =
			TensorRef { key: task.output.key.clone(), hash, size: len * 4, shape: vec![len] };
		if cheat == 0.0 {
			right = Some(hash);
		}
		c.submit_shard(SubmitShard { epoch: 0, round: a.round, shard: task.shard, reduced })
			.await
			.unwrap();
	}
	assert_eq!(
		dave.get_manifest(0).await.unwrap(),
		MergeView::Reducing { present: 0, expected: 1 }
	);
	assert!(
		w.orch.metrics().render().contains("code=\"non_finite\""),
		"the NaN gradient was counted as non_finite"
	);
	assert!(w.orch.metrics().render().contains("code=\"sample_count_mismatch\""));
	let refusals = |who: &str| {
		let a = key(who).public_key().to_account_id();
		w.orch.status().miners.into_iter().find(|m| m.account == a).unwrap().refusals
	};
	for who in ["//Dave", "//Alt"] {
		assert_eq!(refusals(who).get("sample_count_mismatch"), Some(&1), "counted against {who}");
	}
	iota_orchestrator::chain::resolve_disputes(&w.orch).await.unwrap();
	let MergeView::Ready { shards, samples, .. } = dave.get_manifest(0).await.unwrap() else {
		panic!("ready after resolution")
	};
	assert_eq!(
		(shards[0].object.hash, samples),
		(right.unwrap(), 4),
		"the recomputation picked the honest copy"
	);
	let record = client(&w, "//Bob").await.epoch_record(0).await.unwrap();
	assert_eq!(record.shard_mismatches.len(), 1);
	assert_eq!(record.shard_mismatches[0].copies.len(), 2);
	// Both attest; the chosen replica brings the checkpoint; the manifest is complete.
	let h = ContentHash::of(b"state");
	for c in [&dave, &alt] {
		let MergeView::Ready { checkpoint, .. } = c.get_manifest(0).await.unwrap() else {
			panic!("ready")
		};
		let ck = match checkpoint {
			Some(put) => {
				let hash = w.http.put(&put.put, Bytes::from_static(b"checkpoint")).await.unwrap();
				Some(TensorRef { key: put.key, hash, size: 10, shape: vec![] })
			},
			None => None,
		};
		c.submit_state_hash(SubmitStateHash { epoch: 0, state_hash: h, checkpoint: ck })
			.await
			.unwrap();
	}
	let plan = w.orch.with_state(|s| s.commit_plan(0)).expect("ready to commit");
	assert_eq!((plan.members, plan.samples, plan.state_hash), (2, 4, h));
	assert_eq!(plan.shards[0].hash, right.unwrap());
}

/// The reference's "stampede": every member of a stage calling the merge endpoints at once. 64 miners
/// of stage 0, each with one accepted backward pass, upload their gradients, then (each released by one
/// barrier) submit them in the same instant, each twice concurrently (a retrying client); then all ask
/// for their shard assignment, then for the manifest, again all at once. No call fails but the
/// duplicates (`Invalid`: already submitted), each gradient is accepted exactly once, every member sees
/// the same assignment, and the latencies are printed (p50, p99, max; on this machine, not asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_members_stampeding_the_merge_endpoints_are_each_served_once() {
	const N: usize = 64;
	let w = world().await;
	let uris: Vec<String> = (0..N).map(|i| format!("//Burst{i}")).collect();
	let mut reg = Registry::default();
	for u in &uris {
		reg.miners
			.insert(key(u).public_key().to_account_id().0, (0, MinerStanding::Active));
	}
	w.orch.set_registry(reg);
	let members: Vec<_> = uris.iter().map(|u| key(u).public_key().to_account_id()).collect();
	let chain = |phase| stage_zero(&members, phase);
	let mut events: Vec<Event> = uris
		.iter()
		.enumerate()
		.flat_map(|(i, u)| passes(&key(u), 0, i as u64, 1))
		.collect();
	events.push(chain(Phase::WeightsUploading));
	w.orch.record(events).unwrap();

	// Everyone uploads its gradient first (object store work, not the stampede).
	let p = w.spec.model.stage_param_count(0).unwrap() as u64;
	let mut ready = Vec::new();
	for (i, u) in uris.iter().enumerate() {
		let c = client(&w, u).await;
		let Work::UploadGradient { epoch, output } = c.get_work(0).await.unwrap() else {
			panic!("gradient upload")
		};
		let values: Vec<f32> = (0..p).map(|j| ((j + i as u64) % 7) as f32).collect();
		let bytes = Bytes::from(iota_protocol::f32le::to_bytes(&values));
		let chunks = chunk_hashes(MergeCodec::F32, &bytes, p);
		let hash = w.http.put(&output.put, bytes).await.unwrap();
		let gradient = TensorRef { key: output.key, hash, size: p * 4, shape: vec![p] };
		let submission = GradientSubmission { epoch, gradient, chunk_hashes: chunks, samples: 1 };
		ready.push((Arc::new(c), submission));
	}
	let clients: Vec<Arc<SignedClient>> = ready.iter().map(|(c, _)| c.clone()).collect();

	/// Runs `f(i)` for every client, all released by one barrier; returns each call's outcome and
	/// latency, and the spread of the start instants.
	async fn stampede<T, F, Fut>(n: usize, f: F) -> (Vec<(T, Duration)>, Duration)
	where
		T: Send + 'static,
		F: Fn(usize) -> Fut,
		Fut: std::future::Future<Output = T> + Send + 'static,
	{
		let barrier = Arc::new(tokio::sync::Barrier::new(n));
		let handles: Vec<_> = (0..n)
			.map(|i| {
				let (barrier, call) = (barrier.clone(), f(i));
				tokio::spawn(async move {
					barrier.wait().await;
					let start = std::time::Instant::now();
					let out = call.await;
					(out, start, start.elapsed())
				})
			})
			.collect();
		let mut out = Vec::new();
		let mut starts = Vec::new();
		for h in handles {
			let (o, start, took) = h.await.unwrap();
			starts.push(start);
			out.push((o, took));
		}
		let spread = starts.iter().max().unwrap().duration_since(*starts.iter().min().unwrap());
		(out, spread)
	}
	fn report(what: &str, mut took: Vec<Duration>, spread: Duration) {
		took.sort();
		let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
		eprintln!(
			"{what}: {} calls started within {spread:?}; latency p50 {:?}, p99 {:?}, max {:?}",
			took.len(),
			at(0.5),
			at(0.99),
			took[took.len() - 1]
		);
	}

	// 2 × 64 gradient submissions: each miner's two copies race each other and everyone else.
	let (subs, spread) = stampede(2 * N, |i| {
		let (c, s) = (clients[i % N].clone(), ready[i % N].1.clone());
		async move { c.submit_gradient(s).await.map_err(|e| code_of(&e)) }
	})
	.await;
	let mut accepted = vec![0u32; N];
	for (i, (r, _)) in subs.iter().enumerate() {
		match r {
			Ok(_) => accepted[i % N] += 1,
			Err(code) => assert_eq!(*code, Some(ErrorCode::Invalid), "submission {i}: {code:?}"),
		}
	}
	assert!(accepted.iter().all(|n| *n == 1), "each gradient accepted exactly once: {accepted:?}");
	report("submitGradient", subs.iter().map(|(_, t)| *t).collect(), spread);
	let merge = w.orch.with_state(|s| s.stage(0).unwrap().merge.clone());
	assert_eq!(merge.submissions.len(), N, "every member's gradient is in, once");

	w.orch
		.record(vec![
			chain(Phase::Merging),
			Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [5; 32] },
		])
		.unwrap();
	let (shards, spread) = stampede(N, |i| {
		let c = clients[i].clone();
		async move { c.get_shards(0).await.map_err(|e| code_of(&e)) }
	})
	.await;
	// The same round and members for everyone (presigned URLs aside: they may be signed apart).
	let members = |a: &ShardAssignment| {
		let m: Vec<_> = a
			.submissions
			.iter()
			.map(|s| (s.miner.clone(), s.samples, s.object.key.clone(), s.object.hash))
			.collect();
		(a.round, m)
	};
	let first = members(shards[0].0.as_ref().unwrap());
	assert_eq!(first.1.len(), N);
	for (r, _) in &shards {
		assert_eq!(members(r.as_ref().unwrap()), first, "one assignment");
	}
	report("getShards", shards.iter().map(|(_, t)| *t).collect(), spread);
	let bytes = serde_json::to_vec(shards[0].0.as_ref().unwrap()).unwrap().len();
	eprintln!("getShards: one answer is {bytes} bytes of JSON ({} submissions)", first.1.len());
	let (views, spread) = stampede(N, |i| {
		let c = clients[i].clone();
		async move { c.get_manifest(0).await.map_err(|e| code_of(&e)) }
	})
	.await;
	for (r, _) in &views {
		assert!(matches!(r, Ok(MergeView::Reducing { present: 0, .. })), "{r:?}");
	}
	report("getManifest", views.iter().map(|(_, t)| *t).collect(), spread);
}

/// The long poll of `iota_getWork` (`ServerConfig::work_wait_ms`): a miner with nothing to do is held
/// and handed its work the moment the sample it waits for is accepted, not at its next poll; with
/// nothing coming the hold ends at `work_wait_ms` with a retry hint of 0 (ask again at once); a hold
/// whose miner process restarts meanwhile ends at once, without a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_get_work_is_held_until_its_stage_has_work() {
	// Long enough that the head's forward below is accepted while the middle stage is held.
	let wait = Duration::from_secs(4);
	let w = world_holding(wait.as_millis() as u64).await;
	let (dave, eve) = (client(&w, "//Dave").await, client(&w, "//Eve").await);

	// Nothing queued for stage 1: held for the whole wait, then idle with a wait of 0.
	let t0 = std::time::Instant::now();
	match eve.get_work(1).await.unwrap() {
		Work::Idle { reason: IdleReason::QueueEmpty, retry_after_ms: 0 } => {},
		other => panic!("expected a held QueueEmpty, got {other:?}"),
	}
	assert!(t0.elapsed() >= wait, "answered after {:?}, before the hold's end", t0.elapsed());

	// Held again while the head's forward is accepted: answered with the forward of that sample (a
	// hold that ran out would answer idle: it plans again only when woken).
	let held = tokio::spawn(async move { eve.get_work(1).await.unwrap() });
	let Work::Forward(f) = dave.get_work(0).await.unwrap() else { panic!("forward") };
	let (tref, _) = upload_activation(&w, &f.output).await;
	dave.submit_activation(f.lease, Some(tref)).await.unwrap();
	match held.await.unwrap() {
		Work::Forward(g) => assert_eq!((g.stage, g.sample), (1, f.sample)),
		other => panic!("expected the middle stage's forward, got {other:?}"),
	}

	// A request held while its miner's process restarts is answered idle once the new session is
	// applied, and is never granted a lease. The restart releases what the earlier process held (the
	// forward above), and the new process is handed it.
	let eve = std::sync::Arc::new(client(&w, "//Eve").await);
	let old = eve.get_work_in(1, 7).await.unwrap();
	assert!(matches!(old, Work::Idle { reason: IdleReason::QueueEmpty, .. }), "{old:?}");
	let t0 = std::time::Instant::now();
	let old = tokio::spawn({
		let eve = eve.clone();
		async move { eve.get_work_in(1, 7).await.unwrap() }
	});
	// The old request is held before the new one arrives (arriving after it, it is refused: below).
	tokio::time::sleep(Duration::from_secs(1)).await;
	match eve.get_work_in(1, 8).await.unwrap() {
		Work::Forward(g) => assert_eq!((g.stage, g.sample), (1, f.sample)),
		other => panic!("expected the new process to get the released forward, got {other:?}"),
	}
	match old.await.unwrap() {
		Work::Idle { reason: IdleReason::QueueEmpty, retry_after_ms: 0 } => {},
		other => panic!("expected the superseded hold to end idle, got {other:?}"),
	}
	assert!(t0.elapsed() < wait, "the superseded hold ran to its end ({:?})", t0.elapsed());
	// A request of the earlier process that arrives only now is refused, not taken for a restart
	// back to it: the new process keeps its lease.
	// Nor does it show the miner live: its last request stays the new process's. (The held request
	// above does not either, but the new process's request marks the account at that moment too.)
	let restarts = w.orch.status().miners.iter().map(|m| m.restarts).sum::<u64>();
	let seen = || {
		let st = w.orch.status();
		st.miners.iter().find(|m| m.account == eve.account()).map(|m| m.last_seen_ms)
	};
	let seen_before = seen();
	assert!(seen_before.is_some(), "Eve's account is not in the status");
	tokio::time::sleep(Duration::from_millis(20)).await;
	expect(eve.get_work_in(1, 7).await, ErrorCode::SessionSuperseded);
	assert_eq!(w.orch.status().miners.iter().map(|m| m.restarts).sum::<u64>(), restarts);
	assert_eq!(seen(), seen_before, "a superseded request marked its miner live");
	assert!(w.orch.metrics().render().contains("code=\"session_superseded\""));

	// Not held at all with a wait of 0: the old poll, with its retry hint.
	let w = world_holding(0).await;
	let eve = client(&w, "//Eve").await;
	match eve.get_work(1).await.unwrap() {
		Work::Idle { reason: IdleReason::QueueEmpty, retry_after_ms } => {
			assert_eq!(retry_after_ms, ServerConfig::default().retry_ms)
		},
		other => panic!("expected QueueEmpty, got {other:?}"),
	}
}
