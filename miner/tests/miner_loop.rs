//! The miner's loop, one step at a time, against in-memory fakes (no processes): forward, backward and
//! tail items; every kind of bad input skipped with the lease released; expired leases dropped; the
//! whole merge of three replicas ending bit-identical; resynchronisation only from an attested checkpoint.

mod common;

use std::sync::{Arc, Mutex};

use candle_core::{DType, Device};
use common::*;
use iota_miner::{Committed, Metrics, Miner, MinerConfig, MinerError, Outcome, Phase};
use iota_model::optim::AdamState;
use iota_model::wire::{self, Expect, Kind};
use iota_model::{Stage, StepOptions};
use iota_primitives::ContentHash;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::AccountId;
use iota_storage::keys::Direction;

fn miner(world: &Arc<World>, chain: &Arc<FakeChain>, me: &AccountId, stage: u16) -> Miner {
	let mut spec = common::spec(&world.io);
	spec.merge_codec = world.codec;
	spec.training = world.training;
	let orch = Arc::new(FakeOrch { me: me.clone(), world: world.clone(), spec: spec.to_bytes() });
	Miner::new(
		orch,
		world.io.clone(),
		chain.clone(),
		spec,
		stage,
		MinerConfig::default(),
		Metrics::new().unwrap(),
	)
	.unwrap()
}

/// A synced miner at epoch 0.
async fn synced(world: &Arc<World>, me: &AccountId, stage: u16) -> Miner {
	let chain = Arc::new(FakeChain::default());
	let mut m = miner(world, &chain, me, stage);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(m.phase(), &Phase::Training);
	m
}

fn forward_item(
	lease: LeaseId,
	stage: u16,
	sample: u64,
	input: Option<ObjectGet>,
	data: Option<DataSlice>,
	out: String,
) -> Work {
	Work::Forward(ForwardWork {
		lease,
		epoch: 0,
		stage,
		sample,
		input,
		data,
		output: put(out),
		expires_at_ms: far(),
	})
}

#[tokio::test]
async fn body_stage_forward_then_backward_uploads_checked_tensors_and_accumulates() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 1).await;
	let input = boundary(1);
	let in_obj = store_tensor(&world.io, "in", &input, Kind::Activation);
	let out_key = act_key(1, 3, Direction::Forward, &me);
	world.push_work(&me, forward_item(1, 1, 3, Some(in_obj.clone()), None, out_key.clone()));
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);

	let calls = world.calls(&me);
	let Call::Submit(1, Some(r)) = &calls[0] else { panic!("{calls:?}") };
	assert_eq!(r.key, out_key);
	assert_eq!(r.shape, vec![ROWS as u64, SEQ as u64, 8]);
	let w = wire::decode(
		&world.io.get_obj(&out_key).unwrap(),
		&Expect::btw(Kind::Activation, 8, 1 << 20),
		DType::F32,
		&Device::Cpu,
	)
	.unwrap();
	let spec = common::spec(&world.io);
	let reference = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	let want = reference.forward(&input).unwrap().output();
	assert_eq!(
		w.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
		want.flatten_all().unwrap().to_vec1::<f32>().unwrap()
	);

	// Backward by the miner that ran the forward: uses the kept graph.
	let grad = boundary(2);
	let g_obj = store_tensor(&world.io, "grad", &grad, Kind::Gradient);
	let gi_key = act_key(1, 3, Direction::Backward, &me);
	world.push_work(
		&me,
		Work::Backward(BackwardWork {
			lease: 2,
			epoch: 0,
			stage: 1,
			sample: 3,
			forward_by: me.clone(),
			input: Some(in_obj),
			data: None,
			grad_output: g_obj,
			output: Some(put(gi_key.clone())),
			expires_at_ms: far(),
		}),
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(m.accumulated(), 1);
	let Call::Submit(2, Some(r)) = &world.calls(&me)[1] else { panic!() };
	assert_eq!(r.key, gi_key);

	// The merge upload is exactly the stage's gradient for that item.
	world.merge.lock().unwrap().expected = 1;
	world.merge.lock().unwrap().param_count = reference.param_count() as u64;
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	let Call::Gradient(s) = &world.calls(&me)[2] else { panic!() };
	assert_eq!(s.samples, 1);
	let mut r2 = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	r2.backward_from_input(&input, &grad).unwrap();
	let (g, _) = r2.take_gradient().unwrap();
	let uploaded =
		iota_miner::merge::decode_f32("g", &world.io.get_obj(&s.gradient.key).unwrap()).unwrap();
	assert_eq!(uploaded, g);
	assert!(matches!(m.phase(), Phase::Merging(_)));
}

