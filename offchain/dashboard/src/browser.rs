//! Headless Chromium on dashboard pages: the DOM a page ends with once its live script has run
//! (`--dump-dom`), and screenshots (`--screenshot=FILE`). The browser tests (this crate's
//! `tests/browser.rs` and iota-e2e's `dashboard_browser`, which also refreshes `docs/dashboard.png`)
//! read and photograph pages through it.
//!
//! Each run gets a fresh profile folder and `--virtual-time-budget`, which fast-forwards the page's
//! timers and waits for its fetches, so no wall-clock waiting is involved. The browser is Debian's
//! `chromium` (`scripts/setup.sh` installs it) or `$CHROMIUM`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// What a headless run can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
	/// The binary could not be started, or the profile folder not made.
	#[error("cannot run {bin}: {source}")]
	Spawn {
		/// The browser binary.
		bin: PathBuf,
		/// Why.
		source: std::io::Error,
	},
	/// The run took longer than its limit (the process is killed).
	#[error("chromium did not finish within {limit:?} on {url}")]
	Timeout {
		/// The page.
		url: String,
		/// The limit.
		limit: Duration,
	},
	/// Chromium exited unsuccessfully.
	#[error("chromium failed on {url} with {status}: {stderr}")]
	Failed {
		/// The page.
		url: String,
		/// Its exit status.
		status: std::process::ExitStatus,
		/// What it printed on stderr.
		stderr: String,
	},
	/// Its stdout (the DOM) was not UTF-8.
	#[error("chromium printed a DOM that is not UTF-8 for {url}")]
	NotUtf8 {
		/// The page.
		url: String,
	},
}

/// The Chromium binary: `$CHROMIUM`, else the first of `chromium`, `chromium-browser`, `google-chrome`
/// on `$PATH`.
pub fn find_chromium() -> Option<PathBuf> {
	if let Some(p) = std::env::var_os("CHROMIUM") {
		return Some(PathBuf::from(p));
	}
	let path = std::env::var_os("PATH")?;
	["chromium", "chromium-browser", "google-chrome"]
		.iter()
		.flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
		.find(|p| p.is_file())
}

/// For browser tests: the binary, or `None` after printing why the test is skipped.
///
/// # Panics
/// When no browser is found and `CI=true`: a CI run must not skip its browser tests.
pub fn chromium_or_skip() -> Option<PathBuf> {
	match find_chromium() {
		Some(p) => Some(p),
		None if std::env::var("CI").is_ok_and(|v| v == "true") => {
			panic!("chromium not found (CI=true): install Debian's `chromium` with scripts/setup.sh, or set $CHROMIUM")
		},
		None => {
			eprintln!("SKIPPED: chromium not found; install Debian's `chromium` (scripts/setup.sh) or set $CHROMIUM");
			None
		},
	}
}

/// One headless browser configuration.
#[derive(Clone, Debug)]
pub struct Headless {
	/// The binary ([`find_chromium`]).
	pub bin: PathBuf,
	/// `--virtual-time-budget` in ms: how far the page's timers are fast-forwarded.
	pub virtual_time_ms: u64,
	/// Wall-clock limit of one run, a cold browser's start-up included.
	pub timeout: Duration,
}

impl Headless {
	/// `bin` with a 5,000 ms virtual-time budget and a 120 s limit per run.
	pub fn new(bin: impl Into<PathBuf>) -> Self {
		Self { bin: bin.into(), virtual_time_ms: 5_000, timeout: Duration::from_secs(120) }
	}

	/// Loads `url` with `extra` flags in a fresh profile and returns stdout: the final DOM with
	/// `--dump-dom`, empty with `--screenshot=FILE`.
	///
	/// # Errors
	/// [`BrowserError`].
	pub async fn run(&self, url: &str, extra: &[&str]) -> Result<String, BrowserError> {
		let spawn = |source| BrowserError::Spawn { bin: self.bin.clone(), source };
		let profile = tempfile::tempdir().map_err(spawn)?;
		let mut cmd = tokio::process::Command::new(&self.bin);
		cmd.args([
			"--headless",
			"--no-sandbox",
			"--disable-gpu",
			"--no-first-run",
			"--disable-background-networking",
			"--disable-component-update",
			"--disable-sync",
			"--disable-dev-shm-usage",
		])
		.arg(format!("--virtual-time-budget={}", self.virtual_time_ms))
		.arg(format!("--user-data-dir={}", profile.path().display()))
		.args(extra)
		.arg(url)
		.stdin(Stdio::null())
		.stdout(Stdio::piped())
		.stderr(Stdio::piped())
		.kill_on_drop(true);
		let out = tokio::time::timeout(self.timeout, cmd.output())
			.await
			.map_err(|_| BrowserError::Timeout { url: url.into(), limit: self.timeout })?
			.map_err(spawn)?;
		if !out.status.success() {
			return Err(BrowserError::Failed {
				url: url.into(),
				status: out.status,
				stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
			});
		}
		String::from_utf8(out.stdout).map_err(|_| BrowserError::NotUtf8 { url: url.into() })
	}

