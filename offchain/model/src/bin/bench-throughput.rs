//! `bench-throughput`: train-step throughput of a preset with the bottleneck on vs off, and the
//! achieved GFLOP/s as a fraction of a plain candle f32 matmul measured in the same process.
//!
//! Model FLOPs per trained token: `6 · N_matmul` (forward 2, backward 4, every Linear weight and
//! the LM head; the embedding lookup is free) plus attention `12 · n_layers · T · d_model`
//! (QKᵀ and AV, full T×T as computed). Run with `RAYON_NUM_THREADS=1` for the per-core figure.
//! Tokens/s is taken from the fastest timed step (the mean is printed too) and the matmul is the
//! best of several runs: on a shared machine both sides of the ratio are the least disturbed figure.

use std::time::Instant;

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use clap::Parser;
use iota_model::{ModelConfig, Pipeline, StepOptions};

#[derive(Parser, Debug)]
#[command(about = "Train-step tokens/s (bottleneck on vs off) and GFLOP/s vs a candle f32 matmul")]
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
}

/// FLOPs of one training step on `tokens` tokens of rows of length `t`.
fn train_flops(cfg: &ModelConfig, tokens: f64, t: f64) -> Result<f64> {
	let mut matmul_params = 0usize;
	for s in 0..cfg.n_stages() {
		for p in iota_model::llama::param_specs(cfg, s)? {
			if p.shape.len() == 2 && p.name != "model.embed_tokens.weight" {
				matmul_params += p.numel();
			}
		}
	}
	let attn = 12.0 * cfg.n_layers as f64 * t * cfg.d_model as f64;
	Ok(tokens * (6.0 * matmul_params as f64 + attn))
}

/// GFLOP/s of `[m, k] x [k, n]` f32 matmuls, best of `reps` after a warm-up.
fn matmul_gflops(m: usize, k: usize, n: usize, reps: usize) -> Result<f64> {
	let dev = Device::Cpu;
	let a = Tensor::randn(0f32, 1.0, (m, k), &dev)?;
	let b = Tensor::randn(0f32, 1.0, (k, n), &dev)?;
	a.matmul(&b)?;
	let mut best = f64::INFINITY;
	for _ in 0..reps {
		let t0 = Instant::now();
		let c = a.matmul(&b)?;
		c.sum_all()?.to_scalar::<f32>()?;
		best = best.min(t0.elapsed().as_secs_f64());
	}
	Ok(2.0 * (m * k * n) as f64 / best / 1e9)
}

fn tokens_per_s(cfg: &ModelConfig, a: &Args) -> Result<f64> {
	let dev = Device::Cpu;
	let mut p = Pipeline::new(cfg, 0, DType::F32, &dev, None)?;
	let ids: Vec<u32> = (0..a.batch * (a.seq_len + 1))
		.map(|i| ((i * 7919) % cfg.vocab_size) as u32)
		.collect();
	let row = |off: usize| -> Result<Tensor> {
		let v: Vec<u32> = (0..a.batch)
			.flat_map(|b| {
				ids[b * (a.seq_len + 1) + off..b * (a.seq_len + 1) + off + a.seq_len].to_vec()
			})
			.collect();
		Ok(Tensor::from_vec(v, (a.batch, a.seq_len), &dev)?)
	};
	let (x, y) = (row(0)?, row(1)?);
	let opts = StepOptions::default();
	p.train_step(&[(x.clone(), y.clone())], &opts)?;
	let (mut fb, mut st, mut best) = (0.0, 0.0, f64::INFINITY);
	for _ in 0..a.steps {
		let t0 = Instant::now();
		p.forward_backward(&x, &y)?;
		let t1 = Instant::now();
		p.step(&opts)?;
		fb += (t1 - t0).as_secs_f64();
		st += t1.elapsed().as_secs_f64();
		best = best.min(t0.elapsed().as_secs_f64());
	}
	let tokens = (a.batch * a.seq_len) as f64;
	let mean = (fb + st) / a.steps as f64;
	println!(
        "  per step: forward+backward {:.3} s · optimizer {:.3} s (mean {:.0} tokens/s, best step {:.0} tokens/s)",
        fb / a.steps as f64,
        st / a.steps as f64,
        tokens / mean,
        tokens / best
    );
	// The best step is the figure least disturbed by other processes on a shared machine.
	Ok(tokens / best)
}

fn main() -> Result<()> {
	let a = Args::parse();
	let cfg = ModelConfig::preset(&a.preset)?;
	let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "unset".into());
	let tokens = (a.batch * a.seq_len) as f64;
	println!(
		"preset {} · {} params · B {} · T {} · {} timed steps · RAYON_NUM_THREADS={threads}",
		a.preset,
		cfg.total_param_count()?,
		a.batch,
		a.seq_len,
		a.steps
	);

	let mm_model = matmul_gflops(a.batch * a.seq_len, cfg.d_model, cfg.ffn_dim, 5)?;
	let mm_square = matmul_gflops(1024, 1024, 1024, 3)?;
	let mm = mm_model.max(mm_square);
	println!("candle f32 matmul: [{}x{}]x[{}x{}] {mm_model:.1} GFLOP/s · 1024³ {mm_square:.1} GFLOP/s · reference {mm:.1}", a.batch * a.seq_len, cfg.d_model, cfg.d_model, cfg.ffn_dim);

	let on = cfg.clone();
	let off = cfg.clone().with_bottleneck(None);
	let mut results = Vec::new();
	for (name, c) in [("bottleneck on", &on), ("bottleneck off", &off)] {
		let tps = tokens_per_s(c, &a)?;
		let gflops = train_flops(c, tokens, a.seq_len as f64)? / tokens * tps / 1e9;
		println!(
			"{name:<15} width {:>4}: {tps:>8.0} tokens/s · {gflops:>6.1} GFLOP/s · {:.2} of matmul",
			c.wire_width(),
			gflops / mm
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