#[tokio::test]
async fn head_reads_its_tokens_and_backward_from_another_miner_recomputes() {
	let world = Arc::new(World::default());
	let (me, other) = (account(1), account(2));
	let mut m = synced(&world, &me, 0).await;
	let spec = common::spec(&world.io);
	let out_key = act_key(0, 5, Direction::Forward, &me);
	world.push_work(
		&me,
		forward_item(1, 0, 5, None, Some(slice(&spec, &world.io, 5)), out_key.clone()),
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert!(matches!(&world.calls(&me)[0], Call::Submit(1, Some(_))));

	// A backward whose forward another miner ran: recomputed from the tokens; the head submits no output.
	world.push_work(
		&me,
		Work::Backward(BackwardWork {
			lease: 2,
			epoch: 0,
			stage: 0,
			sample: 6,
			forward_by: other,
			input: None,
			data: Some(slice(&spec, &world.io, 6)),
			grad_output: store_tensor(&world.io, "g6", &boundary(6), Kind::Gradient),
			output: None,
			expires_at_ms: far(),
		}),
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(world.calls(&me)[1], Call::Submit(2, None));
	assert_eq!(m.accumulated(), 1);
}

#[tokio::test]
async fn tail_reports_the_loss_before_submitting_its_input_gradient() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 2).await;
	let spec = common::spec(&world.io);
	let input = store_tensor(&world.io, "in", &boundary(4), Kind::Activation);
	let out_key = act_key(2, 4, Direction::Backward, &me);
	world.push_work(
		&me,
		forward_item(7, 2, 4, Some(input), Some(slice(&spec, &world.io, 4)), out_key.clone()),
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	let calls = world.calls(&me);
	let Call::Loss(7, loss) = calls[0] else { panic!("{calls:?}") };
	assert!(loss.is_finite() && loss > 0.0);
	let Call::Submit(7, Some(r)) = &calls[1] else { panic!("{calls:?}") };
	assert_eq!(r.key, out_key);
	assert_eq!(m.accumulated(), 1);
	assert!(m.metrics.render().contains("iota_miner_loss"));
}

#[tokio::test]
async fn bad_items_are_released_with_a_reason_and_the_miner_keeps_running() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 1).await;
	let out = || act_key(1, 1, Direction::Forward, &me);

	// Corrupt bytes (their hash is honest): not a wire message.
	let garbage = world.io.insert("garbage", b"not a tensor at all".to_vec());
	world.push_work(&me, forward_item(1, 1, 1, Some(garbage), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::Model(_))));

	// Wrong shape: [B, T, 4] instead of [B, T, 8].
	let narrow = boundary(1).narrow(2, 0, 4).unwrap().contiguous().unwrap();
	let narrow = store_tensor(&world.io, "narrow", &narrow, Kind::Activation);
	world.push_work(&me, forward_item(2, 1, 1, Some(narrow), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::Model(iota_model::Error::Shape { .. }))));

	// A gradient where an activation belongs.
	let wrong_kind = store_tensor(&world.io, "wk", &boundary(1), Kind::Gradient);
	world.push_work(&me, forward_item(3, 1, 1, Some(wrong_kind), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::Model(iota_model::Error::Wire(_)))));

	// NaN inside a well-formed message.
	let mut v = boundary(1).flatten_all().unwrap().to_vec1::<f32>().unwrap();
	v[5] = f32::NAN;
	let nan_t = candle_core::Tensor::from_vec(v, (ROWS, SEQ, 8), &Device::Cpu).unwrap();
	let mut msg = wire::encode(&boundary(1), Kind::Activation, iota_model::Encoding::F32).unwrap();
	// Patch the NaN into the f32 payload (the last B·T·w·4 bytes).
	let payload = nan_t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
	let n = msg.len();
	for (i, x) in payload.iter().enumerate() {
		msg[n - payload.len() * 4 + 4 * i..n - payload.len() * 4 + 4 * i + 4]
			.copy_from_slice(&x.to_le_bytes());
	}
	let nan = world.io.insert("nan", msg);
	world.push_work(&me, forward_item(4, 1, 1, Some(nan), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::Model(iota_model::Error::NonFinite { .. }))));

	// The announced hash does not match what is stored.
	let mut tampered = store_tensor(&world.io, "t", &boundary(1), Kind::Activation);
	tampered.hash = ContentHash::of(b"something else");
	world.push_work(&me, forward_item(5, 1, 1, Some(tampered), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::Storage { .. })));

	// Another stage's item; a body item without input.
	let good = store_tensor(&world.io, "good", &boundary(1), Kind::Activation);
	world.push_work(&me, forward_item(6, 2, 1, Some(good.clone()), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::BadInput(_))));
	world.push_work(&me, forward_item(7, 1, 1, None, None, out()));
	assert!(matches!(m.step().await, Err(MinerError::BadInput(_))));

	// An oversize object is refused before download.
	let mut huge = good.clone();
	huge.size = 1 << 40;
	world.push_work(&me, forward_item(8, 1, 1, Some(huge), None, out()));
	assert!(matches!(m.step().await, Err(MinerError::BadInput(_))));

	let released: Vec<_> =
		world.calls(&me).into_iter().filter(|c| matches!(c, Call::Release(_))).collect();
	assert_eq!(
		released,
		(1..=8).map(Call::Release).collect::<Vec<_>>(),
		"every bad item's lease handed back"
	);
	assert!(
		!world.calls(&me).iter().any(|c| matches!(c, Call::Submit(..))),
		"nothing bad was submitted"
	);

	// And it keeps working.
	world.push_work(&me, forward_item(9, 1, 1, Some(good), None, out()));
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert!(matches!(world.calls(&me).last(), Some(Call::Submit(9, Some(_)))));
	assert_eq!(m.lease(), None);
}

#[tokio::test]
async fn expired_work_is_dropped_not_submitted_and_later_epochs_trigger_a_resync() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 1).await;
	let input = store_tensor(&world.io, "in", &boundary(1), Kind::Activation);
	let mut w =
		forward_item(1, 1, 1, Some(input.clone()), None, act_key(1, 1, Direction::Forward, &me));
	if let Work::Forward(f) = &mut w {
		f.expires_at_ms = now_ms().saturating_sub(1);
	}
	world.push_work(&me, w);
	let e = m.step().await.unwrap_err();
	assert!(matches!(e, MinerError::LeaseExpired { lease: 1, .. }), "{e}");
	assert!(world.calls(&me).is_empty(), "an expired result is neither submitted nor released");
	m.record_error(&e);
	assert!(m.metrics.render().contains("iota_miner_leases_expired_total 1"));

	// Work of a later epoch: this miner missed a merge; it stops training and resyncs.
	let mut w = forward_item(2, 1, 1, Some(input), None, act_key(1, 1, Direction::Forward, &me));
	if let Work::Forward(f) = &mut w {
		f.epoch = 1;
	}
	world.push_work(&me, w);
	assert!(matches!(m.step().await, Err(MinerError::BadInput(_))));
	assert_eq!(m.phase(), &Phase::Unsynced);
	assert_eq!(world.calls(&me), vec![Call::Release(2)]);
}

#[tokio::test]
async fn three_replicas_merge_and_end_bit_identical() {
	three_replicas(false).await;
}

#[tokio::test]
async fn a_restarted_merge_round_gets_the_gradients_again_and_still_ends_bit_identical() {
	three_replicas(true).await;
}

async fn three_replicas(restart: bool) {
	three_replicas_with(restart, &[]).await;
}

#[tokio::test]
async fn failed_uploads_during_the_merge_are_retried_and_the_step_is_applied_once() {
	three_replicas_with(false, &["gradient", "shards/000001", "checkpoint"]).await;
}

