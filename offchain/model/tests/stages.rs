//! Stage chaining against the unsplit model, finite-difference gradients, flatten round trips,
//! bit-identical replicas, checkpoints and bad-input paths of the stage API.

use candle_core::{DType, Device, Tensor, Var};
use iota_model::{Error, ModelConfig, Pipeline, Stage, StepOptions};
use rand::{Rng, SeedableRng};

fn tokens(b: usize, t: usize, vocab: usize, seed: u64) -> (Tensor, Tensor) {
	let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
	let row: Vec<u32> = (0..b * (t + 1)).map(|_| rng.random_range(0..vocab as u32)).collect();
	let x: Vec<u32> = (0..b).flat_map(|i| row[i * (t + 1)..i * (t + 1) + t].to_vec()).collect();
	let y: Vec<u32> =
		(0..b).flat_map(|i| row[i * (t + 1) + 1..(i + 1) * (t + 1)].to_vec()).collect();
	(
		Tensor::from_vec(x, (b, t), &Device::Cpu).unwrap(),
		Tensor::from_vec(y, (b, t), &Device::Cpu).unwrap(),
	)
}

fn all_grads(p: &mut Pipeline) -> Vec<Vec<f32>> {
	p.stages_mut().iter_mut().map(|s| s.take_gradient().unwrap().0).collect()
}

fn chain_equals_unsplit(cfg: &ModelConfig) {
	let dev = Device::Cpu;
	let (x, y) = tokens(2, 16, cfg.vocab_size, 7);
	let mut chained = Pipeline::new(cfg, 11, DType::F32, &dev, None).unwrap();
	let mut unsplit = Pipeline::new(cfg, 11, DType::F32, &dev, None).unwrap();
	let l1 = chained.forward_backward(&x, &y).unwrap();
	let l2 = unsplit.forward_backward_unsplit(&x, &y).unwrap();
	assert!(((l1 - l2) / l2).abs() <= 1e-5, "loss chained {l1} vs unsplit {l2}");
	let (g1, g2) = (all_grads(&mut chained), all_grads(&mut unsplit));
	for (s, (a, b)) in g1.iter().zip(&g2).enumerate() {
		assert_eq!(a.len(), b.len());
		let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
		assert!(scale > 0.0, "stage {s} has an all-zero gradient");
		// Same ops in the same order: the gradients are bit-identical, not merely close.
		let worst = a.iter().zip(b).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
		assert!(
			a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits()),
			"stage {s}: max |Δgrad| {worst} (scale {scale})"
		);
	}
}

#[test]
fn chaining_stages_equals_the_unsplit_model_with_bottleneck() {
	chain_equals_unsplit(&ModelConfig::tiny());
}

#[test]
fn chaining_stages_equals_the_unsplit_model_without_bottleneck() {
	chain_equals_unsplit(&ModelConfig::tiny().with_bottleneck(None));
}

#[test]
fn f32_wire_is_exact_and_backward_from_input_equals_kept_graph() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let (x, y) = tokens(2, 12, cfg.vocab_size, 3);
	let mut direct = Pipeline::new(&cfg, 5, DType::F32, &dev, None).unwrap();
	let mut wired =
		Pipeline::new(&cfg, 5, DType::F32, &dev, Some(iota_model::Encoding::F32)).unwrap();
	assert_eq!(direct.forward_backward(&x, &y).unwrap(), wired.forward_backward(&x, &y).unwrap());
	assert!(wired.wire_bytes() > 0);
	assert_eq!(all_grads(&mut direct), all_grads(&mut wired));

	// A miner that lost the graph recomputes from the kept input: same gradients.
	let mut a = Stage::new(&cfg, 1, 5, DType::F32, &dev).unwrap();
	let mut b = Stage::new(&cfg, 1, 5, DType::F32, &dev).unwrap();
	let input = Tensor::randn(0f32, 1.0, (2, 12, cfg.wire_width()), &dev).unwrap();
	let g = Tensor::randn(0f32, 1.0, (2, 12, cfg.wire_width()), &dev).unwrap();
	let fwd = a.forward(&input).unwrap();
	let gi_a = a.backward(fwd, &g).unwrap().unwrap();
	let gi_b = b.backward_from_input(&input, &g).unwrap().unwrap();
	assert_eq!(
		gi_a.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
		gi_b.flatten_all().unwrap().to_vec1::<f32>().unwrap()
	);
	assert_eq!(a.take_gradient().unwrap(), b.take_gradient().unwrap());
}

