//! `Stage::state_hash` (what replicas attest after a merge) and the hash-checked stage checkpoint
//! (`to_checkpoint` / `load_checkpoint`) a joining miner loads.

use candle_core::{DType, Device, Tensor};
use iota_model::{Error, ModelConfig, Stage, StepOptions};

/// A body stage of `tiny` after one step on a deterministic gradient.
fn stepped(seed: u64, scale: f32) -> Stage {
	let cfg = ModelConfig::tiny();
	let mut s = Stage::new(&cfg, 1, seed, DType::F32, &Device::Cpu).unwrap();
	let w = cfg.wire_width();
	let x: Vec<f32> = (0..2 * 4 * w).map(|i| ((i % 13) as f32 - 6.0) * 0.05).collect();
	let g: Vec<f32> = (0..2 * 4 * w).map(|i| ((i % 7) as f32 - 3.0) * 0.01 * scale).collect();
	let dev = Device::Cpu;
	s.backward_from_input(
		&Tensor::from_vec(x, (2, 4, w), &dev).unwrap(),
		&Tensor::from_vec(g, (2, 4, w), &dev).unwrap(),
	)
	.unwrap();
	s.step(&StepOptions::default()).unwrap();
	s
}

#[test]
fn state_hash_is_the_blake3_of_params_moments_and_step() {
	let s = stepped(3, 1.0);
	let mut bytes = Vec::new();
	for v in [s.flat_params().unwrap(), s.adam_state().m.clone(), s.adam_state().v.clone()] {
		bytes.extend(v.iter().flat_map(|x| x.to_le_bytes()));
	}
	bytes.extend(s.adam_state().step.to_le_bytes());
	assert_eq!(s.state_hash().unwrap(), *blake3::hash(&bytes).as_bytes());
}

#[test]
fn state_hash_tells_apart_weights_moments_and_step() {
	let a = stepped(3, 1.0);
	assert_eq!(a.state_hash().unwrap(), stepped(3, 1.0).state_hash().unwrap(), "replicas agree");
	assert_ne!(a.state_hash().unwrap(), stepped(4, 1.0).state_hash().unwrap(), "other weights");
	assert_ne!(a.state_hash().unwrap(), stepped(3, 2.0).state_hash().unwrap(), "other moments");
	// Same weights, no step taken: differs from a fresh stage only by step and moments.
	let cfg = ModelConfig::tiny();
	let fresh = Stage::new(&cfg, 1, 3, DType::F32, &Device::Cpu).unwrap();
	assert_ne!(fresh.state_hash().unwrap(), a.state_hash().unwrap());
}

#[test]
fn checkpoint_loads_only_with_the_attested_hash_and_reproduces_it() {
	let src = stepped(5, 1.0);
	let attested = src.state_hash().unwrap();
	let bytes = src.to_checkpoint().unwrap();
	let cfg = ModelConfig::tiny();
	let mut joiner = Stage::new(&cfg, 1, 5, DType::F32, &Device::Cpu).unwrap();
	let before = joiner.state_hash().unwrap();

	// A checkpoint that is not the attested state is refused and changes nothing.
	let other = stepped(6, 1.0).to_checkpoint().unwrap();
	assert!(matches!(
		joiner.load_checkpoint(&other, &attested),
		Err(Error::StateHashMismatch { .. })
	));
	assert!(matches!(
		joiner.load_checkpoint(&bytes[..bytes.len() - 9], &attested),
		Err(Error::Checkpoint(_))
	));
	assert_eq!(joiner.state_hash().unwrap(), before);

	joiner.load_checkpoint(&bytes, &attested).unwrap();
	assert_eq!(joiner.state_hash().unwrap(), attested, "loading reproduces the state hash exactly");
	assert_eq!(joiner.adam_state(), src.adam_state());

	// The replica that loaded it steps in lockstep with the one that wrote it.
	let mean = vec![1e-3f32; src.param_count()];
	let (mut a, mut b) = (src, joiner);
	a.apply_gradient(&mean, &StepOptions::default(), 4).unwrap();
	b.apply_gradient(&mean, &StepOptions::default(), 4).unwrap();
	assert_eq!(a.state_hash().unwrap(), b.state_hash().unwrap());
}

/// A body stage of `tiny` in local mode after one inner step (as [`stepped`]).
fn local_stepped(seed: u64, scale: f32) -> Stage {
	let mut s = Stage::new(&ModelConfig::tiny(), 1, seed, DType::F32, &Device::Cpu).unwrap();
	s.use_outer_optimizer();
	let inner = stepped(seed, scale);
	s.set_flat_params(&inner.flat_params().unwrap()).unwrap();
	s
}