async fn three_replicas_with(restart: bool, fail_puts: &[&str]) {
	let world = Arc::new(World::default());
	let (miners, who, p, failed) = merge_three(&world, restart, fail_puts).await;
	assert!(miners.iter().all(|m| m.epoch() == 1 && m.phase() == &Phase::Training), "{miners:?}");
	assert_eq!(failed, fail_puts.len(), "every injected failure surfaced once");
	assert!(miners.iter().all(|m| m.stage().adam_state().step == 1), "one step each");
	let hashes: Vec<_> = miners.iter().map(|m| m.stage().state_hash().unwrap()).collect();
	assert!(hashes.iter().all(|h| h == &hashes[0]), "replicas diverged");
	// Three shards, each reduced twice; every miner reduced two.
	for a in &who {
		assert_eq!(world.calls(a).iter().filter(|c| matches!(c, Call::Shard(_))).count(), 2);
	}
	// The step equals one applied by hand to the exact mean of the three sums.
	let mw = world.merge.lock().unwrap();
	let sums: Vec<(Vec<f32>, u32)> = mw
		.submissions
		.values()
		.map(|(_, s)| {
			(
				iota_miner::merge::decode_f32("g", &world.io.get_obj(&s.gradient.key).unwrap())
					.unwrap(),
				s.samples,
			)
		})
		.collect();
	let total: u32 = sums.iter().map(|s| s.1).sum();
	assert_eq!(total, 6);
	let mean: Vec<f32> = (0..p as usize)
		.map(|j| (sums.iter().map(|s| f64::from(s.0[j])).sum::<f64>() / f64::from(total)) as f32)
		.collect();
	let spec = common::spec(&world.io);
	let mut by_hand = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	by_hand.apply_gradient(&mean, &spec.step_options(0), total as usize).unwrap();
	assert_eq!(by_hand.state_hash().unwrap(), hashes[0]);
	// The seed-picked replica uploaded a checkpoint that reproduces the attested hash.
	let ck = who
		.iter()
		.flat_map(|a| world.calls(a))
		.find_map(|c| match c {
			Call::StateHash(SubmitStateHash { checkpoint: Some(r), .. }) => Some(r),
			_ => None,
		})
		.expect("one checkpoint");
	let mut joiner = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	joiner.load_checkpoint(&world.io.get_obj(&ck.key).unwrap(), &hashes[0]).unwrap();
	assert!(miners[0].metrics.render().contains("iota_miner_merges_total 1"));
	let submitted = if restart { 2 } else { 1 };
	for a in &who {
		assert_eq!(
			world.calls(a).iter().filter(|c| matches!(c, Call::Gradient(_))).count(),
			submitted
		);
	}
	assert_eq!(mw.round, u32::from(restart));
}

#[tokio::test]
async fn a_tampered_reduced_shard_is_never_applied() {
	let world = Arc::new(World::default());
	let chain = Arc::new(FakeChain::default());
	let who: Vec<AccountId> = (1..=2).map(account).collect();
	let mut miners = Vec::new();
	for (k, a) in who.iter().enumerate() {
		let mut m = miner(&world, &chain, a, 1);
		m.step().await.unwrap();
		let s = k as u64 + 1;
		world.push_work(
			a,
			Work::Backward(BackwardWork {
				lease: s,
				epoch: 0,
				stage: 1,
				sample: s,
				forward_by: account(9),
				input: Some(store_tensor(
					&world.io,
					&format!("in{s}"),
					&boundary(s),
					Kind::Activation,
				)),
				data: None,
				grad_output: store_tensor(
					&world.io,
					&format!("g{s}"),
					&boundary(50 + s),
					Kind::Gradient,
				),
				output: Some(put(act_key(1, s, Direction::Backward, a))),
				expires_at_ms: far(),
			}),
		);
		miners.push(m);
	}
	let before: Vec<_> = miners.iter().map(|m| m.stage().state_hash().unwrap()).collect();
	{
		let mut mw = world.merge.lock().unwrap();
		mw.expected = 2;
		mw.param_count = miners[0].stage().param_count() as u64;
		mw.corrupt_shard = Some(0);
	}
	let mut refused = 0;
	for _ in 0..40 {
		for m in miners.iter_mut() {
			match m.step().await {
				Err(MinerError::Storage {
					source: iota_storage::StorageError::HashMismatch { .. },
					..
				}) => refused += 1,
				Err(e) => panic!("{e}"),
				Ok(_) => {},
			}
		}
	}
	assert!(refused > 0, "the tampered shard was detected");
	assert_eq!(
		miners.iter().map(|m| m.stage().state_hash().unwrap()).collect::<Vec<_>>(),
		before,
		"nothing applied"
	);
	assert!(miners.iter().all(|m| m.epoch() == 0 && matches!(m.phase(), Phase::Merging(_))));
}

#[tokio::test]
async fn a_joining_miner_loads_only_the_attested_checkpoint_and_never_trains_without_one() {
	let world = Arc::new(World::default());
	let spec = common::spec(&world.io);
	// The stage's state after epoch 0's merge, as the replicas attested it.
	let mut src = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	src.apply_gradient(&vec![1e-3; src.param_count()], &StepOptions::default(), 4)
		.unwrap();
	let attested = ContentHash(src.state_hash().unwrap());
	let good = world.io.insert("ck-good", src.to_checkpoint().unwrap());
	let other = Stage::new(&spec.model, 1, 7, DType::F32, &Device::Cpu).unwrap();
	let forged = world.io.insert("ck-forged", other.to_checkpoint().unwrap());

	let chain = Arc::new(FakeChain::default());
	*chain.epoch.lock().unwrap() = 1;
	let me = account(1);
	let mut m = miner(&world, &chain, &me, 1);

	// No manifest yet, then a manifest without checkpoint: wait, never train.
	assert!(matches!(m.step().await.unwrap(), Outcome::Idle(_)));
	chain
		.committed
		.lock()
		.unwrap()
		.insert(0, Committed { epoch: 0, state_hash: attested, checkpoint: None });
	assert!(matches!(m.step().await.unwrap(), Outcome::Idle(_)));
	assert_eq!(m.phase(), &Phase::Unsynced);

	// A checkpoint whose state is not the attested one (its object hash is honest).
	chain.committed.lock().unwrap().insert(
		0,
		Committed { epoch: 0, state_hash: attested, checkpoint: Some((forged.key, forged.hash)) },
	);
	assert!(matches!(
		m.step().await,
		Err(MinerError::Model(iota_model::Error::StateHashMismatch { .. }))
	));
	assert_eq!(m.phase(), &Phase::Unsynced);

	// The checkpoint object altered after its hash was committed.
	chain.committed.lock().unwrap().insert(
		0,
		Committed {
			epoch: 0,
			state_hash: attested,
			checkpoint: Some((good.key.clone(), ContentHash::of(b"x"))),
		},
	);
	assert!(matches!(m.step().await, Err(MinerError::Storage { .. })));

	chain.committed.lock().unwrap().insert(
		0,
		Committed { epoch: 0, state_hash: attested, checkpoint: Some((good.key, good.hash)) },
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(m.phase(), &Phase::Training);
	assert_eq!(m.epoch(), 1);
	assert_eq!(ContentHash(m.stage().state_hash().unwrap()), attested);
	assert!(world.calls(&me).is_empty(), "no work was done while unsynced");
}

#[tokio::test]
async fn head_refuses_data_slices_the_run_spec_does_not_back() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 0).await;
	let spec = common::spec(&world.io);
	let out = act_key(0, 2, Direction::Forward, &me);
	// The wrong rows for the sample.
	let mut s = slice(&spec, &world.io, 2);
	s.row_offset += 2;
	world.push_work(&me, forward_item(1, 0, 2, None, Some(s), out.clone()));
	assert!(matches!(m.step().await, Err(MinerError::BadInput(msg)) if msg.contains("places it")));
	// A shard object the spec does not list.
	let mut s = slice(&spec, &world.io, 2);
	s.object = world.io.insert("other-shard", vec![0; 4 * ROWS_PER_SHARD * (SEQ + 1)]);
	world.push_work(&me, forward_item(2, 0, 2, None, Some(s), out.clone()));
	assert!(
		matches!(m.step().await, Err(MinerError::BadInput(msg)) if msg.contains("run spec lists"))
	);
	// No data at all.
	world.push_work(&me, forward_item(3, 0, 2, None, None, out.clone()));
	assert!(matches!(m.step().await, Err(MinerError::BadInput(_))));
	assert_eq!(world.calls(&me), vec![Call::Release(1), Call::Release(2), Call::Release(3)]);
	world.push_work(&me, forward_item(4, 0, 2, None, Some(slice(&spec, &world.io, 2)), out));
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
}

