//! The conformance suite: every scenario runs against the embedded server and against moto (an S3
//! implementation nobody here wrote), over real TCP on 127.0.0.1. Scenarios that need a server which
//! checks signatures run against the embedded server only; on moto they print why they were skipped.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{bytes, Target};
use iota_storage::keys::{self, Direction, Id};
use iota_storage::{ContentHash, ObjectStore, PresignedHttp, StorageError, MIB};
use tokio::io::AsyncRead;

fn id(s: &str) -> Id {
	Id::new(s).unwrap()
}

fn act_key(miner: &str, sample: u64) -> String {
	keys::activation(&id("run-t"), 1, 2, sample, Direction::Forward, &id(miner))
}

fn http(t: &Target) -> PresignedHttp {
	PresignedHttp::from_config(t.store.config()).unwrap()
}

fn skip(t: &Target, why: &str) -> bool {
	if !t.enforces_auth {
		println!("SKIPPED ({}): {why}", t.name);
		eprintln!("SKIPPED ({}): {why}", t.name);
		return true;
	}
	false
}

async fn put_get_head_list_delete(t: &Target) {
	let s = &t.store;
	let data = bytes(1, 300_000);
	let key = act_key("miner-a", 1);
	let r = s.put(&key, data.clone()).await.unwrap();
	assert_eq!((r.size, r.hash), (300_000, ContentHash::of(&data)));
	assert_eq!(s.get(&key, &r.hash).await.unwrap(), data);
	let meta = s.head(&key).await.unwrap();
	assert_eq!((meta.size, meta.recorded_hash), (300_000, Some(r.hash)));

	// Listing is by prefix and in key order; another miner's scope is not included.
	let other = act_key("miner-ab", 1);
	s.put(&other, Bytes::from_static(b"x")).await.unwrap();
	let k2 = act_key("miner-a", 2);
	s.put(&k2, Bytes::new()).await.unwrap();
	let listed = s.list(&keys::miner_scope(&id("run-t"), &id("miner-a"))).await.unwrap();
	let names: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
	assert_eq!(names, vec![key.as_str(), k2.as_str()]);
	assert_eq!(listed[0].size, 300_000);
	assert_eq!(s.list(&keys::run_scope(&id("run-t"))).await.unwrap().len(), 3);

	// The streaming writer below the multipart threshold is a single PUT with the same result.
	let r2 = s.put_reader(&k2, std::io::Cursor::new(data.to_vec())).await.unwrap();
	assert_eq!((r2.size, r2.hash), (r.size, r.hash));
	assert_eq!(s.get(&k2, &r.hash).await.unwrap(), data);
	s.put(&k2, Bytes::new()).await.unwrap();

	// An empty object round-trips too.
	assert_eq!(s.get(&k2, &ContentHash::of(b"")).await.unwrap().len(), 0);

	s.delete(&key).await.unwrap();
	assert!(matches!(s.get(&key, &r.hash).await, Err(StorageError::NotFound { .. })));
	assert!(matches!(s.head(&key).await, Err(StorageError::NotFound { .. })));
	s.delete(&key).await.expect("deleting a missing object succeeds");
	assert_eq!(s.list(&keys::miner_scope(&id("run-t"), &id("miner-a"))).await.unwrap().len(), 1);
}

async fn missing_object_is_not_found(t: &Target) {
	let key = act_key("miner-a", 99);
	let h = ContentHash::of(b"anything");
	assert!(
		matches!(t.store.get(&key, &h).await, Err(StorageError::NotFound { key: k }) if k == key)
	);
	assert!(matches!(t.store.get_range(&key, 0..10).await, Err(StorageError::NotFound { .. })));
	let url = t.store.presign_get(&key, Duration::from_secs(60)).await.unwrap();
	assert!(matches!(http(t).get(&url, &h).await, Err(StorageError::NotFound { .. })));
}

async fn multipart_64mib_round_trip(t: &Target) {
	let s = &t.store;
	assert!(s.config().multipart_threshold <= 64 * MIB);
	let data = bytes(2, 64 * MIB as usize + 12_345); // not a multiple of the part size
	let key = keys::gradient_submission(&id("run-t"), 1, 2, &id("miner-a"));
	let r = s.put(&key, data.clone()).await.unwrap();
	assert_eq!(r.size, data.len() as u64);
	assert_eq!(s.head(&key).await.unwrap().size, data.len() as u64);
	let back = s.get(&key, &r.hash).await.unwrap();
	assert!(back == data, "64 MiB object changed in transit");

	// The streaming writer produces the same object and hash.
	let key2 = keys::gradient_submission(&id("run-t"), 2, 2, &id("miner-a"));
	let r2 = s.put_reader(&key2, std::io::Cursor::new(data.to_vec())).await.unwrap();
	assert_eq!((r2.size, r2.hash), (r.size, r.hash));
	assert_eq!(s.get(&key2, &r.hash).await.unwrap().len(), data.len());
}

