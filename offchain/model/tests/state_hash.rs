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
