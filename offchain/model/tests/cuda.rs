//! CUDA against CPU (issue 17; built only with the `cuda` feature, run on a GPU machine by
//! `scripts/device-check.sh`): the same stage on both devices, its forward output, input gradient and
//! parameter gradient compared element by element, chained GPU stages against the unsplit model, and
//! the CPU optimizer step leaving a GPU replica and a CPU replica bit-identical when both are given the
//! same gradient (the parameters' round trip off and onto the GPU is exact).
//!
//! Each test prints its measured errors (run with `--nocapture`): `max abs` is `max |gpu − cpu|`, `max
//! rel` is that over `max(|cpu|, rms(cpu))` per element (the scale-free error the validator's
//! tolerance bounds, `validator/src/tolerance.rs`).
#![cfg(feature = "cuda")]

use candle_core::{DType, Device, Tensor};
use iota_model::{DeviceSpec, ModelConfig, Pipeline, Stage, StepOptions};

fn gpu() -> Device {
	DeviceSpec::Cuda(0)
		.open()
		.expect("a CUDA device (these tests run only on a GPU machine)")
}

fn flat(t: &Tensor) -> Vec<f32> {
	t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// `(max abs, max rel)` of `a` against the reference `r` (rel: over `max(|r_i|, rms(r))`).
fn errors(a: &[f32], r: &[f32]) -> (f32, f32) {
	assert_eq!(a.len(), r.len());
	let rms = (r.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / r.len().max(1) as f64).sqrt()
		as f32;
	let mut abs = 0f32;
	let mut rel = 0f32;
	for (&x, &y) in a.iter().zip(r) {
		let e = (x - y).abs();
		assert!(e.is_finite(), "non-finite difference");
		abs = abs.max(e);
		rel = rel.max(e / y.abs().max(rms).max(f32::MIN_POSITIVE));
	}
	(abs, rel)
}

fn tokens(cfg: &ModelConfig, b: usize, t: usize, dev: &Device, shift: usize) -> Tensor {
	let ids: Vec<u32> = (0..b * t)
		.map(|i| (((i + shift) * 7919 + 13) % cfg.vocab_size) as u32)
		.collect();
	Tensor::from_vec(ids, (b, t), dev).unwrap()
}

fn activation(b: usize, t: usize, w: usize, seed: usize, scale: f32) -> Vec<f32> {
	(0..b * t * w)
		.map(|i| scale * ((((i + seed) * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0))
		.collect()
}

/// Every stage of `preset` in `dtype` on the GPU against f32 on the CPU: forward output, input
/// gradient and accumulated parameter gradient. Returns the largest relative error seen.
fn stage_errors(preset: &str, dtype: DType) -> f32 {
	let cfg = ModelConfig::preset(preset).unwrap();
	let (b, t) = (2, 32);
	let dev = gpu();
	let mut worst = 0f32;
	for s in 0..cfg.n_stages() {
		let mut cpu = Stage::new(&cfg, s, 7, DType::F32, &Device::Cpu).unwrap();
		let mut cuda = Stage::new(&cfg, s, 7, dtype, &dev).unwrap();
		let w_in = cpu.input_width().unwrap_or(0);
		let input = |d: &Device, dt: DType| -> Tensor {
			if cpu.is_first() {
				tokens(&cfg, b, t, d, s)
			} else {
				Tensor::from_vec(activation(b, t, w_in, s, 1.0), (b, t, w_in), d)
					.unwrap()
					.to_dtype(dt)
					.unwrap()
			}
		};
		let (x_cpu, x_gpu) = (input(&Device::Cpu, DType::F32), input(&dev, dtype));
		let (out_err, in_grad) = if cpu.is_last() {
			let y_cpu = tokens(&cfg, b, t, &Device::Cpu, s + 1);
			let y_gpu = tokens(&cfg, b, t, &dev, s + 1);
			let f_cpu = cpu.forward_loss(&x_cpu, &y_cpu).unwrap();
			let f_gpu = cuda.forward_loss(&x_gpu, &y_gpu).unwrap();
			let loss_err = (f_cpu.value - f_gpu.value).abs();
			println!(
				"{preset} {dtype:?} stage {s} loss: cpu {:.6} gpu {:.6} abs {loss_err:.3e}",
				f_cpu.value, f_gpu.value
			);
			(
				(loss_err, loss_err / f_cpu.value.abs()),
				(cpu.backward_loss(f_cpu).unwrap(), cuda.backward_loss(f_gpu).unwrap()),
			)
		} else {
			let f_cpu = cpu.forward(&x_cpu).unwrap();
			let f_gpu = cuda.forward(&x_gpu).unwrap();
			let e = errors(&flat(&f_gpu.output()), &flat(&f_cpu.output()));
			let w_out = cpu.output_width().unwrap();
			let g = activation(b, t, w_out, s + 17, 1e-3);
			let g_cpu = Tensor::from_vec(g.clone(), (b, t, w_out), &Device::Cpu).unwrap();
			let g_gpu = Tensor::from_vec(g, (b, t, w_out), &dev).unwrap().to_dtype(dtype).unwrap();
			(e, (cpu.backward(f_cpu, &g_cpu).unwrap(), cuda.backward(f_gpu, &g_gpu).unwrap()))
		};
		let in_err = match in_grad {
			(Some(a), Some(b)) => errors(&flat(&b), &flat(&a)),
			(None, None) => (0.0, 0.0),
			_ => panic!("one device returned an input gradient, the other not"),
		};
		let (p_cpu, _) = cpu.take_gradient().unwrap();
		let (p_gpu, _) = cuda.take_gradient().unwrap();
		let p_err = errors(&p_gpu, &p_cpu);
		println!(
			"{preset} {dtype:?} stage {s}: output abs {:.3e} rel {:.3e} · input grad abs {:.3e} rel {:.3e} · param grad abs {:.3e} rel {:.3e}",
			out_err.0, out_err.1, in_err.0, in_err.1, p_err.0, p_err.1
		);
		worst = worst.max(out_err.1).max(in_err.1).max(p_err.1);
	}
	worst
}

#[test]
fn f32_stages_on_the_gpu_match_the_cpu() {
	for preset in ["tiny", "small"] {
		let worst = stage_errors(preset, DType::F32);
		// The validator's f32 bound is 1e-3 relative plus 1e-3 of rms (tolerance.rs); an honest GPU
		// must sit well inside it.
		assert!(worst < 2e-4, "{preset}: largest f32 relative error {worst:.3e}");
	}
}

#[test]
fn bf16_stages_on_the_gpu_stay_near_the_cpu_f32() {
	for preset in ["tiny", "small"] {
		let worst = stage_errors(preset, DType::BF16);
		// Measured, not a tolerance of the protocol: bf16 keeps 8 significant bits (2⁻⁸ ≈ 3.9e-3 per
		// rounding), compounded over the stage's blocks.
		assert!(worst < 0.5, "{preset}: largest bf16 relative error {worst:.3e}");
	}
}

#[test]
fn chained_gpu_stages_equal_the_unsplit_model_and_the_cpu() {
	let cfg = ModelConfig::preset("small").unwrap();
	let dev = gpu();
	let (x, y) = (tokens(&cfg, 2, 32, &dev, 0), tokens(&cfg, 2, 32, &dev, 1));
	let mut split = Pipeline::new(&cfg, 3, DType::F32, &dev, None).unwrap();
	let mut whole = Pipeline::new(&cfg, 3, DType::F32, &dev, None).unwrap();
	let l_split = split.forward_backward(&x, &y).unwrap();
	let l_whole = whole.forward_backward_unsplit(&x, &y).unwrap();
	let mut cpu = Pipeline::new(&cfg, 3, DType::F32, &Device::Cpu, None).unwrap();
	let l_cpu = cpu
		.forward_backward(&x.to_device(&Device::Cpu).unwrap(), &y.to_device(&Device::Cpu).unwrap())
		.unwrap();
	println!(
		"small chained loss: gpu split {l_split:.7} · gpu unsplit {l_whole:.7} · cpu {l_cpu:.7}"
	);
	assert!((l_split - l_whole).abs() < 1e-5);
	assert!((l_split - l_cpu).abs() < 1e-4);
	for (s, (a, b)) in split.stages_mut().iter_mut().zip(whole.stages_mut()).enumerate() {
		let (ga, _) = a.take_gradient().unwrap();
		let (gb, _) = b.take_gradient().unwrap();
		let (abs, rel) = errors(&ga, &gb);
		println!(
			"small stage {s} gradient, split vs unsplit on the gpu: abs {abs:.3e} rel {rel:.3e}"
		);
		assert!(rel < 1e-4, "stage {s}: {rel:.3e}");
	}
}

#[test]
fn the_cpu_optimizer_step_leaves_gpu_and_cpu_replicas_bit_identical() {
	let cfg = ModelConfig::preset("small").unwrap();
	let dev = gpu();
	for s in 0..cfg.n_stages() {
		let mut cpu = Stage::new(&cfg, s, 11, DType::F32, &Device::Cpu).unwrap();
		let mut cuda = Stage::new(&cfg, s, 11, DType::F32, &dev).unwrap();
		assert_eq!(cpu.state_hash().unwrap(), cuda.state_hash().unwrap(), "stage {s} at init");
		let grad: Vec<f32> = (0..cpu.param_count())
			.map(|i| ((i * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0)
			.collect();
		let opts = StepOptions::default();
		for _ in 0..3 {
			cpu.apply_gradient(&grad, &opts, 1).unwrap();
			cuda.apply_gradient(&grad, &opts, 1).unwrap();
		}
		assert_eq!(cpu.flat_params().unwrap(), cuda.flat_params().unwrap(), "stage {s}");
		assert_eq!(cpu.state_hash().unwrap(), cuda.state_hash().unwrap(), "stage {s}");
	}
}
