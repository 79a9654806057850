//! The dashboard of a real network in a real browser: a whole network (`iota_devnet::Network`: dev node,
//! orchestrator with the embedded S3 server serving the dashboard on `--dashboard-addr 127.0.0.1:<free
//! port>`, 3 stages × 1 real `iota-miner`, 1 `iota-validator`) trains the `tiny` preset re-cut into 3
//! stages for two epochs; headless Chromium then loads the dashboard.
//!
//! Asserted from the DOM Chromium ends with (its `--virtual-time-budget` lets the page's live script
//! run without wall-clock waits): the Network page shows 3 stages, 3 miners registered on chain and 3 seen
//! by the orchestrator, and a last-epoch loss equal to the one the orchestrator recorded
//! (`Status.epochs`, the page's 4-decimal rendering); the Stages page has one panel per stage and one row
//! per miner, naming every miner's account; the Training page lists both epochs' recorded losses.
//! Screenshots of the three pages are saved under `$CARGO_TARGET_TMPDIR/dashboard_browser/`; with
//! `IOTA_UPDATE_SCREENSHOT=1` the Network page's is copied to `docs/dashboard.png`.
//!
//! Needs Debian's `chromium` (`scripts/setup.sh` installs it; `$CHROMIUM` overrides the binary). Without
//! it the test fails when `CI=true` and is skipped with a printed reason otherwise.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test dashboard_browser -- --ignored --nocapture
//! IOTA_UPDATE_SCREENSHOT=1 cargo test -p iota-e2e --test dashboard_browser -- --ignored   # refresh docs/dashboard.png
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use iota_e2e::*;

const RUN: &str = "e2e-dashboard";
const QUOTA: u32 = 8;
const TIMEOUT: Duration = Duration::from_secs(900);
/// Longest one Chromium run may take (a cold browser included).
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

/// The browser, or `None` after printing why the test is skipped; panics when `CI=true`.
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

/// Headless Chromium on `url` with `extra` flags and a fresh profile; returns stdout (the DOM with
/// `--dump-dom`).
async fn chromium_run(bin: &Path, url: &str, extra: &[&str]) -> String {
	let profile = tempfile::tempdir().unwrap();
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
		"--virtual-time-budget=5000",
	])
	.arg(format!("--user-data-dir={}", profile.path().display()))
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
	assert!(out.status.success(), "chromium failed on {url} with {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
	String::from_utf8(out.stdout).expect("the DOM is UTF-8")
}

/// The text of the element `<tag id="id">…</tag>` in `dom`, if any.
fn by_id<'a>(dom: &'a str, tag: &str, id: &str) -> Option<&'a str> {
	let open = format!("<{tag} id=\"{id}\">");
	let at = dom.find(&open)? + open.len();
	let end = dom[at..].find(&format!("</{tag}>"))?;
	Some(&dom[at..at + end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator (with its dashboard), three iota-miner processes, iota-validator and headless Chromium (see the file's docs)"]
async fn a_two_epoch_network_in_headless_chromium() {
	let Some(browser) = browser_or_skip() else { return };
	let started = Instant::now();
	let out = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "dashboard_browser");
	let dashboard = format!("127.0.0.1:{}", free_port());
	let mut options = tiny_network(RUN, &out.join("network"), 3, 1, 1, QUOTA);
	options.dashboard_addr = Some(dashboard.clone());
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	let base = format!("http://{dashboard}");

	// Two epochs complete.
	net.wait("two completed epochs", TIMEOUT, &[], || async {
		let done = watcher.status().await.ok()?.epochs.len();
		let committed = chain.stage(2).await.ok()?.epoch;
		(done >= 2 && committed >= 2).then_some(())
	})
	.await;
	eprintln!("two epochs after {:?}", started.elapsed());

	// The Network page, until the dashboard's snapshot has caught up with the orchestrator's record
	// (it refreshes every few seconds); the loss on the page is the recorded one.
	let (dom, status) = net
		.wait("the Network page to show the recorded loss", TIMEOUT, &[], || async {
			let before = watcher.status().await.ok()?;
			let dom = chromium_run(&browser, &format!("{base}/"), &["--dump-dom"]).await;
			let after = watcher.status().await.ok()?;
			let last = after.epochs.last()?;
			let shown = by_id(&dom, "dd", "last-loss")?;
			(before.epochs == after.epochs && shown == format!("{:.4}", last.loss)).then_some((dom, after))
		})
		.await;
	let last = status.epochs.last().unwrap();
	assert_eq!(status.last_epoch_loss, Some(last.loss), "the status's last loss is the last epoch's");
	assert_eq!(by_id(&dom, "dd", "stage-count"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "miners-registered"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "miners-seen"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "last-loss"), Some(format!("{:.4}", last.loss).as_str()));
	eprintln!("the page shows epoch {} loss {:.4}", last.epoch, last.loss);

	// The Stages page: one panel per stage, one row per miner, every miner named.
	let dom = chromium_run(&browser, &format!("{base}/stages"), &["--dump-dom"]).await;
	assert_eq!(dom.matches("class=\"panel stage\"").count(), 3, "{dom}");
	assert_eq!(dom.matches("<tr class=\"miner\">").count(), 3, "{dom}");
	for st in &status.stages {
		for m in &st.miners {
			assert!(dom.contains(&m.to_string()), "miner {m} of stage {} on the Stages page", st.stage);
		}
	}

	// The Training page lists both epochs' recorded losses.
	let dom = chromium_run(&browser, &format!("{base}/training"), &["--dump-dom"]).await;
	for e in status.epochs.iter().take(2) {
		let cell = format!("<td class=\"loss\">{:.4}</td>", e.loss);
		assert!(dom.contains(&cell), "epoch {} loss {cell} on the Training page", e.epoch);
	}

	// Screenshots.
	for (name, path, height) in [("dashboard", "/", 880), ("stages", "/stages", 1400), ("training", "/training", 1400)] {
		let shot = out.join(format!("{name}.png"));
		chromium_run(
			&browser,
			&format!("{base}{path}"),
			&[&format!("--screenshot={}", shot.display()), &format!("--window-size=1280,{height}"), "--hide-scrollbars"],
		)
		.await;
		let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()));
		assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: a PNG");
		eprintln!("screenshot: {}", shot.display());
	}
	if std::env::var("IOTA_UPDATE_SCREENSHOT").is_ok_and(|v| v == "1") {
		let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png");
		std::fs::copy(out.join("dashboard.png"), &docs).unwrap();
		eprintln!("updated {}", docs.display());
	}
	net.assert_alive(&[]);
	eprintln!("done after {:?}", started.elapsed());
}
