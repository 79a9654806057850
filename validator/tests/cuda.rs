//! GPU miners checked by a CPU validator (issue 17; built only with the `cuda` feature, run on a GPU
//! machine by `scripts/device-check.sh`).
//!
//! One miner per stage of a preset (`tiny`: 3 stages, `small`: 4) holds its stage on the GPU, and
//! together they run a real chained pass: token ids into the head, each activation through the wire
//! codec to the next stage, the tail's loss and input gradient, and the gradients back through every
//! body stage. A validator holding the same weights on the
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
		let n = cfg.n_stages();
		assert!(n >= 2, "{preset}: the check needs a head and a tail");
		let width = cfg.wire_width();
		let (b, t) = (2usize, 32usize);
		for enc in [Encoding::F32, Encoding::Bf16, Encoding::U8] {
			let mut miners: Vec<Stage> =
				(0..n).map(|s| Stage::new(&cfg, s, 5, DType::F32, &gpu).unwrap()).collect();
			let mut validator: Vec<Stage> = (0..n)
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
			let on_gpu = |v: &[f32]| Tensor::from_vec(v.to_vec(), (b, t, width), &gpu).unwrap();
			let act =
				|v: &[f32]| StageInput::Activation { values: v.to_vec(), shape: [b, t, width] };

			// Miners, forward: the head on token ids, every other non-final stage on the activation
			// the previous one uploaded (through the wire), the graphs kept for the backward.
			// `inputs[s]` is what stage `s` received; `outputs[s]` what it uploaded.
			let mut inputs: Vec<Vec<f32>> = vec![Vec::new()];
			let mut outputs: Vec<Vec<f32>> = Vec::new();
			let mut kept = Vec::new();
			for s in 0..n - 1 {
				let fwd = if s == 0 {
					miners[0].forward(&Tensor::from_vec(x.clone(), (b, t), &gpu).unwrap())
				} else {
					miners[s].forward(&on_gpu(&inputs[s]))
				}
				.unwrap();
				let out = through_wire(&fwd.output(), Kind::Activation, enc, width);
				kept.push(fwd);
				inputs.push(out.clone());
				outputs.push(out);
			}
			// The tail: loss and input gradient; then each body's input gradient, back to stage 1.
			let tail = miners[n - 1]
				.forward_loss(
					&on_gpu(&inputs[n - 1]),
					&Tensor::from_vec(y.clone(), (b, t), &gpu).unwrap(),
				)
				.unwrap();
			let loss = tail.value;
			let g = miners[n - 1].backward_loss(tail).unwrap().unwrap();
			// `grads[s]` is stage `s`'s uploaded input gradient (s ≥ 1).
			let mut grads: Vec<Vec<f32>> = vec![Vec::new(); n];
			grads[n - 1] = through_wire(&g, Kind::Gradient, enc, width);
			for s in (1..n - 1).rev() {
				let fwd = kept.pop().unwrap();
				let g = miners[s].backward(fwd, &on_gpu(&grads[s + 1])).unwrap().unwrap();
				grads[s] = through_wire(&g, Kind::Gradient, enc, width);
			}

			// The CPU validator recomputes each uploaded item from its uploaded inputs and judges it.
			let mut items: Vec<(String, Vec<f32>, Vec<f32>)> = Vec::new();
			let r = recompute::forward(
				&mut validator[0],
				&StageInput::Tokens { ids: x.clone(), rows: b },
				None,
			)
			.unwrap();
			items.push(("stage 0 activation".into(), outputs[0].clone(), r.values));
			for s in 1..n - 1 {
				let r = recompute::forward(&mut validator[s], &act(&inputs[s]), None).unwrap();
				items.push((format!("stage {s} activation"), outputs[s].clone(), r.values));
				let r =
					recompute::backward(&mut validator[s], &act(&inputs[s]), &act(&grads[s + 1]))
						.unwrap();
				items.push((format!("stage {s} input gradient"), grads[s].clone(), r.values));
			}
			let r_tail = recompute::forward(
				&mut validator[n - 1],
				&act(&inputs[n - 1]),
				Some(&StageInput::Tokens { ids: y.clone(), rows: b }),
			)
			.unwrap();
			let r_loss = r_tail.loss.unwrap();
			assert!(loss_matches(loss, r_loss), "{preset} {enc:?}: loss {loss} vs {r_loss}");
			items.push((
				format!("stage {} input gradient", n - 1),
				grads[n - 1].clone(),
				r_tail.values,
			));

			for (what, claimed, r) in &items {
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
