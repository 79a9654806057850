//! `iota-generate`: text from a trained model. Reads a run directory that `iota-train --save-stages`
//! wrote (`config.json`, `stage{N}.safetensors`, `summary.json` for the wire codec and tokenizer),
//! chains the stages as training did (same wire codec across the cuts) and completes each prompt
//! ([`iota_model::generate`]: temperature, top-k, top-p, seeded).
//!
//! ```sh
//! cargo run --release -p iota-model --bin iota-train -- --preset tiny --steps 100 --save-stages --out runs/t
//! cargo run --release -p iota-model --bin iota-generate -- --run-dir runs/t --prompt "ROMEO:"
//! ```

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device};
use clap::Parser;
use iota_model::data::load_tokenizer;
use iota_model::generate::Sampling;
use iota_model::{Encoding, ModelConfig, Pipeline};

#[derive(Parser, Debug)]
#[command(about = "Complete prompts with a model trained by iota-train --save-stages")]
struct Args {
	/// Run directory: config.json, stage0.safetensors … stage{N-1}.safetensors (and summary.json).
	#[arg(long)]
	run_dir: PathBuf,
	/// tokenizer.json (default: the one summary.json names, else data/tokenizer-VOCAB.json).
	#[arg(long)]
	tokenizer: Option<PathBuf>,
	/// Wire codec across the cuts: none, f32, bf16, u8 (default: summary.json's, else none).
	#[arg(long)]
	wire: Option<String>,
	/// A prompt; repeat for several.
	#[arg(long, required = true)]
	prompt: Vec<String>,
	/// Tokens to generate per prompt.
	#[arg(long, default_value_t = 64)]
	max_new_tokens: usize,
	/// Softmax temperature (0: greedy).
	#[arg(long, default_value_t = 0.8)]
	temperature: f32,
	/// Draw among the k most likely tokens (0: no limit).
	#[arg(long, default_value_t = 40)]
	top_k: usize,
	/// Draw among the most likely tokens with this much probability mass (1: no limit).
	#[arg(long, default_value_t = 0.95)]
	top_p: f32,
	/// Seed of the draws.
	#[arg(long, default_value_t = 0)]
	seed: u64,
}

fn main() -> Result<()> {
	let a = Args::parse();
	let read = |name: &str| {
		let p = a.run_dir.join(name);
		std::fs::read(&p).with_context(|| format!("reading {}", p.display()))
	};
	let cfg: ModelConfig = serde_json::from_slice(&read("config.json")?)
		.context("config.json is not a model config")?;
	cfg.validate()?;
	let summary: serde_json::Value = match read("summary.json") {
		Ok(b) => serde_json::from_slice(&b).context("summary.json")?,
		Err(_) => serde_json::Value::Null,
	};
	let wire_name = a
		.wire
		.clone()
		.or_else(|| summary["wire"].as_str().map(str::to_owned))
		.unwrap_or_else(|| "none".into());
	let wire = match wire_name.as_str() {
		"none" => None,
		w => Some(Encoding::parse(w)?),
	};
	let tok_path = a
		.tokenizer
		.clone()
		.or_else(|| summary["tokenizer"].as_str().map(PathBuf::from))
		.unwrap_or_else(|| PathBuf::from(format!("data/tokenizer-{}.json", cfg.vocab_size)));
	let tokenizer = load_tokenizer(&tok_path)?;
	if tokenizer.get_vocab_size(true) > cfg.vocab_size {
		bail!(
			"{} has {} tokens, the model {}",
			tok_path.display(),
			tokenizer.get_vocab_size(true),
			cfg.vocab_size
		);
	}

	let mut pipeline = Pipeline::new(&cfg, 0, DType::F32, &Device::Cpu, wire)?;
	for s in pipeline.stages_mut() {
		let p = a.run_dir.join(format!("stage{}.safetensors", s.index()));
		s.load(&p).with_context(|| format!("loading {}", p.display()))?;
	}
	let sampling = Sampling {
		max_new_tokens: a.max_new_tokens,
		temperature: a.temperature,
		top_k: a.top_k,
		top_p: a.top_p,
		seed: a.seed,
	};
	sampling.validate()?;
	for prompt in &a.prompt {
		let ids = tokenizer
			.encode(prompt.as_str(), false)
			.map_err(|e| anyhow::anyhow!("tokenizing {prompt:?}: {e}"))?
			.get_ids()
			.to_vec();
		let new = pipeline.generate(&ids, &sampling)?;
		let text = tokenizer.decode(&new, true).map_err(|e| anyhow::anyhow!("decoding: {e}"))?;
		println!("{prompt}{text}");
		println!("---");
	}
	Ok(())
}