#[test]
fn fault_options_parse_strictly() {
	use iota_miner::Fault;
	assert_eq!("perturb=0.5".parse::<Fault>(), Ok(Fault::Perturb(0.5)));
	assert_eq!("perturb-state=0.1".parse::<Fault>(), Ok(Fault::PerturbState(0.1)));
	assert_eq!("ignore-challenges".parse::<Fault>(), Ok(Fault::IgnoreChallenges));
	assert_eq!("pseudo-gradient=1.5".parse::<Fault>(), Ok(Fault::ScalePseudoGradient(1.5)));
	assert_eq!("slow-upload=8000@1".parse::<Fault>(), Ok(Fault::SlowUpload { ms: 8000, stage: 1 }));
	for bad in [
		"slow-upload=0@1",
		"slow-upload=8000",
		"slow-upload=x@1",
		"slow-upload=8000@-1",
		"perturb=0",
		"perturb=-1",
		"perturb=nan",
		"perturb=x",
		"flip=1",
		"perturb",
		"perturb-state=0",
		"perturb-state=inf",
		"pseudo-gradient=1",
		"ignore-challenges=1",
	] {
		assert!(bad.parse::<Fault>().is_err(), "{bad}");
	}
	// The perturb-state coin is fixed and picks some steps but not all.
	let coins: Vec<bool> = (0..16).map(|k| iota_miner::perturbs_state_at(0, k)).collect();
	assert!(coins.iter().any(|c| *c) && !coins.iter().all(|c| *c), "{coins:?}");
	assert_eq!(coins, (0..16).map(|k| iota_miner::perturbs_state_at(0, k)).collect::<Vec<_>>());
}

