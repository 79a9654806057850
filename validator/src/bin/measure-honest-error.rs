//! Measures the honest-error distribution the spot-check tolerances must absorb
//! (`iota_validator::tolerance`), and how far a cheater's perturbation lands.
//!
//! For presets `tiny` and `small`, every stage, forward outputs and input gradients of a real chained
//! pass (4 seeded token batches): recomputation twice, `RAYON_NUM_THREADS` 1/2/4/8, f32 against the same
//! math in f64 (the exact value a differently-rounding implementation scatters around), and the wire
//! round trip (f32/bf16/u8) against the f64 value. Prints the largest `ratio` of
//! [`iota_validator::tolerance::compare`] per row (pass iff ≤ 1) and the largest absolute/relative error.
//!
//! `cargo run -p iota-validator --bin measure-honest-error [-- --seq-len 32 --rows 2]`
//! (single-threaded process: it sets `RAYON_NUM_THREADS` itself between runs).

use candle_core::{DType, Device};
use iota_model::wire::{self, Expect, Kind};
use iota_model::{Encoding, ModelConfig, Stage};
use iota_validator::recompute::{self, Recomputed, StageInput};
use iota_validator::tolerance::compare;

fn act(r: &Recomputed) -> StageInput {
	StageInput::Activation { values: r.values.clone(), shape: r.shape }
}

fn set_threads(n: usize) {
	// Candle reads the variable at every matmul. Safe here: this binary never reads or writes the
	// environment from another thread.
	unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
}

#[derive(Default)]
struct Row {
	twice_max_abs: f32,
	threads_max_abs: f32,
	f64_ratio: f32,
	f64_rel: f32,
	wire_ratio: [f32; 3],
	cheat_ratio: [f32; 3],
	loss_diff: f32,
}

fn measure(out: &mut Row, f32_run: &dyn Fn() -> Recomputed, f64_value: &Recomputed, width: usize) {
	let a = f32_run();
	let b = f32_run();
	out.twice_max_abs = out
		.twice_max_abs
		.max(a.values.iter().zip(&b.values).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max));
	for n in [1, 2, 4, 8] {
		set_threads(n);
		let c = f32_run();
		out.threads_max_abs = out
			.threads_max_abs
			.max(a.values.iter().zip(&c.values).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max));
	}
	set_threads(1);
	let cmp = compare(&a.values, &f64_value.values, width, Encoding::F32).expect("same shape");
	out.f64_ratio = out.f64_ratio.max(cmp.max_ratio);
	out.f64_rel = out.f64_rel.max(cmp.max_rel_err);
	let rms = cmp.rms;
	for (i, enc) in [Encoding::F32, Encoding::Bf16, Encoding::U8].into_iter().enumerate() {
		let t = candle_core::Tensor::from_slice(&a.values, a.shape.as_slice(), &Device::Cpu)
			.expect("tensor");
		let bytes = wire::encode(&t, Kind::Activation, enc).expect("encode");
		let d = wire::decode_checked(&bytes, &Expect::btw(Kind::Activation, width, usize::MAX))
			.expect("decode");
		let c = compare(&d.values, &f64_value.values, width, enc).expect("same shape");
		out.wire_ratio[i] = out.wire_ratio[i].max(c.max_ratio);
		// A cheater: noise of 1% of the rms added before encoding (deterministic pattern).
		let noisy: Vec<f32> = a
			.values
			.iter()
			.enumerate()
			.map(|(k, &x)| x + 0.01 * rms * (((k * 7919) % 200) as f32 / 100.0 - 1.0))
			.collect();
		let t = candle_core::Tensor::from_slice(&noisy, a.shape.as_slice(), &Device::Cpu)
			.expect("tensor");
		let bytes = wire::encode(&t, Kind::Activation, enc).expect("encode");
		let d = wire::decode_checked(&bytes, &Expect::btw(Kind::Activation, width, usize::MAX))
			.expect("decode");
		let c = compare(&d.values, &f64_value.values, width, enc).expect("same shape");
		out.cheat_ratio[i] = out.cheat_ratio[i].max(c.max_ratio);
	}
	if let (Some(x), Some(y)) = (a.loss, f64_value.loss) {
		out.loss_diff = out.loss_diff.max((x - y).abs());
	}
}

