//! Shared by the `miner_*` scenarios: a real `iota-miner` process and what its log says.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use iota_e2e::{free_port, target_dir};

/// A running `iota-miner`, killed on drop (its log printed if the test panics).
pub struct MinerProcess {
	child: Child,
	log: PathBuf,
	/// Its secret URI.
	pub name: &'static str,
}

impl MinerProcess {
	/// Starts `iota-miner` for `name` (a secret URI) against `chain` and `orchestrator`, logging to `dir/miner-{i}.log`.
	pub fn start(name: &'static str, chain: &str, orchestrator: &str, dir: &Path, i: usize) -> Self {
		let bin = std::env::var_os("IOTA_MINER_BIN").map(PathBuf::from).unwrap_or_else(|| target_dir().join("iota-miner"));
		assert!(bin.exists(), "{} not found: cargo build -p iota-miner", bin.display());
		let log = dir.join(format!("miner-{i}.log"));
		let out = std::fs::File::create(&log).unwrap();
		let child = Command::new(&bin)
			.args(["--chain-rpc", chain, "--orchestrator", orchestrator, "--suri", name, "--threads", "1"])
			.args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
			.arg("--cache-dir")
			.arg(dir.join(format!("cache-{i}")))
			.env("RUST_LOG", "info,iota_miner=debug")
			.env("RAYON_NUM_THREADS", "1")
			.stdout(out.try_clone().unwrap())
			.stderr(out)
			.stdin(Stdio::null())
			.spawn()
			.unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
		Self { child, log, name }
	}

	/// Its log so far.
	pub fn log_text(&self) -> String {
		std::fs::read_to_string(&self.log).unwrap_or_default()
	}

	/// SIGTERM, then wait up to 60 s for a clean exit.
	pub fn terminate(&mut self) -> std::process::ExitStatus {
		let pid = self.child.id().to_string();
		let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
		assert!(ok.success());
		for _ in 0..600 {
			if let Some(s) = self.child.try_wait().unwrap() {
				return s;
			}
			std::thread::sleep(Duration::from_millis(100));
		}
		panic!("{} did not exit within 60 s of SIGTERM", self.name);
	}
}

impl Drop for MinerProcess {
	fn drop(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
		if std::thread::panicking() {
			let text = self.log_text();
			let tail: Vec<&str> = text.lines().rev().take(25).collect();
			eprintln!("--- iota-miner {} log (last 25 lines) ---", self.name);
			for l in tail.into_iter().rev() {
				eprintln!("{l}");
			}
		}
	}
}

/// `(stage, epoch) -> state hash` from the miner's "AdamW step applied" log lines.
pub fn attested(log: &str) -> BTreeMap<(u16, u32), String> {
	let field = |line: &str, key: &str| -> Option<String> {
		let at = line.find(&format!(" {key}="))? + key.len() + 2;
		Some(line[at..].split_whitespace().next()?.to_string())
	};
	log.lines()
		.filter(|l| l.contains("AdamW step applied"))
		.filter_map(|l| Some(((field(l, "stage")?.parse().ok()?, field(l, "epoch")?.parse().ok()?), field(l, "state")?)))
		.collect()
}

impl MinerProcess {
	/// Whether the process is still running.
	pub fn is_running(&mut self) -> bool {
		self.child.try_wait().ok().flatten().is_none()
	}
}
