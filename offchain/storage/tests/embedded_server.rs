//! The embedded server as the orchestrator and devnet use it: bucket created on start, data kept across
//! restarts on the same directory, and the `iota-s3` binary serving a directory.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use bytes::Bytes;
use iota_storage::{ContentHash, EmbeddedConfig, EmbeddedS3, ObjectStore, StoreConfig};

#[tokio::test]
async fn bucket_is_created_and_data_survives_a_restart() {
	let dir = tempfile::tempdir().unwrap();
	let root = dir.path().join("fresh/nested");
	let mut config = EmbeddedConfig::new(&root);
	config.bucket = "devnet".into();

	let server = EmbeddedS3::start(config.clone()).await.unwrap();
	assert!(root.join("devnet").is_dir(), "bucket directory created on start");
	assert!(server.endpoint().starts_with("http://127.0.0.1:"));
	let store = ObjectStore::connect(server.store_config()).await.unwrap();
	let data = common::bytes(9, 3 * 1024 * 1024 + 1); // several 1 MiB GET chunks plus a tail
	let r = store.put("v1/runs/r/orchestrator/reports/x", data.clone()).await.unwrap();
	assert_eq!(store.get(&r.key, &r.hash).await.unwrap(), data);
	server.shutdown().await;

	// The port is free again and the client now fails to connect.
	assert!(store.head(&r.key).await.is_err());

	let server = EmbeddedS3::start(config).await.unwrap();
	let store = ObjectStore::connect(server.store_config()).await.unwrap();
	assert_eq!(store.get(&r.key, &r.hash).await.unwrap(), data, "objects survive a restart");
	assert_eq!(store.list("v1/").await.unwrap().len(), 1);
	server.shutdown().await;
}

#[tokio::test]
async fn overwrite_while_reading_never_mixes_objects() {
	// Whole-object GETs stream from an open file handle; a concurrent overwrite (rename) must yield
	// either the old or the new object, both of which pass their own hash check.
	let t = common::embedded().await;
	let key = "v1/runs/r/orchestrator/reports/y";
	let a = common::bytes(10, 2 * 1024 * 1024);
	let b = common::bytes(11, 2 * 1024 * 1024);
	let (ha, hb) = (ContentHash::of(&a), ContentHash::of(&b));
	t.store.put(key, a.clone()).await.unwrap();
	let writer = {
		let s = t.store.clone();
		let (a, b) = (a.clone(), b.clone());
		tokio::spawn(async move {
			for i in 0..10 {
				s.put(key, if i % 2 == 0 { b.clone() } else { a.clone() }).await.unwrap();
			}
		})
	};
	for _ in 0..10 {
		// A whole-object GET (the 1 MiB-chunk fast path): either object `a` arrives intact, or the
		// check reports exactly object `b`.
		match t.store.get(key, &ha).await {
			Ok(out) => assert_eq!(out.len(), a.len()),
			Err(iota_storage::StorageError::HashMismatch { actual, .. }) => {
				assert_eq!(actual, hb, "a GET returned a mix of two objects")
			},
			Err(e) => panic!("{e:?}"),
		}
	}
	writer.await.unwrap();
	t.stop().await;
}

#[tokio::test]
async fn iota_s3_binary_serves_a_directory() {
	let dir = tempfile::tempdir().unwrap();
	// Port 0: the server binds a free port and prints its endpoint (a port picked here and bound by the
	// child later could be taken by another test's server in between).
	let mut child = Command::new(env!("CARGO_BIN_EXE_iota-s3"))
		.args(["--dir", dir.path().to_str().unwrap(), "--addr", "127.0.0.1:0", "--bucket", "cli"])
		.env("IOTA_S3_ACCESS_KEY", "cli-key")
		.env("IOTA_S3_SECRET_KEY", "cli-secret")
		.stdout(Stdio::piped())
		.stderr(Stdio::null())
		.spawn()
		.unwrap();
	// Its log goes to stdout too: the endpoint is the line that starts so.
	let endpoint = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()))
		.map_while(Result::ok)
		.find_map(|l| l.strip_prefix("endpoint: ").map(str::to_owned))
		.expect("iota-s3 exited before printing its endpoint");
	let addr: SocketAddr = endpoint.trim_start_matches("http://").parse().unwrap();
	assert!(addr.ip().is_loopback() && addr.port() != 0, "{endpoint}");
	let store =
		ObjectStore::connect(StoreConfig::s3_compatible(endpoint, "cli", "cli-key", "cli-secret"))
			.await
			.unwrap();
	let r = store
		.put("v1/runs/r/orchestrator/reports/z", Bytes::from_static(b"hello"))
		.await;
	let _ = child.kill();
	let _ = child.wait();
	let r = r.unwrap();
	assert_eq!(r.hash, ContentHash::of(b"hello"));
	assert_eq!(
		std::fs::read(dir.path().join("cli/v1/runs/r/orchestrator/reports/z")).unwrap(),
		b"hello"
	);
}
