//! `iota-train`: the single-process baseline trainer.
//!
//! Trains every stage of a preset (or JSON config) chained in one process, bottleneck on or off,
//! optionally sending each cut through the wire codec, on a plain-text corpus with a BPE
//! tokenizer (trained on first use and saved). Shows a progress bar with tokens/s and loss and
//! writes `config.json`, `loss.csv`, `loss.png` and `summary.json` into the run directory.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use iota_model::data::{self, Corpus};
use iota_model::plot::{plot_png, write_csv};
use iota_model::run::{train, RunOptions};
use iota_model::{DeviceSpec, Encoding, ModelConfig};

#[derive(Parser, Debug)]
#[command(about = "Single-process baseline trainer for the iota-rs stage model")]
struct Args {
	/// Model preset: tiny, small (ref-1.5b and ref-15b are for counting only).
	#[arg(long, default_value = "small")]
	preset: String,
	/// JSON model config (overrides --preset).
	#[arg(long)]
	config: Option<PathBuf>,
	/// Corpus: a .txt file or a directory of them.
	#[arg(long, default_value = data::DEFAULT_CORPUS)]
	data: PathBuf,
	/// tokenizer.json to load; trained on the corpus and saved here if missing
	/// (default: data/tokenizer-VOCAB.json).
	#[arg(long)]
	tokenizer: Option<PathBuf>,
	/// Documents held out for evaluation (the last ones in file-name order).
	#[arg(long, default_value_t = 2)]
	heldout_docs: usize,
	/// Compute device of the forward and backward passes: cpu, cuda or cuda:N (the AdamW step runs
	/// on the CPU either way).
	#[arg(long, default_value = "cpu")]
	device: DeviceSpec,
	/// Optimizer steps.
	#[arg(long, default_value_t = 300)]
	steps: usize,
	/// Rows per micro-batch.
	#[arg(long, default_value_t = 8)]
	batch: usize,
	/// Micro-batches accumulated per step.
	#[arg(long, default_value_t = 1)]
	micro_batches: usize,
	/// Tokens per row (default: min(128, max_seq_len)).
	#[arg(long)]
	seq_len: Option<usize>,
	/// Peak learning rate.
	#[arg(long, default_value_t = 1e-3)]
	lr: f32,
	/// Warm-up steps.
	#[arg(long, default_value_t = 20)]
	warmup: usize,
	/// AdamW weight decay.
	#[arg(long, default_value_t = 0.1)]
	weight_decay: f32,
	/// Global gradient-clipping norm (0 = off).
	#[arg(long, default_value_t = 1.0)]
	max_norm: f32,
	/// Turn the bottleneck off (uncompressed baseline).
	#[arg(long)]
	no_bottleneck: bool,
	/// Bottleneck width b (default: the preset's).
	#[arg(long)]
	bottleneck_width: Option<usize>,
	/// What crosses a cut: none (in memory), f32, bf16 or u8.
	#[arg(long, default_value = "none")]
	wire: String,
	/// Weight-initialisation and data-order seed.
	#[arg(long, default_value_t = 0)]
	seed: u64,
	/// Held-out evaluation every N steps (0: only at the end).
	#[arg(long, default_value_t = 50)]
	eval_every: usize,
	/// Held-out micro-batches per evaluation.
	#[arg(long, default_value_t = 4)]
	eval_batches: usize,
	/// Run directory (default: runs/PRESET-UNIXTIME).
	#[arg(long)]
	out: Option<PathBuf>,
	/// Also save each stage's safetensors checkpoint into the run directory.
	#[arg(long)]
	save_stages: bool,
}

