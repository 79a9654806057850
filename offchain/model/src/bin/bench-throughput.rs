//! `bench-throughput`: train-step throughput of a preset with the bottleneck on vs off, and the
//! achieved GFLOP/s as a fraction of a plain candle matmul measured in the same process, on the CPU or
//! a CUDA device (`--device cuda:N`), in f32 or bf16 compute (`--dtype`).
//!
//! Model FLOPs per trained token: `6 ·` the forward multiply-accumulates of
//! [`ModelConfig::stage_macs_per_token`] (every weight matrix and the LM head, causal attention at its
//! mean `(T + 1) / 2` attended positions; forward 2, backward 4 FLOPs per MAC). Run with
//! `RAYON_NUM_THREADS=1` for the per-core CPU figure. Tokens/s is taken from the fastest timed step (the
//! mean is printed too) and the matmul is the best of several runs: on a shared machine both sides of
//! the ratio are the least disturbed figure.
//!
//! `--stage S` times one stage alone (forward + backward of `[B, T]` rows: token ids into the head,
//! random activations into any other stage, random output gradients out of a non-final one) instead of
//! the whole model, which is how a miner holding one stage of a large preset (`ref-1.5b`) runs;
//! `--peak-tflops` adds the model FLOP utilisation (MFU) against the peak TFLOP/s given for the device
//! and dtype (`scripts/device-check.sh` passes 790 for an H200 in bf16, issue 17's figure).
//! The optimizer line is the CPU AdamW step over the flat f32 parameters, including the copies off
//! and back onto the device (docs/design.md §9: the step is the CPU's code on every device).

use std::time::Instant;

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use clap::Parser;
use iota_model::{DeviceSpec, ModelConfig, Pipeline, Stage, StepOptions};

#[derive(Parser, Debug)]
#[command(about = "Train-step tokens/s (bottleneck on vs off) and GFLOP/s vs a candle matmul")]
struct Args {
	/// Model preset.
	#[arg(long, default_value = "small")]
	preset: String,
	/// Timed optimizer steps per configuration (after one untimed warm-up step).
	#[arg(long, default_value_t = 5)]
	steps: usize,
	/// Rows per step.
	#[arg(long, default_value_t = 8)]
	batch: usize,
	/// Tokens per row.
	#[arg(long, default_value_t = 128)]
	seq_len: usize,
	/// Compute device: cpu, cuda or cuda:N.
	#[arg(long, default_value = "cpu")]
	device: DeviceSpec,
	/// Compute dtype of the weights and activations: f32 or bf16.
	#[arg(long, default_value = "f32", value_parser = parse_dtype)]
	dtype: DType,
	/// Time only this stage (forward + backward, no optimizer step), bottleneck as the preset has it.
	#[arg(long)]
	stage: Option<usize>,
	/// The device's peak TFLOP/s at `--dtype`, to print the model FLOP utilisation (MFU).
	#[arg(long)]
	peak_tflops: Option<f64>,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
	match s {
		"f32" => Ok(DType::F32),
		"bf16" => Ok(DType::BF16),
		_ => Err(format!("unknown dtype {s:?}: expected f32 or bf16")),
	}
}

/// Training FLOPs per token of the stages in `stages` at rows of `t` tokens (6 per forward MAC).
fn train_flops_per_token(cfg: &ModelConfig, stages: &[usize], t: usize) -> Result<f64> {
	let mut macs = 0u64;
	for &s in stages {
		macs += cfg.stage_macs_per_token(s, t)?;
	}
	Ok(6.0 * macs as f64)
}