/// With `fault-injection`, `perturb` changes what is uploaded (and only then).
#[cfg(feature = "fault-injection")]
#[tokio::test]
async fn perturb_fault_adds_noise_to_uploaded_activations() {
	let world = Arc::new(World::default());
	let chain = Arc::new(FakeChain::default());
	let spec = common::spec(&world.io);
	let mut outs = Vec::new();
	for (k, fault) in [None, Some(iota_miner::Fault::Perturb(0.5))].into_iter().enumerate() {
		let me = account(10 + k as u8);
		let orch =
			Arc::new(FakeOrch { me: me.clone(), world: world.clone(), spec: spec.to_bytes() });
		let cfg = MinerConfig { fault, ..MinerConfig::default() };
		let mut m = Miner::new(
			orch,
			world.io.clone(),
			chain.clone(),
			spec.clone(),
			1,
			cfg,
			Metrics::new().unwrap(),
		)
		.unwrap();
		m.step().await.unwrap();
		let input = store_tensor(&world.io, "in", &boundary(1), Kind::Activation);
		let key = act_key(1, 1, Direction::Forward, &me);
		world.push_work(&me, forward_item(1, 1, 1, Some(input), None, key.clone()));
		m.step().await.unwrap();
		let t = wire::decode(
			&world.io.get_obj(&key).unwrap(),
			&Expect::btw(Kind::Activation, 8, 1 << 20),
			DType::F32,
			&Device::Cpu,
		)
		.unwrap();
		outs.push(t.flatten_all().unwrap().to_vec1::<f32>().unwrap());
	}
	let max_diff = outs[0].iter().zip(&outs[1]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
	assert!(max_diff > 0.1 && max_diff <= 0.5 + 1e-6, "max |Δ| {max_diff}");
}

/// Queues for `who` the backward item `sample` of stage 1 (lease `sample`), its input activation and
/// output gradient stored under `in{sample}` / `g{sample}`, its forward run by account 9.
fn push_backward(world: &World, who: &AccountId, sample: u64) {
	let inp = store_tensor(&world.io, &format!("in{sample}"), &boundary(sample), Kind::Activation);
	let g = store_tensor(&world.io, &format!("g{sample}"), &boundary(100 + sample), Kind::Gradient);
	world.push_work(
		who,
		Work::Backward(BackwardWork {
			lease: sample,
			epoch: 0,
			stage: 1,
			sample,
			forward_by: account(9),
			input: Some(inp),
			data: None,
			grad_output: g,
			output: Some(put(act_key(1, sample, Direction::Backward, who))),
			expires_at_ms: far(),
		}),
	);
}

/// Three replicas of stage 1 (1, 2 and 3 backward items) through one merge; returns them, their
/// accounts, `P` and how many injected upload failures surfaced.
async fn merge_three(
	world: &Arc<World>,
	restart: bool,
	fail_puts: &[&str],
) -> (Vec<Miner>, Vec<AccountId>, u64, usize) {
	let chain = Arc::new(FakeChain::default());
	let who: Vec<AccountId> = (1..=3).map(account).collect();
	let mut miners = Vec::new();
	for a in &who {
		let mut m = miner(world, &chain, a, 1);
		m.step().await.unwrap();
		miners.push(m);
	}
	// Each replica does a different number of backward items (recomputed: no kept graphs).
	let mut sample = 0u64;
	for (k, a) in who.iter().enumerate() {
		for _ in 0..=k {
			sample += 1;
			push_backward(world, a, sample);
		}
	}
	let p = miners[0].stage().param_count() as u64;
	world
		.io
		.fail_puts
		.lock()
		.unwrap()
		.extend(fail_puts.iter().map(|s| s.to_string()));
	{
		let mut mw = world.merge.lock().unwrap();
		mw.expected = 3;
		mw.param_count = p;
		mw.restart_once = restart;
	}
	let mut failed = 0;
	for _ in 0..200 {
		for m in miners.iter_mut() {
			match m.step().await {
				Ok(_) => {},
				Err(MinerError::Storage {
					source: iota_storage::StorageError::Unavailable { .. },
					..
				}) => failed += 1,
				Err(e) => panic!("{e}"),
			}
		}
		if miners.iter().all(|m| m.epoch() == 1) {
			break;
		}
	}
	(miners, who, p, failed)
}

/// With a compressed merge codec the replicas still end bit-identical, on the AdamW step applied to
/// the mean of the decoded submissions as its int8 shards carry it, and the submissions are about 4x
/// (int8) or more (top-k) smaller than f32.
#[tokio::test]
async fn compressed_merges_end_bit_identical_on_the_decoded_mean() {
	for codec in [MergeCodec::Int8, MergeCodec::TopK { per_mille: 20 }] {
		let world = Arc::new(World { codec, ..World::default() });
		let (miners, _, p, _) = merge_three(&world, false, &[]).await;
		assert!(miners.iter().all(|m| m.epoch() == 1), "{codec}: {miners:?}");
		let hashes: Vec<_> = miners.iter().map(|m| m.stage().state_hash().unwrap()).collect();
		assert!(hashes.iter().all(|h| h == &hashes[0]), "{codec}: replicas diverged");
		let mw = world.merge.lock().unwrap();
		let c = gradient_chunk_elems(p);
		let sums: Vec<(Vec<f32>, u32)> = mw
			.submissions
			.values()
			.map(|(_, s)| {
				let b = world.io.get_obj(&s.gradient.key).unwrap();
				assert!(b.len() as u64 <= p + 4 * p.div_ceil(c), "{codec}: {} bytes", b.len());
				(codec.decode(&b, p, c).unwrap(), s.samples)
			})
			.collect();
		let total: u32 = sums.iter().map(|s| s.1).sum();
		let exact: Vec<f32> = (0..p as usize)
			.map(|j| {
				(sums.iter().map(|s| f64::from(s.0[j])).sum::<f64>() / f64::from(total)) as f32
			})
			.collect();
		let mut carried = Vec::new();
		for d in World::shard_table(&mw) {
			let part = &exact[d.start as usize..d.end as usize];
			let (b, _) = iota_miner::merge::shard_bytes(codec, part, p).unwrap();
			carried.extend(MergeCodec::Int8.decode(&b, d.end - d.start, c).unwrap());
		}
		let spec = common::spec(&world.io);
		let mut by_hand = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
		by_hand.apply_gradient(&carried, &spec.step_options(0), total as usize).unwrap();
		assert_eq!(by_hand.state_hash().unwrap(), hashes[0], "{codec}");
	}
}

/// Local mode: each replica takes its own inner AdamW steps (one per backward pass here), submits its
/// sample-scaled pseudo-gradient `(W_global − W_local) · samples`, and every replica applies the same
/// outer Nesterov step from the epoch's global weights along the mean pseudo-gradient: bit-identical
/// replicas, on exactly the step taken by hand, and not the sync mode's AdamW step.
#[tokio::test]
async fn local_mode_replicas_merge_pseudo_gradients_and_take_one_outer_step() {
	let training = Training::Local { accumulate: 1, outer_lr: 0.7, outer_momentum: 0.9 };
	let world = Arc::new(World { training, challenge: Mutex::new(Some(0)), ..World::default() });
	let (mut miners, who, p, _) = merge_three(&world, false, &[]).await;
	// Challenged on inner step 0 of epoch 0: the next steps of each replica upload states 0 and 1
	// (one at a time, each in a task of its own, so training goes on meanwhile), rebuilt from its
	// inner-step log, each hashing to the state it reported.
	let up = |a: &AccountId, j: usize| world.io.get_obj(&format!("inner/{a}/0/{j}")).is_some();
	// The store holds every reveal's PUT until the test lets it through: a step that awaited the
	// PUT inline would wait here until the timeout.
	let gate = Arc::new(tokio::sync::Semaphore::new(0));
	*world.io.gate_puts.lock().unwrap() = Some(("inner/".into(), gate.clone()));
	for m in &mut miners {
		tokio::time::timeout(std::time::Duration::from_secs(30), m.step())
			.await
			.expect("the step does not wait for a reveal's PUT")
			.unwrap();
	}
	for _ in 0..20 {
		tokio::task::yield_now().await;
	}
	assert!(who.iter().all(|a| !up(a, 0)), "held at the store");
	// One PUT each: the loop did not wait for it; once it ran, state 0 is up and state 1 is not
	// (it starts only on a later step, after that step saw state 0's upload finish).
	gate.add_permits(who.len());
	for _ in 0..20 {
		if who.iter().all(|a| up(a, 0)) {
			break;
		}
		tokio::task::yield_now().await;
	}
	for a in &who {
		assert!(up(a, 0) && !up(a, 1), "{a}: one state at a time");
	}
	gate.add_permits(who.len());
	for _ in 0..20 {
		if who.iter().all(|a| up(a, 0) && up(a, 1)) {
			break;
		}
		tokio::task::yield_now().await;
		for m in &mut miners {
			m.step().await.unwrap();
		}
	}
	for a in &who {
		let states = world.inner.lock().unwrap().get(&a.0).cloned().unwrap();
		for (j, (_, reported)) in states.iter().enumerate().take(2) {
			let bytes = world.io.get_obj(&format!("inner/{a}/0/{j}")).expect("revealed state");
			assert_eq!(ContentHash::of(&bytes), *reported, "{a}: state {j}");
		}
	}
	assert!(miners.iter().all(|m| m.epoch() == 1 && m.phase() == &Phase::Training), "{miners:?}");
	let hashes: Vec<_> = miners.iter().map(|m| m.stage().state_hash().unwrap()).collect();
	assert!(hashes.iter().all(|h| h == &hashes[0]), "replicas diverged");
	// Replica k took k + 1 inner steps (its inner AdamW state is its own and stays so).
	for (k, m) in miners.iter().enumerate() {
		assert_eq!(m.stage().adam_state().step, k as u64 + 1, "replica {k}");
		assert!(m.metrics.render().contains(&format!("iota_miner_inner_steps_total {}", k + 1)));
		assert_eq!(m.stage().outer_state().map(|o| o.step), Some(1));
	}
	let spec = {
		let mut s = common::spec(&world.io);
		s.training = training;
		s
	};
	let mut seed = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	let global = seed.flat_params().unwrap();
	// Each replica reported its state before every inner step and after the last (docs/design.md
	// §10): k + 2 states, the first the seed weights with fresh AdamW moments, each pass at a
	// reported state.
	let h0 = ContentHash(iota_model::optim::inner_state_hash(&global, &AdamState::new(p as usize)));
	for (k, a) in who.iter().enumerate() {
		let states = world.inner.lock().unwrap().get(&a.0).cloned().unwrap_or_default();
		assert_eq!(states.len(), k + 2, "replica {k}: states {states:?}");
		assert_eq!(states[0], (0, h0), "replica {k} began at the seed weights");
		let distinct: std::collections::BTreeSet<_> = states.iter().map(|s| s.1).collect();
		assert_eq!(distinct.len(), states.len(), "every inner step moved the state");
		// The miner's inner-step log rebuilds each reported state bit for bit (what a challenge
		// reveals), though the replica has since applied the outer step and moved to epoch 1.
		let all = (0..states.len() as u32).collect();
		let rebuilt = miners[k].inner_states_at(0, &all).unwrap();
		for (j, (_, h)) in states.iter().enumerate() {
			let s = &rebuilt[&(j as u32)];
			assert_eq!(ContentHash(s.hash()), *h, "replica {k}: state {j} rebuilt");
		}
		let past = [states.len() as u32].into();
		assert!(miners[k].inner_states_at(0, &past).is_err(), "no such state");
	}
	assert!(!world.steps.lock().unwrap().is_empty());
	// The submissions are the pseudo-gradients, replica k's scaled by its k + 1 samples.
	let mw = world.merge.lock().unwrap();
	let mut sums: Vec<(Vec<f32>, u32)> = Vec::new();
	for a in &who {
		let s = mw.submissions.values().find(|(b, _)| b == a).map(|(_, s)| s.clone()).unwrap();
		let v = iota_miner::merge::decode_f32("g", &world.io.get_obj(&s.gradient.key).unwrap())
			.unwrap();
		assert_eq!(v.len() as u64, p);
		assert!(v.iter().any(|x| *x != 0.0), "an empty pseudo-gradient");
		sums.push((v, s.samples));
	}
	assert_eq!(sums.iter().map(|s| s.1).collect::<Vec<_>>(), vec![1, 2, 3]);
	let total: u32 = sums.iter().map(|s| s.1).sum();
	let mean: Vec<f32> = (0..p as usize)
		.map(|j| (sums.iter().map(|s| f64::from(s.0[j])).sum::<f64>() / f64::from(total)) as f32)
		.collect();
	seed.use_outer_optimizer();
	let hp = training.outer().unwrap();
	seed.apply_outer(&global, &mean, &hp).unwrap();
	assert_eq!(seed.state_hash().unwrap(), hashes[0], "the outer step by hand");
	// Not the sync-mode step: the same vector through AdamW gives another state.
	let mut adam = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	adam.apply_gradient(&mean, &spec.step_options(0), total as usize).unwrap();
	assert_ne!(adam.state_hash().unwrap(), hashes[0]);
	// The attested checkpoint (weights and outer momentum) reproduces the hash on a joiner.
	let ck = who
		.iter()
		.flat_map(|a| world.calls(a))
		.find_map(|c| match c {
			Call::StateHash(SubmitStateHash { checkpoint: Some(r), .. }) => Some(r),
			_ => None,
		})
		.expect("one checkpoint");
	let mut joiner = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	joiner.use_outer_optimizer();
	joiner.load_checkpoint(&world.io.get_obj(&ck.key).unwrap(), &hashes[0]).unwrap();
}

/// Local mode through a restarted merge round: every replica submits the same pseudo-gradient again
/// (prepared once, before any outer step), the replicas end bit-identical after one outer step.
#[tokio::test]
async fn local_mode_resubmits_the_same_pseudo_gradient_when_the_round_restarts() {
	let training = Training::Local { accumulate: 1, outer_lr: 0.7, outer_momentum: 0.9 };
	let world = Arc::new(World { training, ..World::default() });
	let (miners, who, _, _) = merge_three(&world, true, &[]).await;
	assert!(miners.iter().all(|m| m.epoch() == 1 && m.phase() == &Phase::Training), "{miners:?}");
	let hashes: Vec<_> = miners.iter().map(|m| m.stage().state_hash().unwrap()).collect();
	assert!(hashes.iter().all(|h| h == &hashes[0]), "replicas diverged");
	assert!(miners.iter().all(|m| m.stage().outer_state().map(|o| o.step) == Some(1)));
	for a in &who {
		// Both rounds write the same key: the hash each submission names is what was uploaded.
		let sent: Vec<ContentHash> = world
			.calls(a)
			.iter()
			.filter_map(|c| match c {
				Call::Gradient(s) => Some(s.gradient.hash),
				_ => None,
			})
			.collect();
		assert_eq!(sent.len(), 2, "submitted in both rounds");
		assert_eq!(sent[0], sent[1], "the restarted round got the same pseudo-gradient");
	}
}

/// A miner whose passes the orchestrator forfeited after a silence (`Idle: forfeited`) drops the
/// gradient it accumulated, submits none, asks for no shards of a round it is not in (the orchestrator
/// would refuse it `Invalid`), and follows its stage's merge as a replica without samples: it ends the
/// epoch on the member's committed state.
#[tokio::test]
async fn a_miner_whose_passes_were_forfeited_follows_the_merge_without_its_gradient() {
	forfeited_during_training(Training::Sync).await;
}

/// The same in local mode, where the forfeited pass was trained into the local weights by an inner
/// step: the replica goes back to the epoch's global weights.
#[tokio::test]
async fn local_mode_a_miner_whose_passes_were_forfeited_goes_back_to_the_global_weights() {
	forfeited_during_training(Training::Local {
		accumulate: 1,
		outer_lr: 0.7,
		outer_momentum: 0.9,
	})
	.await;
}

async fn forfeited_during_training(training: Training) {
	let world = Arc::new(World { training, ..World::default() });
	let chain = Arc::new(FakeChain::default());
	let (member, silent) = (account(1), account(4));
	let mut miners = Vec::new();
	for a in [&member, &silent] {
		let mut m = miner(&world, &chain, a, 1);
		m.step().await.unwrap();
		miners.push(m);
	}
	for (k, a) in [&member, &silent].into_iter().enumerate() {
		push_backward(&world, a, k as u64 + 1);
	}
	world.push_work(&silent, Work::Idle { reason: IdleReason::Forfeited, retry_after_ms: 10 });
	// Both run their pass; then the silent one is told its pass is forfeited.
	for m in miners.iter_mut() {
		assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	}
	assert_eq!(miners[1].accumulated(), 1);
	let spec = common::spec(&world.io);
	let global = Stage::initial(&spec.model, 1, spec.seed, &training, &Device::Cpu, None)
		.unwrap()
		.flat_params()
		.unwrap();
	let local = !training.is_sync();
	assert_eq!(miners[1].stage().flat_params().unwrap() != global, local, "an inner step ran");
	assert_eq!(miners[1].step().await.unwrap(), Outcome::Worked);
	assert_eq!(miners[1].accumulated(), 0, "the forfeited gradient is dropped");
	assert_eq!(miners[1].stage().flat_params().unwrap(), global, "the epoch's global weights");
	assert!(matches!(miners[1].phase(), Phase::Merging(_)), "{:?}", miners[1].phase());
	{
		let mut mw = world.merge.lock().unwrap();
		mw.expected = 1;
		mw.param_count = miners[0].stage().param_count() as u64;
	}
	for _ in 0..200 {
		for m in miners.iter_mut() {
			m.step().await.unwrap();
		}
		if miners.iter().all(|m| m.epoch() == 1) {
			break;
		}
	}
	assert!(miners.iter().all(|m| m.epoch() == 1 && m.phase() == &Phase::Training), "{miners:?}");
	assert_eq!(miners[0].stage().state_hash().unwrap(), miners[1].stage().state_hash().unwrap());
	let calls = world.calls(&silent);
	assert!(
		!calls.iter().any(|c| matches!(
			c,
			Call::Gradient(_) | Call::GetShards(_) | Call::Shard(_) | Call::StateHash(_)
		)),
		"{calls:?}"
	);
	assert!(world.calls(&member).iter().any(|c| matches!(c, Call::GetShards(0))));
	let mw = world.merge.lock().unwrap();
	assert_eq!(mw.submissions.values().map(|(_, s)| s.samples).sum::<u32>(), 1);
}

/// A member whose merge round restarted and who was then found silent (`Idle: forfeited` when it
/// asks whether the new round wants its gradient) drops the gradient, resubmits nothing, and asks for
/// no more shards: it waits for the mean as a replica without samples.
#[tokio::test]
async fn a_member_forfeited_after_its_round_restarted_drops_its_gradient() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut m = synced(&world, &me, 1).await;
	push_backward(&world, &me, 1);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	{
		let mut mw = world.merge.lock().unwrap();
		mw.expected = 1;
		mw.param_count = m.stage().param_count() as u64;
		mw.restart_once = true;
	}
	// It uploads its gradient and enters the merge as a member.
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert!(matches!(m.phase(), Phase::Merging(s) if s.member), "{:?}", m.phase());
	// The round restarts (getShards: invalid), and asked again it is told its passes are forfeited.
	world.push_work(&me, Work::Idle { reason: IdleReason::Forfeited, retry_after_ms: 10 });
	m.step().await.unwrap();
	assert_eq!(m.accumulated(), 0, "the gradient is dropped");
	assert!(matches!(m.phase(), Phase::Merging(s) if !s.member), "{:?}", m.phase());
	let shards_asked =
		|w: &World| w.calls(&me).iter().filter(|c| matches!(c, Call::GetShards(_))).count();
	let asked = shards_asked(&world);
	for _ in 0..5 {
		m.step().await.unwrap();
	}
	assert_eq!(shards_asked(&world), asked, "no shards asked for after the forfeit");
	let gradients = world.calls(&me).iter().filter(|c| matches!(c, Call::Gradient(_))).count();
	assert_eq!(gradients, 1, "nothing resubmitted");
}