fn main() -> Result<()> {
	let a = Args::parse();
	let mut cfg = match &a.config {
		Some(p) => ModelConfig::from_json(
			&std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
		)?,
		None => ModelConfig::preset(&a.preset)?,
	};
	if a.no_bottleneck {
		cfg = cfg.with_bottleneck(None);
	} else if let Some(b) = a.bottleneck_width {
		cfg = cfg.with_bottleneck(Some(b));
	}
	cfg.validate()?;
	if cfg.total_param_count()? > 200_000_000 {
		bail!(
			"{} has {} parameters: reference shapes are for counting, not for CPU training",
			a.preset,
			cfg.total_param_count()?
		);
	}
	let wire = match a.wire.as_str() {
		"none" => None,
		w => Some(Encoding::parse(w)?),
	};
	let seq_len = a.seq_len.unwrap_or(cfg.max_seq_len.min(128));
	let tok_path = a
		.tokenizer
		.clone()
		.unwrap_or_else(|| PathBuf::from(format!("data/tokenizer-{}.json", cfg.vocab_size)));
	let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
	let out = a
		.out
		.clone()
		.unwrap_or_else(|| PathBuf::from(format!("runs/{}-{stamp}", a.preset)));
	std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

	eprintln!("corpus {} · tokenizer {}", a.data.display(), tok_path.display());
	let corpus = Corpus::prepare(
		&a.data,
		Some(&tok_path),
		cfg.vocab_size,
		cfg.vocab_size,
		a.heldout_docs,
		seq_len,
		a.seed,
	)?;
	eprintln!(
        "model: {} parameters in {} stages, wire width {} ({}x), {} · train rows {} · held-out rows {}",
        cfg.total_param_count()?,
        cfg.n_stages(),
        cfg.wire_width(),
        cfg.width_ratio(),
        wire.map_or("in-memory cuts", |e| e.as_str()),
        corpus.train.rows(),
        corpus.heldout.rows()
    );
	std::fs::write(out.join("config.json"), serde_json::to_string_pretty(&cfg)?)?;

	let opts = RunOptions {
		steps: a.steps,
		batch: a.batch,
		micro_batches: a.micro_batches,
		lr: a.lr,
		warmup: a.warmup,
		weight_decay: a.weight_decay,
		max_norm: (a.max_norm > 0.0).then_some(a.max_norm),
		seed: a.seed,
		eval_every: a.eval_every,
		eval_batches: a.eval_batches,
		wire,
		..RunOptions::default()
	};
	let bar = ProgressBar::new(a.steps as u64);
	bar.set_style(
		ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")?
			.progress_chars("=> "),
	);
	let mut last_eval = None;
	let device = a.device.open()?;
	let (pipeline, log) = train(&cfg, &corpus, &opts, &device, |r| {
		if r.eval_loss.is_some() {
			last_eval = r.eval_loss;
		}
		let ev = last_eval.map(|e| format!(" · held-out {e:.3}")).unwrap_or_default();
		bar.set_message(format!(
			"loss {:.3}{ev} · {:.0} tok/s · lr {:.2e}",
			r.loss, r.tokens_per_s, r.lr
		));
		bar.inc(1);
	})?;
	bar.finish();

	write_csv(out.join("loss.csv"), &log.rows)?;
	let train_pts: Vec<(f64, f64)> =
		log.rows.iter().map(|r| (r.step as f64, r.loss as f64)).collect();
	let mut eval_pts = vec![(0.0, log.initial_eval as f64)];
	eval_pts.extend(log.rows.iter().filter_map(|r| r.eval_loss.map(|e| (r.step as f64, e as f64))));
	let title = format!(
		"iota-train {} · {} params · width ratio {}x · wire {}",
		a.preset,
		cfg.total_param_count()?,
		cfg.width_ratio(),
		a.wire
	);
	plot_png(
		out.join("loss.png"),
		&title,
		"step",
		&[("train", train_pts), ("held-out", eval_pts)],
	)?;
	if a.save_stages {
		for s in pipeline.stages() {
			s.save(out.join(format!("stage{}.safetensors", s.index())))?;
		}
	}
	let tps = log.tokens as f64 / log.train_seconds;
	let summary = serde_json::json!({
		"preset": a.preset, "params": cfg.total_param_count()?, "bottleneck": cfg.bottleneck,
		"wire_width": cfg.wire_width(), "wire": a.wire, "steps": a.steps, "tokens": log.tokens,
		"train_seconds": log.train_seconds, "tokens_per_s": tps,
		"initial_heldout_loss": log.initial_eval, "final_heldout_loss": log.final_eval,
		"final_train_loss": log.rows.last().map(|r| r.loss), "wire_bytes": log.wire_bytes,
		"tokenizer": tok_path,
	});
	std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
	println!(
		"done: {} tokens in {:.1} s ({tps:.0} tokens/s) · held-out loss {:.3} -> {:.3} · {}",
		log.tokens,
		log.train_seconds,
		log.initial_eval,
		log.final_eval,
		out.display()
	);
	Ok(())
}
