//! `iota-generate` on a run directory as `iota-train --save-stages` writes it (here: the `tiny` stages
//! at their seeded initial weights, a tokenizer trained on a few lines): it completes each prompt,
//! repeatably for a seed, and refuses a directory with a stage missing or a tokenizer larger than the
//! model's vocabulary, naming what is wrong.

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
	let cfg = ModelConfig { vocab_size: model_vocab, ..ModelConfig::tiny() };
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