/// Yields `good` bytes, then fails.
struct FailingReader {
	data: Bytes,
	pos: usize,
}

impl AsyncRead for FailingReader {
	fn poll_read(
		mut self: std::pin::Pin<&mut Self>,
		_: &mut std::task::Context<'_>,
		buf: &mut tokio::io::ReadBuf<'_>,
	) -> std::task::Poll<std::io::Result<()>> {
		if self.pos >= self.data.len() {
			return std::task::Poll::Ready(Err(std::io::Error::other("disk on fire")));
		}
		let n = buf.remaining().min(self.data.len() - self.pos);
		let pos = self.pos;
		buf.put_slice(&self.data[pos..pos + n]);
		self.pos += n;
		std::task::Poll::Ready(Ok(()))
	}
}

async fn failed_multipart_upload_is_aborted(t: &Target) {
	let s = &t.store;
	let key = keys::stage_checkpoint(&id("run-t"), 1, 2, &id("miner-a"));
	// Enough for the multipart threshold and some parts, then the input fails.
	let good = bytes(3, (s.config().multipart_threshold + s.config().part_size) as usize);
	let err = s.put_reader(&key, FailingReader { data: good, pos: 0 }).await.unwrap_err();
	let StorageError::MultipartFailed { upload_id, aborted, source, .. } = err else {
		panic!("expected MultipartFailed, got {err:?}")
	};
	assert!(aborted, "the failed upload must be aborted");
	assert!(matches!(*source, StorageError::Io { .. }), "cause: {source:?}");
	// No parts are left behind.
	let parts = s
		.sdk()
		.list_parts()
		.bucket(&s.config().bucket)
		.key(&key)
		.upload_id(&upload_id)
		.send()
		.await;
	// AWS and moto answer NoSuchUpload; s3s-fs lists the (no longer existing) part files: none.
	match &parts {
		Err(e) => assert_eq!(
			aws_sdk_s3::error::ProvideErrorMetadata::code(e),
			Some("NoSuchUpload"),
			"{e:?}"
		),
		Ok(out) => assert!(out.parts().is_empty(), "parts left behind: {out:?}"),
	}
	// And no object appeared.
	assert!(matches!(s.head(&key).await, Err(StorageError::NotFound { .. })));
	if let Some(root) = t.embedded_root() {
		let leftovers: Vec<_> = std::fs::read_dir(&root)
			.unwrap()
			.filter_map(|e| e.ok())
			.map(|e| e.file_name().to_string_lossy().into_owned())
			.filter(|n| n.starts_with(".upload_id-"))
			.collect();
		assert!(leftovers.is_empty(), "orphan part files: {leftovers:?}");
	}

	// Too much input is refused the same way, and aborted.
	let mut small = t.config();
	small.max_object_size = small.multipart_threshold + 1;
	let limited = ObjectStore::connect(small).await.unwrap();
	let big = bytes(4, (limited.config().multipart_threshold * 2) as usize);
	let err = limited.put_reader(&key, std::io::Cursor::new(big.to_vec())).await.unwrap_err();
	let StorageError::MultipartFailed { aborted, source, .. } = err else {
		panic!("expected MultipartFailed, got {err:?}")
	};
	assert!(aborted);
	assert!(matches!(*source, StorageError::TooLarge { .. }), "cause: {source:?}");
	assert!(matches!(s.head(&key).await, Err(StorageError::NotFound { .. })));
}

async fn ranged_get(t: &Target) {
	let s = &t.store;
	let data = bytes(5, 1_000_000);
	let key = keys::reduced_shard(&id("run-t"), 1, 2, 3, &id("miner-a"));
	s.put(&key, data.clone()).await.unwrap();
	assert_eq!(s.get_range(&key, 0..1).await.unwrap(), data.slice(0..1));
	assert_eq!(s.get_range(&key, 123_456..654_321).await.unwrap(), data.slice(123_456..654_321));
	assert_eq!(s.get_range(&key, 999_000..1_000_000).await.unwrap(), data.slice(999_000..));
	// Past the end: fewer bytes than asked is never returned as the slice.
	assert!(matches!(
		s.get_range(&key, 999_000..1_000_100).await,
		Err(StorageError::Truncated { expected: 1100, received: 1000, .. })
	));
	assert!(matches!(s.get_range(&key, 5..5).await, Err(StorageError::InvalidRange { .. })));
	assert!(matches!(
		s.get_range(&key, 2_000_000..2_000_010).await,
		Err(StorageError::InvalidRange { .. })
	));
}