#[test]
fn local_mode_attests_weights_and_outer_state_not_the_inner_moments() {
	let outer = iota_model::optim::OuterSgd { lr: 0.7, momentum: 0.9 };
	let cfg = ModelConfig::tiny();
	let global = Stage::new(&cfg, 1, 3, DType::F32, &Device::Cpu).unwrap().flat_params().unwrap();
	// Two replicas whose inner steps differ (other gradients, so other local weights and moments).
	let (mut a, mut b) = (stepped(3, 1.0), stepped(3, 2.0));
	a.use_outer_optimizer();
	b.use_outer_optimizer();
	assert_ne!(a.adam_state(), b.adam_state());
	let delta: Vec<f32> = global
		.iter()
		.zip(a.flat_params().unwrap())
		.zip(b.flat_params().unwrap())
		.map(|((g, x), y)| ((g - x) + (g - y)) / 2.0)
		.collect();
	a.apply_outer(&global, &delta, &outer).unwrap();
	b.apply_outer(&global, &delta, &outer).unwrap();
	assert_eq!(a.state_hash().unwrap(), b.state_hash().unwrap(), "inner moments are not attested");
	assert_eq!(a.outer_state().unwrap().step, 1);

	// The hash is BLAKE3(weights ‖ outer momentum ‖ outer step).
	let mut bytes = Vec::new();
	for v in [a.flat_params().unwrap(), a.outer_state().unwrap().momentum.clone()] {
		bytes.extend(v.iter().flat_map(|x| x.to_le_bytes()));
	}
	bytes.extend(1u64.to_le_bytes());
	assert_eq!(a.state_hash().unwrap(), *blake3::hash(&bytes).as_bytes());

	// A joiner in local mode loads the checkpoint and reproduces the hash; a sync-mode stage refuses it,
	// and a local stage refuses a sync checkpoint.
	let attested = a.state_hash().unwrap();
	let ck = a.to_checkpoint().unwrap();
	let mut joiner = local_stepped(9, 1.0);
	let inner_before = joiner.adam_state().clone();
	joiner.load_checkpoint(&ck, &attested).unwrap();
	assert_eq!(joiner.state_hash().unwrap(), attested);
	assert_eq!(joiner.adam_state(), &inner_before, "the inner moments stay local");
	let mut sync = Stage::new(&cfg, 1, 3, DType::F32, &Device::Cpu).unwrap();
	assert!(matches!(sync.load_checkpoint(&ck, &attested), Err(Error::Checkpoint(_))));
	let sync_ck = stepped(3, 1.0).to_checkpoint().unwrap();
	let h = stepped(3, 1.0).state_hash().unwrap();
	assert!(matches!(joiner.load_checkpoint(&sync_ck, &h), Err(Error::Checkpoint(_))));
	assert_eq!(joiner.state_hash().unwrap(), attested, "nothing changed");

	// Bad input changes nothing; a sync-mode stage has no outer step.
	let before = a.state_hash().unwrap();
	let mut nan = delta.clone();
	nan[5] = f32::NAN;
	assert!(matches!(a.apply_outer(&global, &nan, &outer), Err(Error::NonFinite { index: 5, .. })));
	assert!(matches!(a.apply_outer(&global[1..], &delta, &outer), Err(Error::Length { .. })));
	assert_eq!(a.state_hash().unwrap(), before);
	assert!(matches!(sync.apply_outer(&global, &delta, &outer), Err(Error::Config(_))));
}