/// GFLOP/s of `[m, k] x [k, n]` matmuls in `dtype` on `dev`, best of `reps` after a warm-up.
fn matmul_gflops(
	m: usize,
	k: usize,
	n: usize,
	reps: usize,
	dev: &Device,
	dtype: DType,
) -> Result<f64> {
	let a = Tensor::randn(0f32, 1.0, (m, k), dev)?.to_dtype(dtype)?;
	let b = Tensor::randn(0f32, 1.0, (k, n), dev)?.to_dtype(dtype)?;
	a.matmul(&b)?;
	dev.synchronize()?;
	let mut best = f64::INFINITY;
	for _ in 0..reps {
		let t0 = Instant::now();
		let c = a.matmul(&b)?;
		dev.synchronize()?;
		best = best.min(t0.elapsed().as_secs_f64());
		drop(c);
	}
	Ok(2.0 * (m * k * n) as f64 / best / 1e9)
}

/// Deterministic token ids `[B, T]` (input) and their next tokens (targets) on `dev`.
fn token_rows(cfg: &ModelConfig, a: &Args, dev: &Device) -> Result<(Tensor, Tensor)> {
	let ids: Vec<u32> = (0..a.batch * (a.seq_len + 1))
		.map(|i| ((i * 7919) % cfg.vocab_size) as u32)
		.collect();
	let row = |off: usize| -> Result<Tensor> {
		let v: Vec<u32> = (0..a.batch)
			.flat_map(|b| {
				ids[b * (a.seq_len + 1) + off..b * (a.seq_len + 1) + off + a.seq_len].to_vec()
			})
			.collect();
		Ok(Tensor::from_vec(v, (a.batch, a.seq_len), dev)?)
	};
	Ok((row(0)?, row(1)?))
}

/// Best-step tokens/s of the whole model (forward, backward and the CPU optimizer step).
fn tokens_per_s(cfg: &ModelConfig, a: &Args, dev: &Device) -> Result<f64> {
	let mut p = Pipeline::new(cfg, 0, a.dtype, dev, None)?;
	let (x, y) = token_rows(cfg, a, dev)?;
	let opts = StepOptions::default();
	p.train_step(&[(x.clone(), y.clone())], &opts)?;
	let (mut fb, mut st, mut best) = (0.0, 0.0, f64::INFINITY);
	for _ in 0..a.steps {
		let t0 = Instant::now();
		p.forward_backward(&x, &y)?;
		dev.synchronize()?;
		let t1 = Instant::now();
		p.step(&opts)?;
		dev.synchronize()?;
		fb += (t1 - t0).as_secs_f64();
		st += t1.elapsed().as_secs_f64();
		best = best.min(t0.elapsed().as_secs_f64());
	}
	let tokens = (a.batch * a.seq_len) as f64;
	let mean = (fb + st) / a.steps as f64;
	println!(
		"  per step: forward+backward {:.3} s · optimizer with copies {:.3} s (mean {:.0} tokens/s, best step {:.0} tokens/s)",
		fb / a.steps as f64,
		st / a.steps as f64,
		tokens / mean,
		tokens / best
	);
	// The best step is the figure least disturbed by other processes on a shared machine.
	Ok(tokens / best)
}

/// Best tokens/s of stage `s` alone: forward and backward of one `[B, T]` batch (gradients accumulated,
/// no optimizer step; one CPU optimizer step with its copies is timed once at the end and printed).
fn stage_tokens_per_s(cfg: &ModelConfig, s: usize, a: &Args, dev: &Device) -> Result<f64> {
	let mut stage = Stage::new(cfg, s, 0, a.dtype, dev)?;
	let (ids, targets) = token_rows(cfg, a, dev)?;
	let input = if stage.is_first() {
		ids
	} else {
		let w = stage.input_width().unwrap_or(cfg.wire_width());
		Tensor::randn(0f32, 1.0, (a.batch, a.seq_len, w), dev)?.to_dtype(a.dtype)?
	};
	let grad_out = match stage.output_width() {
		Some(w) if !stage.is_last() => Some(
			(Tensor::randn(0f32, 1.0, (a.batch, a.seq_len, w), dev)? * 1e-3)?.to_dtype(a.dtype)?,
		),
		_ => None,
	};
	let pass = |stage: &mut Stage| -> Result<()> {
		match &grad_out {
			Some(g) => {
				let fwd = stage.forward(&input)?;
				stage.backward(fwd, g)?;
			},
			None => {
				let fwd = stage.forward_loss(&input, &targets)?;
				stage.backward_loss(fwd)?;
			},
		}
		Ok(())
	};
	pass(&mut stage)?;
	dev.synchronize()?;
	let (mut total, mut best) = (0.0, f64::INFINITY);
	for _ in 0..a.steps {
		let t0 = Instant::now();
		pass(&mut stage)?;
		dev.synchronize()?;
		let dt = t0.elapsed().as_secs_f64();
		total += dt;
		best = best.min(dt);
	}
	let t0 = Instant::now();
	stage.step(&StepOptions::default())?;
	dev.synchronize()?;
	let opt = t0.elapsed().as_secs_f64();
	let tokens = (a.batch * a.seq_len) as f64;
	println!(
		"  stage {s}: {} params · forward+backward mean {:.4} s, best {:.4} s · one CPU optimizer step with copies {opt:.3} s",
		stage.param_count(),
		total / a.steps as f64,
		best
	);
	Ok(tokens / best)
}