async fn presigned_put_then_get(t: &Target) {
	let key = act_key("miner-a", 7);
	let put = t.store.presign_put(&key, Duration::from_secs(300)).await.unwrap();
	let data = bytes(6, 256 * 1024);
	// The request travels as JSON in an RPC reply.
	let put: iota_storage::PresignedRequest = serde_json_round_trip(t, &put);
	let hash = http(t).put(&put, data.clone()).await.unwrap();
	assert_eq!(hash, ContentHash::of(&data));
	let get = t.store.presign_get(&key, Duration::from_secs(300)).await.unwrap();
	assert_eq!(http(t).get(&get, &hash).await.unwrap(), data);
	// The orchestrator's client reads the same object.
	assert_eq!(t.store.get(&key, &hash).await.unwrap(), data);
	// A GET URL is not a PUT URL.
	assert!(matches!(http(t).put(&get, data).await, Err(StorageError::Config(_))));
	// Expiry beyond SigV4's 7 days is refused locally.
	assert!(matches!(
		t.store.presign_get(&key, Duration::from_secs(8 * 24 * 3600)).await,
		Err(StorageError::Config(_))
	));
}

fn serde_json_round_trip(
	t: &Target,
	r: &iota_storage::PresignedRequest,
) -> iota_storage::PresignedRequest {
	let json = serde_json::to_string(r).unwrap();
	let iota_storage::Credentials::Static { secret_key, .. } = t.config().credentials else {
		unreachable!()
	};
	assert!(!json.contains(&secret_key), "a presigned request carries no secret: {json}");
	serde_json::from_str(&json).unwrap()
}

async fn expired_presigned_url_is_refused(t: &Target) {
	if skip(t, "moto does not enforce presigned URL expiry") {
		return;
	}
	let key = act_key("miner-a", 8);
	let data = Bytes::from_static(b"activation");
	let r = t.store.put(&key, data.clone()).await.unwrap();
	let get = t.store.presign_get(&key, Duration::from_secs(3)).await.unwrap();
	let put = t.store.presign_put(&key, Duration::from_secs(3)).await.unwrap();
	assert_eq!(http(t).get(&get, &r.hash).await.unwrap(), data, "valid before expiry");
	// X-Amz-Date has whole seconds, so a 3 s URL is valid for 2-3 s from now.
	tokio::time::sleep(Duration::from_millis(4100)).await;
	assert!(matches!(http(t).get(&get, &r.hash).await, Err(StorageError::UrlExpired { .. })));
	assert!(matches!(http(t).put(&put, data).await, Err(StorageError::UrlExpired { .. })));
}

async fn tampered_object_fails_hash_check(t: &Target) {
	let s = &t.store;
	let key = act_key("miner-a", 9);
	let data = bytes(7, 100_000);
	let r = s.put(&key, data.clone()).await.unwrap();
	// Someone with bucket access flips one byte.
	let mut evil = data.to_vec();
	evil[5000] ^= 1;
	s.sdk()
		.put_object()
		.bucket(&s.config().bucket)
		.key(&key)
		.body(evil.into())
		.send()
		.await
		.unwrap();
	match s.get(&key, &r.hash).await {
		Err(StorageError::HashMismatch { expected, size, .. }) => {
			assert_eq!((expected, size), (r.hash, 100_000))
		},
		other => panic!("expected HashMismatch, got {other:?}"),
	}
	let url = s.presign_get(&key, Duration::from_secs(60)).await.unwrap();
	assert!(matches!(http(t).get(&url, &r.hash).await, Err(StorageError::HashMismatch { .. })));
}

async fn concurrent_uploads_from_16_tasks(t: &Target) {
	let mut tasks = tokio::task::JoinSet::new();
	for i in 0..16u64 {
		let s = t.store.clone();
		tasks.spawn(async move {
			let key = act_key(&format!("miner-{i}"), i);
			let data = bytes(100 + i, 200_000 + i as usize);
			let r = s.put(&key, data.clone()).await.unwrap();
			(key, r.hash, data)
		});
	}
	let done = tasks.join_all().await;
	assert_eq!(done.len(), 16);
	for (key, hash, data) in done {
		assert_eq!(t.store.get(&key, &hash).await.unwrap(), data, "{key}");
	}
	assert_eq!(t.store.list(&keys::run_scope(&id("run-t"))).await.unwrap().len(), 16);
}