#[test]
fn an_outer_step_applied_again_from_the_restored_start_is_the_step_applied_once() {
	let outer = iota_model::optim::OuterSgd { lr: 0.7, momentum: 0.9 };
	let cfg = ModelConfig::tiny();
	let global = Stage::new(&cfg, 1, 3, DType::F32, &Device::Cpu).unwrap().flat_params().unwrap();
	let delta_of = |s: &Stage, k: f32| -> Vec<f32> {
		global.iter().zip(s.flat_params().unwrap()).map(|(g, x)| (g - x) * k).collect()
	};
	// Replica `a` applies a first mean, then (its round restarted with other members) a second one
	// from the restored start; replica `b` applies only the second: the same state.
	let (mut a, mut b) = (local_stepped(3, 1.0), local_stepped(3, 1.0));
	let start = a.outer_state().unwrap().clone();
	let (first, second) = (delta_of(&a, 1.0), delta_of(&a, 0.5));
	a.apply_outer(&global, &first, &outer).unwrap();
	a.restore_outer_state(start.clone()).unwrap();
	a.apply_outer(&global, &second, &outer).unwrap();
	b.apply_outer(&global, &second, &outer).unwrap();
	assert_eq!(a.state_hash().unwrap(), b.state_hash().unwrap());
	assert_eq!(a.outer_state().unwrap().step, 1);
	// Without the restore the momentum would hold both means.
	let mut c = local_stepped(3, 1.0);
	c.apply_outer(&global, &first, &outer).unwrap();
	c.apply_outer(&global, &second, &outer).unwrap();
	assert_ne!(c.state_hash().unwrap(), b.state_hash().unwrap());
	// Bad input changes nothing.
	let before = a.state_hash().unwrap();
	let short = iota_model::optim::OuterState { momentum: vec![0.0; 3], step: 0 };
	assert!(matches!(a.restore_outer_state(short), Err(Error::Length { .. })));
	assert_eq!(a.state_hash().unwrap(), before);
	let mut sync = Stage::new(&cfg, 1, 3, DType::F32, &Device::Cpu).unwrap();
	assert!(matches!(sync.restore_outer_state(start), Err(Error::Config(_))));
}

/// Mixed precision (a BF16 stage, what `bench-throughput --dtype bf16` and the GPU tests build): the
/// weights everything reads and writes are f32 masters, identical to an f32 stage's, and the vars hold
/// their bf16 rounding. Forward and backward in bf16 need a GPU (candle's CPU has no bf16 matmul); the
/// state side is checked here.
#[test]
fn a_bf16_stage_keeps_f32_master_weights_for_steps_hashes_and_checkpoints() {
	let cfg = ModelConfig::tiny();
	let mut f32s = Stage::new(&cfg, 1, 9, DType::F32, &Device::Cpu).unwrap();
	let mut bf16 = Stage::new(&cfg, 1, 9, DType::BF16, &Device::Cpu).unwrap();
	assert_eq!(bf16.dtype(), DType::BF16);
	assert_eq!(bf16.flat_params().unwrap(), f32s.flat_params().unwrap());
	assert_eq!(bf16.state_hash().unwrap(), f32s.state_hash().unwrap());
	// The vars are the masters rounded to bf16, and the rounding loses something.
	let master = bf16.flat_params().unwrap();
	let mut off = 0;
	let mut rounded_differs = false;
	for (_, var) in bf16.params() {
		assert_eq!(var.dtype(), DType::BF16);
		let v = var
			.flatten_all()
			.unwrap()
			.to_dtype(DType::F32)
			.unwrap()
			.to_vec1::<f32>()
			.unwrap();
		for (x, m) in v.iter().zip(&master[off..off + v.len()]) {
			assert_eq!(*x, half::bf16::from_f32(*m).to_f32());
			rounded_differs |= x != m;
		}
		off += v.len();
	}
	assert!(rounded_differs, "bf16 rounding of random init is not exact");
	// The same gradient steps both bit-identically: the optimizer works on the masters.
	let grad: Vec<f32> = (0..f32s.param_count()).map(|i| ((i % 17) as f32 - 8.0) * 1e-3).collect();
	for _ in 0..3 {
		f32s.apply_gradient(&grad, &StepOptions::default(), 1).unwrap();
		bf16.apply_gradient(&grad, &StepOptions::default(), 1).unwrap();
	}
	assert_eq!(bf16.flat_params().unwrap(), f32s.flat_params().unwrap());
	let hash = bf16.state_hash().unwrap();
	assert_eq!(hash, f32s.state_hash().unwrap());
	// Checkpoints travel as f32 both ways and reproduce the attested hash.
	let mut back = Stage::new(&cfg, 1, 0, DType::BF16, &Device::Cpu).unwrap();
	back.load_checkpoint(&f32s.to_checkpoint().unwrap(), &hash).unwrap();
	assert_eq!(back.flat_params().unwrap(), f32s.flat_params().unwrap());
	let mut plain = Stage::new(&cfg, 1, 0, DType::F32, &Device::Cpu).unwrap();
	plain.load_checkpoint(&bf16.to_checkpoint().unwrap(), &hash).unwrap();
	assert_eq!(plain.state_hash().unwrap(), hash);
}