fn main() {
	set_threads(1);
	let args: Vec<String> = std::env::args().collect();
	let arg = |name: &str, default: usize| -> usize {
		args.iter()
			.position(|a| a == name)
			.and_then(|i| args.get(i + 1))
			.and_then(|v| v.parse().ok())
			.unwrap_or(default)
	};
	let (seq_len, rows) = (arg("--seq-len", 32), arg("--rows", 2));
	println!("preset stage item      twice_abs threads_abs f64_ratio f64_rel   wire_ratio(f32 bf16 u8)     cheat1%_ratio(f32 bf16 u8)  loss_diff");
	for preset in ["tiny", "small"] {
		let cfg = ModelConfig::preset(preset).expect("preset");
		let width = cfg.wire_width();
		let n = cfg.n_stages();
		let mut s32: Vec<Stage> = (0..n)
			.map(|s| Stage::new(&cfg, s, 7, DType::F32, &Device::Cpu).expect("stage"))
			.collect();
		let mut s64: Vec<Stage> = (0..n)
			.map(|s| {
				let mut st = Stage::new(&cfg, s, 7, DType::F64, &Device::Cpu).expect("stage");
				st.set_flat_params(&s32[s].flat_params().expect("params")).expect("same params");
				st
			})
			.collect();
		let mut fwd_rows: Vec<Row> = (0..n).map(|_| Row::default()).collect();
		let mut bwd_rows: Vec<Row> = (0..n).map(|_| Row::default()).collect();
		for batch in 0..4u32 {
			let ids: Vec<u32> = (0..(rows * seq_len) as u32)
				.map(|i| {
					(i.wrapping_mul(2_654_435_761).wrapping_add(batch * 97) >> 7)
						% cfg.vocab_size as u32
				})
				.collect();
			let tokens = StageInput::Tokens { ids, rows };
			// The chain's real inputs (f32), stage by stage.
			let mut inputs = vec![tokens.clone()];
			for s in 0..n - 1 {
				let r = recompute::forward(&mut s32[s], &inputs[s], None).expect("forward");
				inputs.push(act(&r));
			}
			for s in 0..n {
				let targets = (s == n - 1).then_some(&tokens);
				let exact =
					recompute::forward(&mut s64[s], &inputs[s], targets).expect("f64 forward");
				let st = std::cell::RefCell::new(&mut s32[s]);
				let run = || {
					recompute::forward(&mut st.borrow_mut(), &inputs[s], targets).expect("forward")
				};
				measure(&mut fwd_rows[s], &run, &exact, width);
			}
			// Backward through the body stages, from the tail's input gradient down.
			let mut grad =
				act(&recompute::forward(&mut s32[n - 1], &inputs[n - 1], Some(&tokens))
					.expect("tail"));
			for s in (1..n - 1).rev() {
				let exact =
					recompute::backward(&mut s64[s], &inputs[s], &grad).expect("f64 backward");
				let st = std::cell::RefCell::new(&mut s32[s]);
				let run = || {
					recompute::backward(&mut st.borrow_mut(), &inputs[s], &grad).expect("backward")
				};
				measure(&mut bwd_rows[s], &run, &exact, width);
				grad = act(&run());
			}
		}
		for (item, rows_) in [("forward", &fwd_rows), ("backward", &bwd_rows)] {
			for (s, r) in rows_.iter().enumerate() {
				if item == "backward" && (s == 0 || s == n - 1) {
					continue;
				}
				println!(
					"{preset:6} {s:5} {item:9} {:9.2e} {:11.2e} {:9.4} {:9.2e} {:8.4} {:8.4} {:8.4}   {:8.2} {:8.2} {:8.2}   {:.2e}",
					r.twice_max_abs,
					r.threads_max_abs,
					r.f64_ratio,
					r.f64_rel,
					r.wire_ratio[0],
					r.wire_ratio[1],
					r.wire_ratio[2],
					r.cheat_ratio[0],
					r.cheat_ratio[1],
					r.cheat_ratio[2],
					r.loss_diff
				);
			}
		}
	}
}
