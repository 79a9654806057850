//! The dashboard in a real browser: headless Chromium loads pages served on 127.0.0.1 from fake sources,
//! runs the live script, and the test reads the DOM it ends with.
//!
//! The fake orchestrator holds state A (two completed epochs, last loss 4.25) while the page is served;
//! right after the first full response of `/` the test switches it to state B (three epochs, last loss
//! 3.125) and refreshes the snapshot. So B can only reach the DOM through the page's live updates.
//! Chromium runs with `--virtual-time-budget`, which fast-forwards the script's timers and waits for
//! its fetches: no wall-clock timing is involved.
//!
//! Needs Debian's `chromium` (`scripts/setup.sh` installs it; `$CHROMIUM` overrides the binary). Without
//! it the test fails when `CI=true` and is skipped with a printed reason otherwise. Screenshots of every
//! page are saved under `$CARGO_TARGET_TMPDIR/iota-dashboard-browser/` (`training.png`, `network.png`, ...).

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use common::*;

/// Longest a Chromium run may take before the test fails (start-up of a cold browser included).
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

fn chromium() -> Option<PathBuf> {
	if let Some(p) = std::env::var_os("CHROMIUM") {
		return Some(PathBuf::from(p));
	}
	let path = std::env::var_os("PATH")?;
	["chromium", "chromium-browser", "google-chrome"]
		.iter()
		.flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
		.find(|p| p.is_file())
}

/// The browser, or `None` after printing why the test is skipped; panics in CI.
fn browser_or_skip() -> Option<PathBuf> {
	match chromium() {
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

/// Run headless Chromium on `url` with `extra` flags; returns stdout (the DOM with `--dump-dom`).
async fn run_chromium(bin: &Path, profile: &Path, url: &str, extra: &[&str]) -> String {
	let mut cmd = tokio::process::Command::new(bin);
	cmd.args([
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--no-first-run",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-dev-shm-usage",
		"--virtual-time-budget=8000",
	])
	.arg(format!("--user-data-dir={}", profile.display()))
	.args(extra)
	.arg(url)
	.stdin(Stdio::null())
	.stdout(Stdio::piped())
	.stderr(Stdio::piped())
	.kill_on_drop(true);
	let out = tokio::time::timeout(BROWSER_TIMEOUT, cmd.output())
		.await
		.unwrap_or_else(|_| panic!("chromium did not finish within {BROWSER_TIMEOUT:?} on {url}"))
		.unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
	assert!(
		out.status.success(),
		"chromium failed on {url} with {}: {}",
		out.status,
		String::from_utf8_lossy(&out.stderr)
	);
	String::from_utf8(out.stdout).expect("the DOM is UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_updates_reach_the_dom_in_headless_chromium() {
	let Some(bin) = browser_or_skip() else { return };
	let (orch, chain) = recorded();
	let d = dashboard(orch.clone(), chain);
	d.refresh_once().await;

	// After the first full page response, switch the orchestrator to state B and refresh.
	let switched = Arc::new(AtomicBool::new(false));
	let (d2, o2, s2) = (d.clone(), orch.clone(), switched.clone());
	let app = d.router().layer(axum::middleware::from_fn(move |req: Request, next: Next| {
		let (d, o, s) = (d2.clone(), o2.clone(), s2.clone());
		async move {
			let full_page = req.uri().path() == "/" && req.uri().query().is_none_or(|q| !q.contains("partial"));
			let res = next.run(req).await;
			if full_page && !s.swap(true, Ordering::SeqCst) {
				o.set(Ok(status("run-a", 20_000, &[5.5, 4.25, 3.125], 1)));
				d.refresh_once().await;
			}
			res
		}
	}));
	let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
	let base = format!("http://{}", listener.local_addr().unwrap());
	let server = tokio::spawn(async move { axum::serve(listener, app).await });
	let profile = tempfile::tempdir().unwrap();

	let dom = run_chromium(&bin, profile.path(), &format!("{base}/"), &["--dump-dom"]).await;
	assert!(switched.load(Ordering::SeqCst), "the page was served");
	assert!(dom.contains("data-live-updates=\""), "the live script replaced the body at least once:\n{dom}");
	assert!(dom.contains(r#"<dd id="last-loss">3.1250</dd>"#), "state B's loss reached the DOM:\n{dom}");
	assert!(!dom.contains("4.2500"), "state A's loss is gone");
	assert!(dom.contains(r#"<dd id="stage-count">3</dd>"#));
	assert!(dom.contains(r#"<dd id="miners-registered">3</dd>"#));
	assert!(dom.contains(r#"<dd id="current-epoch">3</dd>"#));
	assert!(dom.contains(r#"class="ok" id="live-state""#) || dom.contains(r#"id="live-state" class="ok""#), "badge says live");

	// The Training page in the browser: four SVG charts and the loss table; and a screenshot of it.
	let dom = run_chromium(&bin, profile.path(), &format!("{base}/training"), &["--dump-dom"]).await;
	assert_eq!(dom.matches("<svg").count(), 4, "{dom}");
	assert!(dom.contains(r#"<td class="loss">3.1250</td>"#));
	// A screenshot of every page (the Training page's is named in the docs).
	let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("iota-dashboard-browser");
	std::fs::create_dir_all(&dir).unwrap();
	let miner_page = format!("/miners/{}", miner(1));
	for (name, path) in
		[("training", "/training"), ("network", "/"), ("stages", "/stages"), ("trust", "/trust"), ("miner", &miner_page)]
	{
		let shot = dir.join(format!("{name}.png"));
		let _ = std::fs::remove_file(&shot);
		run_chromium(
			&bin,
			profile.path(),
			&format!("{base}{path}"),
			&[&format!("--screenshot={}", shot.display()), "--window-size=1280,1500", "--hide-scrollbars"],
		)
		.await;
		let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()));
		assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: a PNG");
		eprintln!("screenshot: {}", shot.display());
	}

	// A 404 page renders in the browser too.
	let dom = run_chromium(&bin, profile.path(), &format!("{base}/miners/nobody"), &["--dump-dom"]).await;
	assert!(dom.contains("Not found") && dom.contains("is not an SS58 account"));
	server.abort();
}