async fn over_size_limit_is_refused(t: &Target) {
	let key = act_key("miner-a", 10);
	let data = bytes(8, 10_000);
	let r = t.store.put(&key, data.clone()).await.unwrap();
	let mut small = t.config();
	small.max_object_size = 9_999;
	let limited = ObjectStore::connect(small.clone()).await.unwrap();
	assert!(matches!(
		limited.put(&key, data.clone()).await,
		Err(StorageError::TooLarge { size: 10_000, limit: 9_999, .. })
	));
	assert!(matches!(
		limited.get(&key, &r.hash).await,
		Err(StorageError::TooLarge { size: 10_000, limit: 9_999, .. })
	));
	let lhttp = PresignedHttp::from_config(&small).unwrap();
	let get = t.store.presign_get(&key, Duration::from_secs(60)).await.unwrap();
	assert!(matches!(lhttp.get(&get, &r.hash).await, Err(StorageError::TooLarge { .. })));
	let put = t.store.presign_put(&key, Duration::from_secs(60)).await.unwrap();
	assert!(matches!(lhttp.put(&put, data).await, Err(StorageError::TooLarge { .. })));
}

async fn wrong_credentials_are_refused(t: &Target) {
	if skip(t, "moto accepts any credentials") {
		return;
	}
	let key = act_key("miner-a", 11);
	let mut c = t.config();
	let iota_storage::Credentials::Static { access_key, .. } = c.credentials.clone() else {
		unreachable!()
	};
	c.credentials =
		iota_storage::Credentials::Static { access_key, secret_key: "wrong-secret".into() };
	let s = ObjectStore::connect(c.clone()).await.unwrap();
	assert!(matches!(
		s.put(&key, Bytes::from_static(b"x")).await,
		Err(StorageError::InvalidCredentials { .. })
	));
	assert!(matches!(s.list("").await, Err(StorageError::InvalidCredentials { .. })));
	c.credentials =
		iota_storage::Credentials::Static { access_key: "nobody".into(), secret_key: "x".into() };
	let s = ObjectStore::connect(c).await.unwrap();
	let err = s.get(&key, &ContentHash::of(b"x")).await.unwrap_err();
	// AWS (and the embedded server) answer InvalidAccessKeyId: refused credentials.
	assert!(
		matches!(&err, StorageError::InvalidCredentials { code, .. } if code == "InvalidAccessKeyId"),
		"{err:?}"
	);
	// A URL signed with a wrong secret is refused too.
	let url = s.presign_put(&key, Duration::from_secs(60)).await.unwrap();
	assert!(matches!(
		http(t).put(&url, Bytes::from_static(b"x")).await,
		Err(StorageError::InvalidCredentials { .. })
	));
	assert!(
		matches!(t.store.head(&key).await, Err(StorageError::NotFound { .. })),
		"nothing was written"
	);
}

async fn presigned_url_cannot_name_another_key(t: &Target) {
	if skip(t, "moto does not check signatures") {
		return;
	}
	let mine = act_key("miner-a", 12);
	let theirs = act_key("miner-b", 12);
	let put = t.store.presign_put(&mine, Duration::from_secs(60)).await.unwrap();
	// Point the signed URL at another miner's key.
	let forged = iota_storage::PresignedRequest {
		url: put.url.replace("miner-a", "miner-b"),
		..put.clone()
	};
	assert_ne!(forged.url, put.url);
	let err = http(t).put(&forged, Bytes::from_static(b"x")).await.unwrap_err();
	assert!(matches!(err, StorageError::InvalidCredentials { .. }), "{err:?}");
	// Or alter the signature itself.
	let sig_at = put.url.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
	let mut bad = put.url.clone().into_bytes();
	bad[sig_at] = if bad[sig_at] == b'0' { b'1' } else { b'0' };
	let tampered =
		iota_storage::PresignedRequest { url: String::from_utf8(bad).unwrap(), ..put.clone() };
	assert!(matches!(
		http(t).put(&tampered, Bytes::from_static(b"x")).await,
		Err(StorageError::InvalidCredentials { .. })
	));
	assert!(matches!(t.store.head(&theirs).await, Err(StorageError::NotFound { .. })));
	assert!(matches!(t.store.head(&mine).await, Err(StorageError::NotFound { .. })));
	// The genuine URL works.
	http(t).put(&put, Bytes::from_static(b"x")).await.unwrap();
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let t = crate::common::embedded().await;
                    super::$case(&t).await;
                    t.stop().await;
                }
            )*
        }
        mod moto {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(t) = crate::common::moto().await else { return };
                    super::$case(&t).await;
                    t.stop().await;
                }
            )*
        }
    };
}

suite! {
	put_get_head_list_delete,
	missing_object_is_not_found,
	multipart_64mib_round_trip,
	failed_multipart_upload_is_aborted,
	ranged_get,
	presigned_put_then_get,
	expired_presigned_url_is_refused,
	tampered_object_fails_hash_check,
	concurrent_uploads_from_16_tasks,
	over_size_limit_is_refused,
	wrong_credentials_are_refused,
	presigned_url_cannot_name_another_key,
}
