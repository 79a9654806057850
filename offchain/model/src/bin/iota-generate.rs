//! `iota-generate`: text from a trained model. Reads a run directory that `iota-train --save-stages`
//! wrote (`config.json`, `stage{N}.safetensors`, `summary.json` for the wire codec and tokenizer),
//! chains the stages as training did (same wire codec across the cuts), or a Hugging Face folder
//! (`--hf`, as `iota-export` and `iota-orchestrator export` write it), and completes each prompt
//! ([`iota_model::generate`]: temperature, top-k, top-p, seeded).
//!
//! ```sh
//! cargo run --release -p iota-model --bin iota-train -- --preset tiny --steps 100 --save-stages --out runs/t
//! cargo run --release -p iota-model --bin iota-generate -- --run-dir runs/t --prompt "ROMEO:"
//! ```

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use iota_model::data::load_tokenizer;
use iota_model::generate::Sampling;

#[derive(Parser, Debug)]
#[command(about = "Complete prompts with a model trained by iota-train --save-stages")]
struct Args {
	/// Run directory: config.json, stage0.safetensors … stage{N-1}.safetensors (and summary.json).
	#[arg(long, required_unless_present = "hf", conflicts_with = "hf")]
	run_dir: Option<PathBuf>,
	/// A Hugging Face folder (`iota-export`'s or `iota-orchestrator export`'s output: config.json,
	/// model.safetensors, tokenizer.json) instead of a run directory.
	#[arg(long)]
	hf: Option<PathBuf>,
	/// tokenizer.json (default: the HF folder's, or the one summary.json names, else
	/// data/tokenizer-VOCAB.json).
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
	let (mut pipeline, tok_default) = match (&a.run_dir, &a.hf) {
		(_, Some(dir)) => {
			let p = iota_model::hf::import(dir, None, None)?;
			(p, dir.join(iota_model::hf::TOKENIZER_FILE))
		},
		(Some(dir), None) => {
			let run = iota_model::run::load_saved_run(dir, a.wire.as_deref())?;
			let vocab = run.pipeline.config().vocab_size;
			let tok = run
				.tokenizer
				.unwrap_or_else(|| PathBuf::from(format!("data/tokenizer-{vocab}.json")));
			(run.pipeline, tok)
		},
		(None, None) => bail!("give --run-dir or --hf"),
	};
	let tok_path = a.tokenizer.clone().unwrap_or(tok_default);
	let tokenizer = load_tokenizer(&tok_path)?;
	let sampling = Sampling {
		max_new_tokens: a.max_new_tokens,
		temperature: a.temperature,
		top_k: a.top_k,
		top_p: a.top_p,
		seed: a.seed,
	};
	sampling.validate()?;
	for prompt in &a.prompt {
		let text = pipeline
			.complete(&tokenizer, prompt, &sampling)
			.map_err(|e| anyhow::anyhow!("{}: {e}", tok_path.display()))?;
		println!("{prompt}{text}");
		println!("---");
	}
	Ok(())
}