fn main() -> Result<()> {
	let a = Args::parse();
	let cfg = ModelConfig::preset(&a.preset)?;
	let dev = a.device.open()?;
	let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "unset".into());
	println!(
		"preset {} · {} params · B {} · T {} · {} timed steps · device {} · {:?} · RAYON_NUM_THREADS={threads}",
		a.preset,
		cfg.total_param_count()?,
		a.batch,
		a.seq_len,
		a.steps,
		a.device,
		a.dtype
	);

	let mm_model = matmul_gflops(a.batch * a.seq_len, cfg.d_model, cfg.ffn_dim, 5, &dev, a.dtype)?;
	let mm_square = matmul_gflops(1024, 1024, 1024, 3, &dev, a.dtype)?;
	let mm = mm_model.max(mm_square);
	println!(
		"candle {:?} matmul: [{}x{}]x[{}x{}] {mm_model:.1} GFLOP/s · 1024³ {mm_square:.1} GFLOP/s · reference {mm:.1}",
		a.dtype,
		a.batch * a.seq_len,
		cfg.d_model,
		cfg.d_model,
		cfg.ffn_dim
	);
	let mfu = |gflops: f64| match a.peak_tflops {
		Some(p) => format!(" · MFU {:.1} % of {p} TFLOP/s", 100.0 * gflops / (p * 1e3)),
		None => String::new(),
	};

	if let Some(s) = a.stage {
		if s >= cfg.n_stages() {
			bail!("--stage {s}: preset {} has {} stages", a.preset, cfg.n_stages());
		}
		let tps = stage_tokens_per_s(&cfg, s, &a, &dev)?;
		let gflops = train_flops_per_token(&cfg, &[s], a.seq_len)? * tps / 1e9;
		println!(
			"stage {s} of {}: {tps:>8.0} tokens/s · {gflops:>8.1} GFLOP/s · {:.2} of matmul{}",
			cfg.n_stages(),
			gflops / mm,
			mfu(gflops)
		);
		return Ok(());
	}

	let on = cfg.clone();
	let off = cfg.clone().with_bottleneck(None);
	let mut results = Vec::new();
	for (name, c) in [("bottleneck on", &on), ("bottleneck off", &off)] {
		let tps = tokens_per_s(c, &a, &dev)?;
		let all: Vec<usize> = (0..c.n_stages()).collect();
		let gflops = train_flops_per_token(c, &all, a.seq_len)? * tps / 1e9;
		println!(
			"{name:<15} width {:>4}: {tps:>8.0} tokens/s · {gflops:>6.1} GFLOP/s · {:.2} of matmul{}",
			c.wire_width(),
			gflops / mm,
			mfu(gflops)
		);
		results.push((tps, gflops));
	}
	println!("ratio on/off tokens/s: {:.3}", results[0].0 / results[1].0);
	println!(
		"fraction of matmul (on, off): {:.2}, {:.2} (goal ≥ 0.5)",
		results[0].1 / mm,
		results[1].1 / mm
	);
	Ok(())
}
