//! GPU miners checked by a CPU validator (issue 17; built only with the `cuda` feature, run on a GPU
//! machine by `scripts/device-check.sh`).
//!
//! Three miners hold the three stages of a preset on the GPU and run a real chained pass: token ids
//! into the head, each activation through the wire codec to the next stage, the tail's loss and input
//! gradient, and the gradients back through the body. A validator holding the same weights on the
//! CPU recomputes every item with the functions its daemon uses ([`recompute::forward`],
//! [`recompute::backward`]) and judges it with [`tolerance::compare`] under each wire encoding. Honest
//! GPU work must pass (ratio ≤ 1); a miner adding the test fault's noise (`--fault perturb=0.5` of
//! the e2e cheater, and a 1 %-of-rms one) must fail. The measured ratios are printed (`--nocapture`).
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Tensor};
use iota_model::wire::{self, Expect, Kind};
use iota_model::{DeviceSpec, Encoding, ModelConfig, Stage};
use iota_validator::recompute::{self, StageInput};
use iota_validator::tolerance::{compare, loss_matches};

/// The miner's upload of `t` under `enc`, as the validator decodes it.
fn through_wire(t: &Tensor, kind: Kind, enc: Encoding, width: usize) -> Vec<f32> {
	let cpu = t.to_device(&Device::Cpu).unwrap().to_dtype(DType::F32).unwrap();
	let bytes = wire::encode(&cpu, kind, enc).unwrap();
	wire::decode_checked(&bytes, &Expect::btw(kind, width, usize::MAX))
		.unwrap()
		.values
}

/// Uniform noise in `[-a, a]` (the shape of the miner's `perturb` fault).
fn noisy(values: &[f32], a: f32) -> Vec<f32> {
	values
		.iter()
		.enumerate()
		.map(|(i, &x)| x + a * ((((i * 2_654_435_761) % 2001) as f32 / 1000.0) - 1.0))
		.collect()
}

fn rms(v: &[f32]) -> f32 {
	(v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / v.len().max(1) as f64).sqrt() as f32
}

#[test]
fn a_cpu_validator_passes_honest_gpu_miners_and_fails_perturbed_ones() {
	let gpu = DeviceSpec::Cuda(0).open().expect("a CUDA device (run on a GPU machine)");
	for preset in ["tiny", "small"] {
		let cfg = ModelConfig::preset(preset).unwrap();
		assert_eq!(cfg.n_stages(), 3, "{preset}: the check assumes 3 stages");
		let width = cfg.wire_width();
		let (b, t) = (2usize, 32usize);
		for enc in [Encoding::F32, Encoding::Bf16, Encoding::U8] {
			let mut miners: Vec<Stage> =
				(0..3).map(|s| Stage::new(&cfg, s, 5, DType::F32, &gpu).unwrap()).collect();
			let mut validator: Vec<Stage> = (0..3)
				.map(|s| Stage::new(&cfg, s, 5, DType::F32, &Device::Cpu).unwrap())
				.collect();
			let ids: Vec<u32> =
				(0..b * (t + 1)).map(|i| ((i * 7919 + 3) % cfg.vocab_size) as u32).collect();
			let rows = |off: usize| -> Vec<u32> {
				(0..b)
					.flat_map(|r| ids[r * (t + 1) + off..r * (t + 1) + off + t].to_vec())
					.collect()
			};
			let (x, y) = (rows(0), rows(1));

			// Miners: head and body forward on the GPU, each output uploaded through the wire.
			let head_fwd =
				miners[0].forward(&Tensor::from_vec(x.clone(), (b, t), &gpu).unwrap()).unwrap();
			let a0 = through_wire(&head_fwd.output(), Kind::Activation, enc, width);
			let a0_gpu = Tensor::from_vec(a0.clone(), (b, t, width), &gpu).unwrap();
			let body_fwd = miners[1].forward(&a0_gpu).unwrap();
			let a1 = through_wire(&body_fwd.output(), Kind::Activation, enc, width);
			let a1_gpu = Tensor::from_vec(a1.clone(), (b, t, width), &gpu).unwrap();
			let tail = miners[2]
				.forward_loss(&a1_gpu, &Tensor::from_vec(y.clone(), (b, t), &gpu).unwrap())
				.unwrap();
			let loss = tail.value;
			let g1 = miners[2].backward_loss(tail).unwrap().unwrap();
			let g1 = through_wire(&g1, Kind::Gradient, enc, width);
			let g0 = miners[1]
				.backward(body_fwd, &Tensor::from_vec(g1.clone(), (b, t, width), &gpu).unwrap())
				.unwrap()
				.unwrap();
			let g0 = through_wire(&g0, Kind::Gradient, enc, width);

			// The CPU validator recomputes each uploaded item from the uploaded inputs.
			let act =
				|v: &[f32]| StageInput::Activation { values: v.to_vec(), shape: [b, t, width] };
			let r_head = recompute::forward(
				&mut validator[0],
				&StageInput::Tokens { ids: x.clone(), rows: b },
				None,
			)
			.unwrap();
			let r_body = recompute::forward(&mut validator[1], &act(&a0), None).unwrap();
			let r_tail = recompute::forward(
				&mut validator[2],
				&act(&a1),
				Some(&StageInput::Tokens { ids: y.clone(), rows: b }),
			)
			.unwrap();
			let r_back = recompute::backward(&mut validator[1], &act(&a0), &act(&g1)).unwrap();
			let r_loss = r_tail.loss.unwrap();
			assert!(loss_matches(loss, r_loss), "{preset} {enc:?}: loss {loss} vs {r_loss}");

			for (what, claimed, r) in [
				("head activation", &a0, &r_head.values),
				("body activation", &a1, &r_body.values),
				("tail input gradient", &g1, &r_tail.values),
				("body input gradient", &g0, &r_back.values),
			] {
				let honest = compare(claimed, r, width, enc).unwrap();
				let perturbed = compare(&noisy(claimed, 0.5), r, width, enc).unwrap();
				let one_pct = compare(&noisy(claimed, 0.01 * rms(r)), r, width, enc).unwrap();
				println!(
					"{preset} {enc:?} {what}: honest ratio {:.4} (abs {:.3e}, rel {:.3e}) · perturb=0.5 ratio {:.1} · 1 % rms noise ratio {:.2}",
					honest.max_ratio,
					honest.max_abs_err,
					honest.max_rel_err,
					perturbed.max_ratio,
					one_pct.max_ratio
				);
				assert!(honest.max_ratio <= 1.0, "{preset} {enc:?} {what}: honest GPU work failed");
				assert!(perturbed.max_ratio > 1.0, "{preset} {enc:?} {what}: perturb=0.5 passed");
				assert!(one_pct.max_ratio > 1.0, "{preset} {enc:?} {what}: 1 % noise passed");
			}
			println!("{preset} {enc:?} tail loss: gpu {loss:.6} cpu {r_loss:.6}");
		}
	}
}