	/// The DOM of `url` after its script ran.
	///
	/// # Errors
	/// [`BrowserError`].
	pub async fn dom(&self, url: &str) -> Result<String, BrowserError> {
		self.run(url, &["--dump-dom"]).await
	}

	/// Saves a `width × height` screenshot of `url` to `png`.
	///
	/// # Errors
	/// [`BrowserError`].
	pub async fn screenshot(
		&self,
		url: &str,
		png: &Path,
		width: u32,
		height: u32,
	) -> Result<(), BrowserError> {
		let shot = format!("--screenshot={}", png.display());
		let size = format!("--window-size={width},{height}");
		self.run(url, &[&shot, &size, "--hide-scrollbars"]).await.map(|_| ())
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[tokio::test]
	async fn a_missing_binary_is_a_spawn_error() {
		let h = Headless::new("/nonexistent/chromium");
		let e = h.dom("http://127.0.0.1:9/").await.unwrap_err();
		assert!(matches!(e, BrowserError::Spawn { .. }), "{e}");
	}

	/// An executable `/bin/sh` script in `dir` standing in for the browser (it ignores the flags).
	/// A shell script standing in for the browser. It is written by a child `sh`, never through a file
	/// descriptor of this process: another test's spawn forking while such a descriptor is open would
	/// hold it in its child, and exec'ing the script then fails with `ETXTBSY` (seen in CI).
	fn fake_browser(dir: &Path, body: &str) -> PathBuf {
		let script = dir.join("fake-chromium");
		let ok = std::process::Command::new("sh")
			.args(["-c", "printf '#!/bin/sh\\n%s\\n' \"$1\" > \"$2\" && chmod 755 \"$2\"", "sh"])
			.arg(body)
			.arg(&script)
			.status()
			.unwrap()
			.success();
		assert!(ok, "writing {}", script.display());
		script
	}

	#[tokio::test]
	async fn a_failing_binary_is_reported_with_its_stderr() {
		let dir = tempfile::tempdir().unwrap();
		let e = Headless::new(fake_browser(dir.path(), "echo 'no display' >&2; exit 3"))
			.dom("http://127.0.0.1:9/")
			.await
			.unwrap_err();
		match e {
			BrowserError::Failed { status, stderr, .. } => {
				assert_eq!(status.code(), Some(3));
				assert_eq!(stderr.trim(), "no display");
			},
			other => panic!("expected Failed, got {other}"),
		}
	}

	#[tokio::test]
	async fn the_dom_is_what_the_browser_prints_and_non_utf8_is_refused() {
		let dir = tempfile::tempdir().unwrap();
		let h = Headless::new(fake_browser(dir.path(), "echo '<html><body>ok</body></html>'"));
		assert_eq!(
			h.dom("http://127.0.0.1:9/").await.unwrap().trim(),
			"<html><body>ok</body></html>"
		);
		let h = Headless::new(fake_browser(dir.path(), "printf '\\377\\376'"));
		assert!(matches!(
			h.dom("http://127.0.0.1:9/").await.unwrap_err(),
			BrowserError::NotUtf8 { .. }
		));
	}

	#[tokio::test]
	async fn a_hanging_binary_times_out() {
		let dir = tempfile::tempdir().unwrap();
		let mut h = Headless::new(fake_browser(dir.path(), "exec sleep 30"));
		h.timeout = Duration::from_millis(300);
		let e = h.dom("http://127.0.0.1:9/").await.unwrap_err();
		assert!(matches!(e, BrowserError::Timeout { .. }), "{e}");
	}
}