/// Weight stashing: a backward through a forward kept from before an inner step, run with the weights
/// stashed before the step (`Stage::backward_at`), equals a fresh forward and backward at those
/// weights, parameter gradients included, and leaves the moved weights in place; so does a forward
/// recomputed from the input at a stash rebuilt from flat weights (`Stage::backward_from_input_at`,
/// `Stage::stash_of`); a stash of another stage is a typed error that changes nothing.
#[test]
fn a_stashed_backward_is_the_pass_at_the_weights_its_forward_ran_at() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let input = Tensor::randn(0f32, 1.0, (2, 12, cfg.wire_width()), &dev).unwrap();
	let g = Tensor::randn(0f32, 1.0, (2, 12, cfg.wire_width()), &dev).unwrap();
	let mut a = Stage::new(&cfg, 1, 5, DType::F32, &dev).unwrap();
	let mut b = Stage::new(&cfg, 1, 5, DType::F32, &dev).unwrap();
	let moved: Vec<f32> = a.flat_params().unwrap().iter().map(|w| w * 0.9 + 1e-3).collect();

	let fwd = a.forward(&input).unwrap();
	let at = a.stash().unwrap();
	a.set_flat_params(&moved).unwrap();
	let gi_a = a.backward_at(fwd, &g, &at).unwrap().unwrap();
	assert_eq!(a.flat_params().unwrap(), moved, "the moved weights are back after the backward");
	let gi_b = b.backward_from_input(&input, &g).unwrap().unwrap();
	let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
	assert_eq!(flat(&gi_a), flat(&gi_b));
	assert_eq!(a.take_gradient().unwrap(), b.take_gradient().unwrap());

	// Another stage's stash: refused, the weights and the accumulator untouched.
	let other = Stage::new(&cfg, 0, 5, DType::F32, &dev).unwrap().stash().unwrap();
	let fwd = a.forward(&input).unwrap();
	assert!(matches!(a.backward_at(fwd, &g, &other), Err(Error::Shape { .. })));
	assert!(matches!(a.backward_from_input_at(&input, &g, &other), Err(Error::Shape { .. })));
	assert_eq!(a.flat_params().unwrap(), moved);
	assert_eq!(a.accumulated(), 0);

	// No graph kept: the forward recomputed from the input at a stash rebuilt from the flat weights
	// (`Stage::stash_of`) is the same pass again, and the moved weights are back after it.
	let rebuilt = a.stash_of(&b.flat_params().unwrap()).unwrap();
	let gi_c = a.backward_from_input_at(&input, &g, &rebuilt).unwrap().unwrap();
	assert_eq!(flat(&gi_c), flat(&gi_b));
	assert_eq!(a.take_gradient().unwrap().0, {
		b.backward_from_input(&input, &g).unwrap();
		b.take_gradient().unwrap().0
	});
	assert_eq!(a.flat_params().unwrap(), moved);
	assert!(matches!(a.stash_of(&moved[1..]), Err(Error::Length { .. })));
	let mut nan = moved.clone();
	nan[3] = f32::NAN;
	assert!(matches!(a.stash_of(&nan), Err(Error::NonFinite { index: 3, .. })));
}

/// Central finite differences on the tiny preset in f64: for every parameter tensor, the
/// directional derivative along a random direction matches the autograd gradient.
#[test]
fn every_parameter_gradient_matches_finite_differences() {
	for cfg in [ModelConfig::tiny(), ModelConfig::tiny().with_bottleneck(None)] {
		let dev = Device::Cpu;
		let (x, y) = tokens(2, 8, cfg.vocab_size, 21);
		let mut p = Pipeline::new(&cfg, 9, DType::F64, &dev, None).unwrap();
		p.forward_backward(&x, &y).unwrap();
		let grads = all_grads(&mut p);
		let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
		let eps = 1e-5;
		let mut checked = 0;
		for (s, grad) in grads.iter().enumerate() {
			let specs: Vec<_> = p.stages()[s].specs().to_vec();
			let mut off = 0;
			for spec in &specs {
				let n = spec.numel();
				let dir: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
				let analytic: f64 =
					grad[off..off + n].iter().zip(&dir).map(|(&g, &d)| g as f64 * d).sum();
				let var: Var =
					p.stages()[s].params().find(|(nm, _)| *nm == spec.name).unwrap().1.clone();
				let orig = var.as_tensor().copy().unwrap();
				let d = Tensor::from_vec(dir, spec.shape.as_slice(), &dev).unwrap();
				// The loss in f64 through the unsplit graph (`eval_loss` reports f32).
				let loss64 = |sign: f64| {
					var.set(&(&orig + (&d * (sign * eps)).unwrap()).unwrap()).unwrap();
					p.loss_unsplit(&x, &y).unwrap().to_scalar::<f64>().unwrap()
				};
				let fd = (loss64(1.0) - loss64(-1.0)) / (2.0 * eps);
				var.set(&orig).unwrap();
				let rel = (fd - analytic).abs() / fd.abs().max(analytic.abs()).max(1e-9);
				assert!(
                    rel < 1e-2,
                    "bottleneck={} stage {s} {}: finite difference {fd:e} vs autograd {analytic:e} (rel {rel:e})",
                    cfg.bottleneck,
                    spec.name
                );
				assert!(analytic.abs() > 1e-9, "{}: gradient is zero", spec.name);
				off += n;
				checked += 1;
			}
		}
		let expected: usize = (0..cfg.n_stages())
			.map(|s| iota_model::llama::param_specs(&cfg, s).unwrap().len())
			.sum();
		assert_eq!(checked, expected);
	}
}

