//! Test helpers: S3 targets (the embedded server, moto) and a scripted HTTP server for fault injection.
#![allow(dead_code)] // each test binary uses a different subset

use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iota_storage::{EmbeddedConfig, EmbeddedS3, ObjectStore, StoreConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A bucket behind some S3 implementation, with a client for it.
pub struct Target {
	/// "embedded" or "moto".
	pub name: &'static str,
	/// Client with the server's credentials.
	pub store: ObjectStore,
	/// Whether the server checks signatures and expiry (moto does not: docs/design.md §9).
	pub enforces_auth: bool,
	backend: Backend,
}

enum Backend {
	Embedded { server: Option<EmbeddedS3>, _dir: tempfile::TempDir },
	Moto(MotoServer),
}

impl Target {
	/// Client settings of this target (to build clients with other limits or credentials).
	pub fn config(&self) -> StoreConfig {
		self.store.config().clone()
	}

	/// The embedded server's data directory.
	pub fn embedded_root(&self) -> Option<PathBuf> {
		match &self.backend {
			Backend::Embedded { server, .. } => server.as_ref().map(|s| s.config().root.clone()),
			Backend::Moto(_) => None,
		}
	}

	/// Stops the server (embedded: graceful shutdown; moto: killed on drop).
	pub async fn stop(mut self) {
		if let Backend::Embedded { server, .. } = &mut self.backend {
			if let Some(s) = server.take() {
				s.shutdown().await;
			}
		}
	}
}

/// Settings shared by every test client: small retry backoff so fault tests are quick.
pub fn test_config(mut c: StoreConfig) -> StoreConfig {
	c.retry.initial_backoff = Duration::from_millis(10);
	c.retry.max_backoff = Duration::from_millis(100);
	c.attempt_timeout = Duration::from_secs(60);
	c
}

/// An embedded server on 127.0.0.1 with a fresh directory.
pub async fn embedded() -> Target {
	let dir = tempfile::tempdir().expect("tempdir");
	let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path().join("s3")))
		.await
		.expect("start embedded S3");
	let store = ObjectStore::connect(test_config(server.store_config())).await.expect("client");
	Target {
		name: "embedded",
		store,
		enforces_auth: true,
		backend: Backend::Embedded { server: Some(server), _dir: dir },
	}
}

/// A moto server process on a free loopback port, or `None` (with the reason printed) if moto is not
/// installed. Set `IOTA_REQUIRE_MOTO=1` to turn the skip into a failure.
pub async fn moto() -> Option<Target> {
	let exe = venv_tool("moto_server", "IOTA_MOTO_SERVER", "IOTA_REQUIRE_MOTO")?;
	let server = MotoServer::start(&exe);
	let config = test_config(StoreConfig::s3_compatible(
		format!("http://{}", server.addr),
		"iota-test",
		"moto-key",
		"moto-secret",
	));
	let store = ObjectStore::connect(config).await.expect("client");
	store.ensure_bucket().await.expect("create bucket on moto");
	Some(Target { name: "moto", store, enforces_auth: false, backend: Backend::Moto(server) })
}

/// A tool `scripts/setup.sh` installs into the project's `.venv/` (moto, the AWS CLI): `$env` if set,
/// else `.venv/bin/{name}`, else `{name}` if the `PATH` has it. `None` (the reason printed, so the
/// calling test is a visible skip) when there is none; with `{require}=1` set, a panic instead.
pub fn venv_tool(name: &str, env: &str, require: &str) -> Option<PathBuf> {
	let found = std::env::var_os(env).map(PathBuf::from).or_else(|| {
		// The manifest folder at run time: the shared target folder may hold a binary another clone
		// built.
		let manifest = std::env::var_os("CARGO_MANIFEST_DIR")?;
		let venv = PathBuf::from(manifest).join("../../.venv/bin").join(name);
		if venv.exists() {
			return Some(venv);
		}
		let on_path = Command::new(name).arg("--version").output();
		on_path.is_ok_and(|o| o.status.success()).then(|| PathBuf::from(name))
	});
	if found.is_none() {
		let reason =
			format!("{name} not found at .venv/bin/{name} nor on the PATH (nor {env} set)");
		if std::env::var(require).is_ok_and(|v| v == "1") {
			panic!("{name} required but unavailable: {reason}");
		}
		eprintln!("SKIPPED ({name}): {reason}; run scripts/setup.sh to install it");
		println!("SKIPPED ({name}): {reason}; run scripts/setup.sh to install it");
	}
	found
}

