//! `iota-export`: a model trained by `iota-train --save-stages` as a Hugging Face folder
//! ([`iota_model::hf`]: `config.json`, `model.safetensors`, `generation_config.json`, and the run's
//! `tokenizer.json`), loadable by transformers (`LlamaForCausalLM`; a model with the bottleneck as
//! `IotaForCausalLM` from the folder's `modeling_iota.py`, with `trust_remote_code=True`) and by
//! `iota-generate --hf`.
//!
//! ```sh
//! cargo run --release -p iota-model --bin iota-train -- --preset tiny --steps 100 --save-stages --out runs/t
//! cargo run --release -p iota-model --bin iota-export -- --run-dir runs/t --out runs/t/hf
//! ```

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
	about = "Write a model trained by iota-train --save-stages as a Hugging Face folder (a Llama, or with the bottleneck an IotaForCausalLM with its modeling file)"
)]
struct Args {
	/// Run directory: config.json, stage0.safetensors … stage{N-1}.safetensors (and summary.json).
	#[arg(long)]
	run_dir: PathBuf,
	/// Output folder (created; its config.json, model.safetensors, generation_config.json,
	/// tokenizer.json and, with the bottleneck, modeling_iota.py are overwritten).
	#[arg(long)]
	out: PathBuf,
	/// tokenizer.json to include (default: the one summary.json names, if it exists).
	#[arg(long)]
	tokenizer: Option<PathBuf>,
}

fn main() -> Result<()> {
	let a = Args::parse();
	let run = iota_model::run::load_saved_run(&a.run_dir, None)?;
	let tokenizer = match (&a.tokenizer, &run.tokenizer) {
		(Some(p), _) => Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?),
		(None, Some(p)) => std::fs::read(p).ok(),
		(None, None) => None,
	};
	let pipeline = run.pipeline;
	let n = iota_model::hf::export(&pipeline, &a.out, tokenizer.as_deref())?;
	println!(
		"wrote {} ({n} parameters{})",
		a.out.display(),
		if tokenizer.is_some() { ", with the tokenizer" } else { ", no tokenizer" }
	);
	Ok(())
}
