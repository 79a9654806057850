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

/// Where stock `s3s-fs` differed from S3 (found with the AWS CLI; `aws_cli.rs` runs the CLI itself),
/// checked with our SDK client: a non-empty bucket is not deleted, listings URL-encode keys when asked
/// to, errors carry S3's message, an unknown access key is `InvalidAccessKeyId`.
#[tokio::test]
async fn deletes_lists_and_refuses_as_s3_does() {
	use aws_sdk_s3::error::ProvideErrorMetadata;
	use aws_sdk_s3::primitives::ByteStream;
	use aws_sdk_s3::types::EncodingType;

	let dir = tempfile::tempdir().unwrap();
	let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path())).await.unwrap();
	let store = ObjectStore::connect(server.store_config()).await.unwrap();
	let sdk = store.sdk();
	let key = "dir/a+b c";
	sdk.create_bucket().bucket("other").send().await.unwrap();
	sdk.put_object()
		.bucket("other")
		.key(key)
		.body(ByteStream::from_static(b"x"))
		.send()
		.await
		.unwrap();

	// A bucket holding an object: 409 BucketNotEmpty, nothing deleted.
	let err = sdk.delete_bucket().bucket("other").send().await.unwrap_err();
	assert_eq!(err.code(), Some("BucketNotEmpty"), "{err:?}");
	assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(409));
	assert!(dir.path().join("other").join(key).is_file(), "the object is still there");

	// Listings: raw keys unless URL encoding is asked for, then keys, prefixes and delimiters encoded.
	let raw = sdk.list_objects_v2().bucket("other").send().await.unwrap();
	assert_eq!(raw.contents()[0].key(), Some(key));
	let v2 = sdk
		.list_objects_v2()
		.bucket("other")
		.encoding_type(EncodingType::Url)
		.prefix("dir/a+")
		.send()
		.await
		.unwrap();
	assert_eq!(v2.contents()[0].key(), Some("dir/a%2Bb%20c"));
	assert_eq!(v2.prefix(), Some("dir/a%2B"));
	let v1 = sdk
		.list_objects()
		.bucket("other")
		.encoding_type(EncodingType::Url)
		.delimiter("/")
		.send()
		.await
		.unwrap();
	assert_eq!(v1.common_prefixes()[0].prefix(), Some("dir/"));
	assert_eq!(v1.delimiter(), Some("/"));

	// Emptied, the bucket goes.
	sdk.delete_object().bucket("other").key(key).send().await.unwrap();
	sdk.delete_bucket().bucket("other").send().await.unwrap();
	assert!(!dir.path().join("other").exists());

	// Errors carry S3's message.
	let err = sdk.get_object().bucket("iota").key("missing").send().await.unwrap_err();
	assert_eq!(
		(err.code(), err.message()),
		(Some("NoSuchKey"), Some("The specified key does not exist."))
	);
	let err = sdk.delete_bucket().bucket("nowhere").send().await.unwrap_err();
	assert_eq!(
		(err.code(), err.message()),
		(Some("NoSuchBucket"), Some("The specified bucket does not exist"))
	);

	// An unknown access key.
	let mut c = server.store_config();
	c.credentials =
		iota_storage::Credentials::Static { access_key: "nobody".into(), secret_key: "x".into() };
	let other = ObjectStore::connect(c).await.unwrap();
	let err = other.sdk().list_objects_v2().bucket("iota").send().await.unwrap_err();
	assert_eq!(err.code(), Some("InvalidAccessKeyId"), "{err:?}");
	assert!(err.message().is_some_and(|m| !m.is_empty()));
	assert!(matches!(
		other.list("").await,
		Err(iota_storage::StorageError::InvalidCredentials { code, .. }) if code == "InvalidAccessKeyId"
	));
	server.shutdown().await;
}
