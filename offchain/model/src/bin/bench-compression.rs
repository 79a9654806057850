//! `bench-compression`: the loss cost of compressing what crosses the cuts.
//!
//! Trains the same preset for the same tokens (same seed, same sample ids, same schedule) at each
//! wire compression ratio versus a bf16 `[B, T, d_model]` activation and prints the final
//! held-out loss as a ratio to the uncompressed 1x run:
//! - `1`: no bottleneck, bf16 on the wire;
//! - `r` up to `--u8-from` (exclusive): bottleneck width `d_model / r`, bf16 on the wire;
//! - `r` from `--u8-from`: width `d_model / (r / 2)` with per-token uint8 (2x more).
//!
//! Every tensor that crosses a cut is really encoded and decoded (activations forward,
//! gradients backward). Writes `compression.csv` and `compression.png` to `--out`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use candle_core::Device;
use clap::Parser;
use iota_model::data::{self, Corpus};
use iota_model::plot::plot_png;
use iota_model::run::{train, RunOptions};
use iota_model::{Encoding, ModelConfig};

#[derive(Parser, Debug)]
#[command(about = "Final held-out loss vs wire compression ratio, relative to 1x")]
struct Args {
	/// Model preset.
	#[arg(long, default_value = "small")]
	preset: String,
	/// Compression ratios to train at (1 = no bottleneck).
	#[arg(long, value_delimiter = ',', default_value = "1,8,16,32,64,128")]
	ratios: Vec<usize>,
	/// Ratios at or above this use uint8 (width ratio r/2).
	#[arg(long, default_value_t = 128)]
	u8_from: usize,
	/// Optimizer steps per run.
	#[arg(long, default_value_t = 300)]
	steps: usize,
	/// Rows per step.
	#[arg(long, default_value_t = 8)]
	batch: usize,
	/// Tokens per row.
	#[arg(long, default_value_t = 128)]
	seq_len: usize,
	/// Peak learning rate.
	#[arg(long, default_value_t = 1e-3)]
	lr: f32,
	/// Warm-up steps.
	#[arg(long, default_value_t = 20)]
	warmup: usize,
	/// Held-out micro-batches for the final loss.
	#[arg(long, default_value_t = 8)]
	eval_batches: usize,
	/// Corpus.
	#[arg(long, default_value = data::DEFAULT_CORPUS)]
	data: PathBuf,
	/// tokenizer.json (trained and saved if missing; default data/tokenizer-VOCAB.json).
	#[arg(long)]
	tokenizer: Option<PathBuf>,
	/// Output directory.
	#[arg(long, default_value = "runs/bench-compression")]
	out: PathBuf,
}

fn main() -> Result<()> {
	let a = Args::parse();
	let base = ModelConfig::preset(&a.preset)?;
	let d = base.d_model;
	let mut plan = Vec::new();
	for &r in &a.ratios {
		let (width_ratio, enc) = if r == 1 {
			(1, Encoding::Bf16)
		} else if r >= a.u8_from {
			(r / 2, Encoding::U8)
		} else {
			(r, Encoding::Bf16)
		};
		if width_ratio == 0 || d % width_ratio != 0 {
			bail!("ratio {r}: width ratio {width_ratio} does not divide d_model {d}");
		}
		let cfg = if r == 1 {
			base.clone().with_bottleneck(None)
		} else {
			base.clone().with_bottleneck(Some(d / width_ratio))
		};
		plan.push((r, cfg, enc));
	}
	if plan.first().map(|p| p.0) != Some(1) {
		bail!("the first ratio must be 1 (the uncompressed reference)");
	}
	let tok_path = a
		.tokenizer
		.clone()
		.unwrap_or_else(|| PathBuf::from(format!("data/tokenizer-{}.json", base.vocab_size)));
	let corpus = Corpus::prepare(
		&a.data,
		Some(&tok_path),
		base.vocab_size,
		base.vocab_size,
		2,
		a.seq_len,
		0,
	)?;
	std::fs::create_dir_all(&a.out)?;
	let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "unset".into());
	println!(
        "preset {} · {} steps × {} rows × {} tokens = {} tokens per run · RAYON_NUM_THREADS={threads}",
        a.preset,
        a.steps,
        a.batch,
        a.seq_len,
        a.steps * a.batch * a.seq_len
    );
	println!(
		"{:>6} {:>6} {:>5} {:>10} {:>10} {:>10} {:>8} {:>12}",
		"ratio", "width", "wire", "params", "start", "final", "vs 1x", "bytes/cut"
	);
	let opts = RunOptions {
		steps: a.steps,
		batch: a.batch,
		lr: a.lr,
		warmup: a.warmup,
		eval_every: 0,
		eval_batches: a.eval_batches,
		..RunOptions::default()
	};
	let mut csv = String::from("ratio,width,encoding,params,initial_heldout,final_heldout,ratio_vs_1x,final_train_loss,tokens,seconds\n");
	let mut reference = None;
	let mut series = Vec::new();
	for (r, cfg, enc) in plan {
		let o = RunOptions { wire: Some(enc), ..opts.clone() };
		let (_, log) = train(&cfg, &corpus, &o, &Device::Cpu, |_| {})?;
		let reference_loss = *reference.get_or_insert(log.final_eval);
		let rel = log.final_eval / reference_loss;
		// Bytes of one activation message per cut per micro-batch, measured by encoding one.
		let probe = candle_core::Tensor::zeros(
			(a.batch, a.seq_len, cfg.wire_width()),
			candle_core::DType::F32,
			&Device::Cpu,
		)?;
		let bytes =
			iota_model::wire::encode(&probe, iota_model::wire::Kind::Activation, enc)?.len();
		println!(
			"{r:>5}x {:>6} {:>5} {:>10} {:>10.4} {:>10.4} {rel:>8.4} {bytes:>12}",
			cfg.wire_width(),
			enc.as_str(),
			cfg.total_param_count()?,
			log.initial_eval,
			log.final_eval
		);
		csv += &format!(
			"{r},{},{},{},{},{},{rel},{},{},{:.1}\n",
			cfg.wire_width(),
			enc.as_str(),
			cfg.total_param_count()?,
			log.initial_eval,
			log.final_eval,
			log.rows.last().map_or(f32::NAN, |x| x.loss),
			log.tokens,
			log.train_seconds
		);
		std::fs::write(a.out.join("compression.csv"), &csv)?;
		series.push((
			format!("{r}x"),
			log.rows.iter().map(|x| (x.tokens as f64, x.loss as f64)).collect::<Vec<_>>(),
		));
	}
	let named: Vec<(&str, Vec<(f64, f64)>)> =
		series.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
	plot_png(
		a.out.join("compression.png"),
		&format!("{}: training loss by wire compression", a.preset),
		"tokens",
		&named,
	)?;
	println!("wrote {}/compression.csv and compression.png", a.out.display());
	Ok(())
}
