//! `iota-generate` on a run directory as `iota-train --save-stages` writes it (here: the `tiny` stages
//! at their seeded initial weights, a tokenizer trained on a few lines): it completes each prompt,
//! repeatably for a seed, and refuses a directory with a stage missing or a tokenizer larger than the
//! model's vocabulary, naming what is wrong. `iota-export` writes such a run (without the bottleneck)
//! as a Hugging Face folder, from which `iota-generate --hf` writes the same text.

use std::path::Path;
use std::process::Command;

use candle_core::{DType, Device};
use iota_model::data::{save_tokenizer, train_tokenizer};
use iota_model::{ModelConfig, Pipeline};

const LINES: &[&str] = &[
	"ROMEO: But soft, what light through yonder window breaks?",
	"JULIET: O Romeo, Romeo, wherefore art thou Romeo?",
	"MERCUTIO: A plague o' both your houses!",
];

/// The `tiny` stages with a vocabulary of `model_vocab`, a tokenizer trained to `tok_vocab` tokens.
fn run_dir(dir: &Path, model_vocab: usize, tok_vocab: usize) {
	run_dir_of(dir, ModelConfig { vocab_size: model_vocab, ..ModelConfig::tiny() }, tok_vocab)
}

/// The stages of `cfg` at their seeded initial weights, a tokenizer trained to `tok_vocab` tokens.
fn run_dir_of(dir: &Path, cfg: ModelConfig, tok_vocab: usize) {
	let p = Pipeline::new(&cfg, 11, DType::F32, &Device::Cpu, None).unwrap();
	for s in p.stages() {
		s.save(dir.join(format!("stage{}.safetensors", s.index()))).unwrap();
	}
	std::fs::write(dir.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
	let tok = train_tokenizer(LINES, tok_vocab).unwrap();
	assert_eq!(tok.get_vocab_size(true), tok_vocab, "the lines allow that many merges");
	let tok_path = dir.join("tokenizer.json");
	save_tokenizer(&tok, &tok_path).unwrap();
	let summary = serde_json::json!({ "wire": "bf16", "tokenizer": tok_path });
	std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
}

fn generate(dir: &Path, extra: &[&str]) -> std::process::Output {
	Command::new(env!("CARGO_BIN_EXE_iota-generate"))
		.args(["--run-dir", dir.to_str().unwrap(), "--max-new-tokens", "8", "--seed", "3"])
		.args(extra)
		.output()
		.unwrap()
}

#[test]
fn completes_prompts_repeatably_and_refuses_a_broken_run_directory() {
	let dir = tempfile::tempdir().unwrap();
	run_dir(dir.path(), 300, 270);
	let out = generate(dir.path(), &["--prompt", "ROMEO:", "--prompt", "JULIET: O"]);
	assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
	let text = String::from_utf8(out.stdout).unwrap();
	let blocks: Vec<&str> = text.split("---\n").filter(|b| !b.is_empty()).collect();
	assert_eq!(blocks.len(), 2, "{text}");
	assert!(blocks[0].starts_with("ROMEO:") && blocks[1].starts_with("JULIET: O"), "{text}");
	assert!(blocks[0].trim_end().len() > "ROMEO:".len(), "something was generated: {text}");
	let again = generate(dir.path(), &["--prompt", "ROMEO:", "--prompt", "JULIET: O"]);
	assert_eq!(String::from_utf8(again.stdout).unwrap(), text, "the same seed, the same text");

	// Bad settings, a missing stage, a tokenizer larger than the model's vocabulary.
	let bad = generate(dir.path(), &["--prompt", "x", "--top-p", "0"]);
	assert!(!bad.status.success());
	assert!(String::from_utf8_lossy(&bad.stderr).contains("top_p"));
	std::fs::remove_file(dir.path().join("stage1.safetensors")).unwrap();
	let bad = generate(dir.path(), &["--prompt", "x"]);
	assert!(!bad.status.success());
	assert!(String::from_utf8_lossy(&bad.stderr).contains("stage1.safetensors"));
	let big = tempfile::tempdir().unwrap();
	run_dir(big.path(), 260, 270);
	let bad = generate(big.path(), &["--prompt", "x"]);
	assert!(!bad.status.success());
	assert!(String::from_utf8_lossy(&bad.stderr).contains("tokens, the model"));
}

fn run(bin: &str, args: &[&str]) -> std::process::Output {
	Command::new(bin).args(args).output().unwrap()
}

#[test]
fn an_exported_run_generates_the_same_text_with_or_without_the_bottleneck() {
	let dir = tempfile::tempdir().unwrap();
	run_dir_of(
		dir.path(),
		ModelConfig { vocab_size: 300, ..ModelConfig::tiny() }.with_bottleneck(None),
		270,
	);
	let hf = dir.path().join("hf");
	let (run_path, hf_dir) = (dir.path().to_str().unwrap(), hf.to_str().unwrap());
	let out = run(env!("CARGO_BIN_EXE_iota-export"), &["--run-dir", run_path, "--out", hf_dir]);
	assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
	assert!(String::from_utf8_lossy(&out.stdout).contains("with the tokenizer"));
	for f in ["config.json", "model.safetensors", "generation_config.json", "tokenizer.json"] {
		assert!(hf.join(f).is_file(), "{f} written");
	}
	let prompts = ["--prompt", "ROMEO:", "--prompt", "JULIET: O"];
	let from_run = generate(dir.path(), &[&["--wire", "none"][..], &prompts].concat());
	assert!(from_run.status.success(), "{}", String::from_utf8_lossy(&from_run.stderr));
	let gen = env!("CARGO_BIN_EXE_iota-generate");
	let from_hf = run(
		gen,
		&[&["--hf", hf_dir, "--max-new-tokens", "8", "--seed", "3"][..], &prompts].concat(),
	);
	assert!(from_hf.status.success(), "{}", String::from_utf8_lossy(&from_hf.stderr));
	assert_eq!(from_hf.stdout, from_run.stdout, "the export is the same model");

	// A model with the bottleneck exports with its modeling file, and is the same model too.
	let bn = tempfile::tempdir().unwrap();
	run_dir(bn.path(), 300, 270);
	let out_dir = bn.path().join("hf");
	let out = run(
		env!("CARGO_BIN_EXE_iota-export"),
		&["--run-dir", bn.path().to_str().unwrap(), "--out", out_dir.to_str().unwrap()],
	);
	assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
	assert!(out_dir.join("modeling_iota.py").is_file());
	let from_run = generate(bn.path(), &[&["--wire", "none"][..], &prompts].concat());
	assert!(from_run.status.success(), "{}", String::from_utf8_lossy(&from_run.stderr));
	let from_hf = run(
		gen,
		&[
			&["--hf", out_dir.to_str().unwrap(), "--max-new-tokens", "8", "--seed", "3"][..],
			&prompts,
		]
		.concat(),
	);
	assert!(from_hf.status.success(), "{}", String::from_utf8_lossy(&from_hf.stderr));
	assert_eq!(from_hf.stdout, from_run.stdout, "the export is the same model");
}