#[test]
fn flatten_round_trip_is_exact_and_replicas_stay_bit_identical() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let mut a = Stage::new(&cfg, 1, 77, DType::F32, &dev).unwrap();
	let mut b = Stage::new(&cfg, 1, 77, DType::F32, &dev).unwrap();
	let p0 = a.flat_params().unwrap();
	assert_eq!(p0.len(), cfg.stage_param_count(1).unwrap());
	assert_eq!(p0, b.flat_params().unwrap(), "replicas from one seed start identical");

	// Flatten -> unflatten -> flatten is exact (bitwise), including through a perturbed vector.
	let shifted: Vec<f32> = p0.iter().enumerate().map(|(i, v)| v + (i % 7) as f32 * 1e-3).collect();
	a.set_flat_params(&shifted).unwrap();
	assert_eq!(
		a.flat_params().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
		shifted.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
	);
	a.set_flat_params(&p0).unwrap();

	// Each replica sees different samples; they merge by averaging and apply the same step.
	let w = cfg.wire_width();
	for step in 0..3u64 {
		let mut sums = Vec::new();
		for (k, st) in [&mut a, &mut b].into_iter().enumerate() {
			let seed = step * 10 + k as u64;
			let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
			let v: Vec<f32> = (0..2 * 8 * w).map(|_| rng.random_range(-1.0..1.0)).collect();
			let g: Vec<f32> = (0..2 * 8 * w).map(|_| rng.random_range(-1.0..1.0)).collect();
			let input = Tensor::from_vec(v, (2, 8, w), &dev).unwrap();
			let grad = Tensor::from_vec(g, (2, 8, w), &dev).unwrap();
			st.backward_from_input(&input, &grad).unwrap();
			sums.push(st.take_gradient().unwrap());
		}
		assert_ne!(sums[0].0, sums[1].0, "replicas saw different data");
		let total: usize = sums.iter().map(|s| s.1).sum();
		let mean: Vec<f32> = (0..sums[0].0.len())
			.map(|i| (sums[0].0[i] + sums[1].0[i]) / total as f32)
			.collect();
		let opts = StepOptions::default();
		let ra = a.apply_gradient(&mean, &opts, total).unwrap();
		let rb = b.apply_gradient(&mean, &opts, total).unwrap();
		assert_eq!(ra, rb);
	}
	let (pa, pb) = (a.flat_params().unwrap(), b.flat_params().unwrap());
	assert_ne!(pa, p0, "the steps changed the weights");
	assert_eq!(
		pa.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
		pb.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
	);
	assert_eq!(a.adam_state(), b.adam_state());
	assert_eq!(a.adam_state().step, 3);
}

#[test]
fn checkpoint_round_trip_and_mismatches_are_typed_errors() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let mut p = Pipeline::new(&cfg, 1, DType::F32, &dev, None).unwrap();
	let (x, y) = tokens(2, 8, cfg.vocab_size, 1);
	p.forward_backward(&x, &y).unwrap();
	p.step(&StepOptions::default()).unwrap();
	let tail = &p.stages()[2];
	let dir = tempfile::tempdir().unwrap();
	let path = dir.path().join("stage2.safetensors");
	tail.save(&path).unwrap();
	let mut fresh = Stage::new(&cfg, 2, 999, DType::F32, &dev).unwrap();
	assert_ne!(fresh.flat_params().unwrap(), tail.flat_params().unwrap());
	fresh.load(&path).unwrap();
	assert_eq!(fresh.flat_params().unwrap(), tail.flat_params().unwrap());
	assert_eq!(fresh.adam_state(), tail.adam_state());

	let bytes = tail.to_safetensors().unwrap();
	let mut other_stage = Stage::new(&cfg, 1, 1, DType::F32, &dev).unwrap();
	assert!(
		matches!(other_stage.load_safetensors(&bytes), Err(Error::Checkpoint(m)) if m.contains("stage"))
	);
	let mut other_cfg =
		Stage::new(&cfg.clone().with_bottleneck(Some(4)), 2, 1, DType::F32, &dev).unwrap();
	assert!(
		matches!(other_cfg.load_safetensors(&bytes), Err(Error::Checkpoint(m)) if m.contains("config"))
	);
	assert!(matches!(fresh.load_safetensors(&bytes[..bytes.len() / 2]), Err(Error::Checkpoint(_))));
}