/// A miner of `spec` (stage `stage`) against the fakes.
fn miner_of(world: &Arc<World>, me: &AccountId, spec: iota_rpc::RunSpec, stage: u16) -> Miner {
	let orch = Arc::new(FakeOrch { me: me.clone(), world: world.clone(), spec: spec.to_bytes() });
	let chain = Arc::new(FakeChain::default());
	let cfg = MinerConfig::default();
	Miner::new(orch, world.io.clone(), chain, spec, stage, cfg, Metrics::new().unwrap()).unwrap()
}

#[tokio::test]
async fn a_run_that_continues_a_model_starts_from_its_initial_weights_only_when_they_check() {
	let world = Arc::new(World::default());
	let me = account(1);
	let mut spec = common::spec(&world.io);
	// The imported weights of each stage: another seed's, as checkpoints in the run's mode.
	let mut init = Vec::new();
	let mut want = Vec::new();
	for s in 0..spec.model.n_stages() {
		let st = Stage::initial(&spec.model, s, 7, &spec.training, &Device::Cpu, None).unwrap();
		let key = iota_storage::keys::init_checkpoint(&run_id(), s as u32);
		let obj = world.io.insert(&key, st.to_checkpoint().unwrap());
		init.push(iota_rpc::InitStage {
			checkpoint: iota_rpc::SpecObject { key, hash: obj.hash, size: obj.size },
			state: ContentHash(st.state_hash().unwrap()),
		});
		want.push(st.flat_params().unwrap());
	}
	spec.init = Some(init);
	spec.validate().unwrap();
	let seeded = Stage::new(&spec.model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	assert_ne!(
		seeded.flat_params().unwrap(),
		want[1],
		"the test needs weights other than the seed's"
	);

	let mut m = miner_of(&world, &me, spec.clone(), 1);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(m.phase(), &Phase::Training);
	assert_eq!(m.stage().flat_params().unwrap(), want[1]);
	assert_eq!(ContentHash(m.stage().state_hash().unwrap()), spec.init.as_ref().unwrap()[1].state);

	// A spec naming another state than the checkpoint holds: refused, the miner does not train.
	let mut wrong = spec.clone();
	wrong.init.as_mut().unwrap()[1].state = ContentHash::of(b"another state");
	let mut m = miner_of(&world, &me, wrong, 1);
	let err = m.step().await.unwrap_err();
	assert!(err.to_string().contains("state"), "{err}");
	assert_ne!(m.phase(), &Phase::Training);
	// Bytes that are not the named object: refused by the hash check of the download.
	let mut tampered = spec.clone();
	tampered.init.as_mut().unwrap()[1].checkpoint.hash = ContentHash::of(b"other bytes");
	let mut m = miner_of(&world, &me, tampered, 1);
	let err = m.step().await.unwrap_err();
	assert!(matches!(err, MinerError::Storage { .. }), "{err}");
	assert_ne!(m.phase(), &Phase::Training);
}

/// A synced local-mode miner (an inner step every backward pass) of stage 1 with `cfg`, account 1:
/// its world, account, run spec and the miner.
async fn local_stage_one(cfg: MinerConfig) -> (Arc<World>, AccountId, iota_rpc::RunSpec, Miner) {
	let training = Training::Local { accumulate: 1, outer_lr: 0.7, outer_momentum: 0.9 };
	let world = Arc::new(World { training, ..World::default() });
	let me = account(1);
	let mut spec = common::spec(&world.io);
	spec.training = training;
	let orch = Arc::new(FakeOrch { me: me.clone(), world: world.clone(), spec: spec.to_bytes() });
	let chain = Arc::new(FakeChain::default());
	let mut m =
		Miner::new(orch, world.io.clone(), chain, spec.clone(), 1, cfg, Metrics::new().unwrap())
			.unwrap();
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert_eq!(m.phase(), &Phase::Training);
	(world, me, spec, m)
}

/// Local mode, weight stashing past its bounds: forwards whose graph was dropped (beyond `max_kept`),
/// whose weights' stash was dropped (beyond `max_stashes`), or both, still have their backward run at
/// the weights the forward ran at (the forward recomputed from its input, the weights rebuilt from the
/// inner-step log once for all of them), so the input gradient each uploads is the pass at that inner
/// step's state: the one a validator recomputes. At the current weights it would differ.
#[tokio::test]
async fn local_mode_backwards_run_at_their_forwards_weights_past_the_kept_bounds() {
	let cfg = MinerConfig { max_kept: 2, max_stashes: 1, ..MinerConfig::default() };
	let (world, me, spec, mut m) = local_stage_one(cfg).await;

	let own = [1u64, 2, 4, 6, 7, 8];
	let inputs: std::collections::HashMap<u64, ObjectGet> = own
		.into_iter()
		.map(|s| (s, store_tensor(&world.io, &format!("in{s}"), &boundary(s), Kind::Activation)))
		.collect();
	let forward = |s: u64| {
		forward_item(
			s,
			1,
			s,
			Some(inputs[&s].clone()),
			None,
			act_key(1, s, Direction::Forward, &me),
		)
	};
	let own_backward = |s: u64| {
		let g = store_tensor(&world.io, &format!("g{s}"), &boundary(100 + s), Kind::Gradient);
		Work::Backward(BackwardWork {
			lease: 10 + s,
			epoch: 0,
			stage: 1,
			sample: s,
			forward_by: me.clone(),
			input: Some(inputs[&s].clone()),
			data: None,
			grad_output: g,
			output: Some(put(act_key(1, s, Direction::Backward, &me))),
			expires_at_ms: far(),
		})
	};
	// Forwards 1 and 2 at state 0; an inner step (a pass of another miner's forward, sample 3);
	// forwards 4, 6 and 7 at state 1; an inner step (sample 5), which stashes state 1 and drops state
	// 0's stash; forward 8 at state 2. Only 7 and 8 keep their graphs.
	world.push_work(&me, forward(1));
	world.push_work(&me, forward(2));
	push_backward(&world, &me, 3);
	for s in [4, 6, 7] {
		world.push_work(&me, forward(s));
	}
	push_backward(&world, &me, 5);
	world.push_work(&me, forward(8));
	for _ in 0..8 {
		assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	}
	assert_eq!(m.inner_steps(), Some(2));
	assert_eq!(m.kept_forwards(), (6, 2, 1), "forwards kept, with a graph, stashes held");
	let states = m.inner_states_at(0, &[0, 1, 2].into()).unwrap();
	let reported = world.inner.lock().unwrap().get(&me.0).cloned().unwrap();
	for (k, st) in &states {
		assert_eq!(ContentHash(st.hash()), reported[*k as usize].1, "state {k} as reported");
	}
	// 8: graph, current weights; 1 and 2: no graph, no stash (state 0 rebuilt once for both); 4 and 6:
	// no graph, state 1's stash; 7: graph and stash. Each backward is an inner step of its own.
	let order = [(8u64, 2u32), (1, 0), (2, 0), (4, 1), (6, 1), (7, 1)];
	for (s, _) in order {
		world.push_work(&me, own_backward(s));
		assert_eq!(m.step().await.unwrap(), Outcome::Worked, "backward {s}");
	}
	let metrics = m.metrics.render();
	assert!(metrics.contains("iota_miner_stale_backwards_total 5"), "{metrics}");
	assert!(metrics.contains("iota_miner_weights_rebuilt_total 1"), "{metrics}");
	// The input gradient of each: the pass at its forward's state, recomputed by a fresh stage.
	let model = &spec.model;
	let flat = |t: &candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
	let mut now = Stage::new(model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
	now.set_flat_params(&m.stage().flat_params().unwrap()).unwrap();
	for (s, state) in order {
		let mut at = Stage::new(model, 1, spec.seed, DType::F32, &Device::Cpu).unwrap();
		at.set_flat_params(&states[&state].weights).unwrap();
		let want = at.backward_from_input(&boundary(s), &boundary(100 + s)).unwrap().unwrap();
		let got = wire::decode(
			&world.io.get_obj(&act_key(1, s, Direction::Backward, &me)).unwrap(),
			&Expect::btw(Kind::Gradient, 8, 1 << 20),
			DType::F32,
			&Device::Cpu,
		)
		.unwrap();
		assert_eq!(flat(&got), flat(&want), "sample {s}: the pass at state {state}");
		let moved = now.backward_from_input(&boundary(s), &boundary(100 + s)).unwrap().unwrap();
		assert_ne!(flat(&got), flat(&moved), "sample {s}: not the pass at the current weights");
	}
}

/// Local mode: a forward's weights the inner-step log cannot rebuild (here it keeps no epoch at all:
/// `reveal_max_bytes` below one state) do not hold up its backward. The pass runs at the current
/// weights, so the stage's quota still completes; the epoch's challenges cannot be answered anyway.
#[tokio::test]
async fn local_mode_a_backward_whose_weights_cannot_be_rebuilt_still_runs() {
	let cfg =
		MinerConfig { max_kept: 1, max_stashes: 1, reveal_max_bytes: 1, ..MinerConfig::default() };
	let (world, me, _, mut m) = local_stage_one(cfg).await;
	let input = store_tensor(&world.io, "in1", &boundary(1), Kind::Activation);
	let out = act_key(1, 1, Direction::Forward, &me);
	world.push_work(&me, forward_item(1, 1, 1, Some(input.clone()), None, out));
	push_backward(&world, &me, 3);
	let in4 = store_tensor(&world.io, "in4", &boundary(4), Kind::Activation);
	world.push_work(
		&me,
		forward_item(4, 1, 4, Some(in4), None, act_key(1, 4, Direction::Forward, &me)),
	);
	push_backward(&world, &me, 5);
	for _ in 0..4 {
		assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	}
	assert_eq!(m.kept_forwards(), (2, 1, 1), "forward 1: neither graph nor stash");
	assert!(m.inner_states_at(0, &[0].into()).is_err(), "the log keeps nothing");
	let g = store_tensor(&world.io, "g1", &boundary(101), Kind::Gradient);
	world.push_work(
		&me,
		Work::Backward(BackwardWork {
			lease: 11,
			epoch: 0,
			stage: 1,
			sample: 1,
			forward_by: me.clone(),
			input: Some(input),
			data: None,
			grad_output: g,
			output: Some(put(act_key(1, 1, Direction::Backward, &me))),
			expires_at_ms: far(),
		}),
	);
	assert_eq!(m.step().await.unwrap(), Outcome::Worked);
	assert!(world.io.get_obj(&act_key(1, 1, Direction::Backward, &me)).is_some());
	assert!(m.metrics.render().contains("iota_miner_weights_rebuilt_total 0"));
	assert_eq!(m.inner_steps(), Some(3));
}