/// A free TCP port on 127.0.0.1 (bound and released; a tiny race is possible and harmless here).
pub fn free_port() -> u16 {
	StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A moto_server child process, killed on drop.
pub struct MotoServer {
	child: Child,
	pub addr: SocketAddr,
}

impl MotoServer {
	fn start(exe: &std::path::Path) -> Self {
		let port = free_port();
		let child = Command::new(exe)
			.args(["-H", "127.0.0.1", "-p", &port.to_string()])
			.stdout(Stdio::null())
			.stderr(Stdio::null())
			.spawn()
			.unwrap_or_else(|e| panic!("spawning {}: {e}", exe.display()));
		let addr = SocketAddr::from(([127, 0, 0, 1], port));
		let mut server = Self { child, addr };
		let deadline = Instant::now() + Duration::from_secs(60);
		while StdStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
			if let Ok(Some(status)) = server.child.try_wait() {
				panic!("moto_server exited early: {status}");
			}
			assert!(Instant::now() < deadline, "moto_server did not listen on {addr} within 60 s");
			std::thread::sleep(Duration::from_millis(100));
		}
		server
	}
}

impl Drop for MotoServer {
	fn drop(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
	}
}

/// What the scripted server answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
	/// A complete response.
	Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
	/// Announces `Content-Length: announced`, sends `body` (shorter), then closes the connection.
	Truncated { announced: usize, body: Vec<u8> },
	/// Never answers (holds the connection for 60 s).
	Hang,
	/// Announces `Content-Length: announced`, sends `body` (shorter), then holds the connection for 60 s.
	Stall { announced: usize, body: Vec<u8> },
}

impl Reply {
	/// 200 with a body.
	pub fn ok(body: &[u8]) -> Self {
		Reply::Full { status: 200, headers: vec![], body: body.to_vec() }
	}

	/// An S3 XML error.
	pub fn s3_error(status: u16, code: &str, message: &str) -> Self {
		Reply::Full {
            status,
            headers: vec![("Content-Type".into(), "application/xml".into())],
            body: format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>")
                .into_bytes(),
        }
	}
}

/// An HTTP/1.1 server on 127.0.0.1 that answers request n with `replies[n]` (the last one repeats) and
/// closes each connection after one response.
pub struct Scripted {
	pub addr: SocketAddr,
	hits: Arc<AtomicUsize>,
	task: tokio::task::JoinHandle<()>,
}

impl Scripted {
	pub async fn start(replies: Vec<Reply>) -> Self {
		let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
		let addr = listener.local_addr().unwrap();
		let hits = Arc::new(AtomicUsize::new(0));
		let counter = hits.clone();
		let task = tokio::spawn(async move {
			loop {
				let Ok((mut sock, _)) = listener.accept().await else {
					return;
				};
				let n = counter.fetch_add(1, Ordering::SeqCst);
				let reply = replies[n.min(replies.len() - 1)].clone();
				tokio::spawn(async move {
					read_request(&mut sock).await;
					match reply {
						Reply::Full { status, headers, body } => {
							let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
							for (k, v) in headers {
								head.push_str(&format!("{k}: {v}\r\n"));
							}
							head.push_str("\r\n");
							let _ = sock.write_all(head.as_bytes()).await;
							let _ = sock.write_all(&body).await;
						},
						Reply::Truncated { announced, body } => {
							let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {announced}\r\nConnection: close\r\n\r\n");
							let _ = sock.write_all(head.as_bytes()).await;
							let _ = sock.write_all(&body).await;
						},
						Reply::Hang => tokio::time::sleep(Duration::from_secs(60)).await,
						Reply::Stall { announced, body } => {
							let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {announced}\r\nConnection: close\r\n\r\n"
                            );
							let _ = sock.write_all(head.as_bytes()).await;
							let _ = sock.write_all(&body).await;
							tokio::time::sleep(Duration::from_secs(60)).await;
						},
					}
					let _ = sock.shutdown().await;
				});
			}
		});
		Self { addr, hits, task }
	}

	/// Requests received so far.
	pub fn hits(&self) -> usize {
		self.hits.load(Ordering::SeqCst)
	}

	pub fn endpoint(&self) -> String {
		format!("http://{}", self.addr)
	}
}

impl Drop for Scripted {
	fn drop(&mut self) {
		self.task.abort();
	}
}

/// Reads one request: the head, then `Content-Length` bytes of body.
async fn read_request(sock: &mut tokio::net::TcpStream) {
	let mut buf = Vec::new();
	let mut chunk = [0u8; 8192];
	let head_end = loop {
		if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
			break i + 4;
		}
		match sock.read(&mut chunk).await {
			Ok(0) | Err(_) => return,
			Ok(n) => buf.extend_from_slice(&chunk[..n]),
		}
	};
	let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
	let len: usize = head
		.lines()
		.find_map(|l| l.strip_prefix("content-length:"))
		.and_then(|v| v.trim().parse().ok())
		.unwrap_or(0);
	let mut have = buf.len() - head_end;
	while have < len {
		match sock.read(&mut chunk).await {
			Ok(0) | Err(_) => return,
			Ok(n) => have += n,
		}
	}
}

/// Deterministic test bytes: `len` bytes from a seed (xorshift).
pub fn bytes(seed: u64, len: usize) -> bytes::Bytes {
	let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
	let mut v = Vec::with_capacity(len + 8);
	while v.len() < len {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		v.extend_from_slice(&x.to_le_bytes());
	}
	v.truncate(len);
	bytes::Bytes::from(v)
}