#[test]
fn bad_stage_inputs_are_typed_errors() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let head = Stage::new(&cfg, 0, 1, DType::F32, &dev).unwrap();
	let mut body = Stage::new(&cfg, 1, 1, DType::F32, &dev).unwrap();
	let tail = Stage::new(&cfg, 2, 1, DType::F32, &dev).unwrap();
	let w = cfg.wire_width();

	// Head: dtype, rank, length, token range.
	let f = Tensor::zeros((2, 8), DType::F32, &dev).unwrap();
	assert!(matches!(head.forward(&f), Err(Error::DType { .. })));
	let r3 = Tensor::zeros((2, 8, 1), DType::U32, &dev).unwrap();
	assert!(matches!(head.forward(&r3), Err(Error::Shape { .. })));
	let long = Tensor::zeros((1, cfg.max_seq_len + 1), DType::U32, &dev).unwrap();
	assert!(matches!(head.forward(&long), Err(Error::Shape { .. })));
	let oor = Tensor::new(&[[1u32, 2, cfg.vocab_size as u32]], &dev).unwrap();
	assert!(matches!(head.forward(&oor), Err(Error::TokenOutOfRange { index: 2, .. })));

	// Body: width, dtype, NaN, Inf.
	assert!(matches!(
		body.forward(&Tensor::zeros((2, 8, w + 1), DType::F32, &dev).unwrap()),
		Err(Error::Shape { .. })
	));
	assert!(matches!(
		body.forward(&Tensor::zeros((2, 8, w), DType::F64, &dev).unwrap()),
		Err(Error::DType { .. })
	));
	let mut v = vec![0f32; 2 * 8 * w];
	v[5] = f32::NAN;
	let nan = Tensor::from_vec(v.clone(), (2, 8, w), &dev).unwrap();
	assert!(matches!(body.forward(&nan), Err(Error::NonFinite { index: 5, .. })));
	v[5] = f32::INFINITY;
	let inf = Tensor::from_vec(v, (2, 8, w), &dev).unwrap();
	assert!(matches!(body.backward_from_input(&inf, &inf), Err(Error::NonFinite { .. })));

	// Gradient of the wrong shape or with NaN; nothing is accumulated then.
	let good = Tensor::zeros((2, 8, w), DType::F32, &dev).unwrap();
	let fwd = body.forward(&good).unwrap();
	assert!(matches!(
		body.backward(fwd, &Tensor::zeros((2, 7, w), DType::F32, &dev).unwrap()),
		Err(Error::Shape { .. })
	));
	assert_eq!(body.accumulated(), 0);
	assert!(matches!(body.take_gradient(), Err(Error::NoGradient { stage: 1 })));
	assert!(matches!(body.step(&StepOptions::default()), Err(Error::NoGradient { .. })));

	// A forward handed to another stage's backward.
	let head_fwd = head.forward(&Tensor::zeros((2, 8), DType::U32, &dev).unwrap()).unwrap();
	assert!(matches!(
		body.backward(head_fwd, &good),
		Err(Error::ForeignForward { stage: 1, got: 0 })
	));
	assert_eq!(body.accumulated(), 0);

	// Wrong stage kind.
	assert!(matches!(tail.forward(&good), Err(Error::WrongStage { .. })));
	assert!(matches!(
		body.forward_loss(&good, &Tensor::zeros((2, 8), DType::U32, &dev).unwrap()),
		Err(Error::WrongStage { .. })
	));
	// Targets that do not match the input.
	assert!(matches!(
		tail.forward_loss(&good, &Tensor::zeros((2, 9), DType::U32, &dev).unwrap()),
		Err(Error::Shape { .. })
	));

	// Flat vectors of the wrong length or with NaN.
	let n = body.param_count();
	assert!(matches!(body.set_flat_params(&vec![0.0; n - 1]), Err(Error::Length { .. })));
	let mut bad = body.flat_params().unwrap();
	bad[3] = f32::NAN;
	assert!(matches!(body.set_flat_params(&bad), Err(Error::NonFinite { index: 3, .. })));
	assert!(matches!(
		body.apply_gradient(&bad, &StepOptions::default(), 1),
		Err(Error::NonFinite { index: 3, .. })
	));
	assert!(matches!(
		body.apply_gradient(&[0.0; 3], &StepOptions::default(), 1),
		Err(Error::Length { .. })
	));
}
