//! Failures a real server rarely produces on demand, injected with a scripted HTTP server on 127.0.0.1:
//! truncated bodies, 5xx and throttling (retried with backoff), hangs (timeouts), and errors that must
//! not be retried. Both the SDK client and the presigned-URL helper are checked.

mod common;

use std::time::{Duration, Instant};

use common::{Reply, Scripted};
use iota_storage::{
	ContentHash, Method, ObjectStore, PresignedHttp, PresignedRequest, RetryPolicy, StorageError,
	StoreConfig,
};

fn presigned_get(server: &Scripted) -> PresignedRequest {
	PresignedRequest {
		method: Method::Get,
		url: format!("{}/bucket/key?X-Amz-Signature=x", server.endpoint()),
		headers: vec![],
		expires_at: 0,
	}
}

fn quick_retry(max_attempts: u32) -> RetryPolicy {
	RetryPolicy {
		max_attempts,
		initial_backoff: Duration::from_millis(10),
		max_backoff: Duration::from_millis(50),
	}
}

async fn store_for(server: &Scripted, max_attempts: u32, attempt_timeout: Duration) -> ObjectStore {
	let mut c = StoreConfig::s3_compatible(server.endpoint(), "bucket", "ak", "sk");
	c.retry = quick_retry(max_attempts);
	c.attempt_timeout = attempt_timeout;
	ObjectStore::connect(c).await.unwrap()
}

#[tokio::test]
async fn truncated_download_is_an_error_not_data() {
	let body = vec![7u8; 600];
	let server =
		Scripted::start(vec![Reply::Truncated { announced: 1000, body: body.clone() }]).await;
	let hash = ContentHash::of(&body); // even the hash of what arrived must not let it through

	let http = PresignedHttp::new(quick_retry(1), Duration::from_secs(10), 1 << 20).unwrap();
	let err = http.get(&presigned_get(&server), &hash).await.unwrap_err();
	assert!(
		matches!(err, StorageError::Truncated { expected: 1000, received: 600, .. }),
		"{err:?}"
	);

	let store = store_for(&server, 1, Duration::from_secs(10)).await;
	let err = store.get("key", &hash).await.unwrap_err();
	assert!(
		matches!(err, StorageError::Truncated { expected: 1000, received: 600, .. }),
		"{err:?}"
	);
}

#[tokio::test]
async fn throttling_and_5xx_are_retried_with_backoff() {
	let body = b"finally".to_vec();
	let script = vec![
		Reply::s3_error(503, "SlowDown", "Please reduce your request rate."),
		Reply::s3_error(500, "InternalError", "oops"),
		Reply::ok(&body),
	];
	let server = Scripted::start(script.clone()).await;
	let http = PresignedHttp::new(quick_retry(4), Duration::from_secs(10), 1 << 20).unwrap();
	assert_eq!(http.get(&presigned_get(&server), &ContentHash::of(&body)).await.unwrap(), body);
	assert_eq!(server.hits(), 3);

	let server = Scripted::start(script).await;
	let store = store_for(&server, 4, Duration::from_secs(10)).await;
	assert_eq!(store.get("key", &ContentHash::of(&body)).await.unwrap(), body);
	assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn retries_stop_at_max_attempts() {
	let server = Scripted::start(vec![Reply::s3_error(503, "SlowDown", "busy")]).await;
	let http = PresignedHttp::new(quick_retry(3), Duration::from_secs(10), 1 << 20).unwrap();
	let err = http.get(&presigned_get(&server), &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Unavailable { status: 503, attempts: 3, .. }), "{err:?}");
	assert_eq!(server.hits(), 3);

	let server = Scripted::start(vec![Reply::s3_error(503, "SlowDown", "busy")]).await;
	let store = store_for(&server, 3, Duration::from_secs(10)).await;
	let err = store.get("key", &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Unavailable { status: 503, .. }), "{err:?}");
	assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
	for (reply, check) in [
		(
			Reply::s3_error(404, "NoSuchKey", "gone"),
			(|e: &StorageError| matches!(e, StorageError::NotFound { .. }))
				as fn(&StorageError) -> bool,
		),
		(Reply::s3_error(403, "AccessDenied", "Request has expired"), |e| {
			matches!(e, StorageError::UrlExpired { .. })
		}),
		(Reply::s3_error(403, "SignatureDoesNotMatch", "bad sig"), |e| {
			matches!(e, StorageError::InvalidCredentials { .. })
		}),
		(Reply::s3_error(403, "AccessDenied", "Forbidden"), |e| {
			matches!(e, StorageError::AccessDenied { .. })
		}),
	] {
		let server = Scripted::start(vec![reply.clone()]).await;
		let http = PresignedHttp::new(quick_retry(4), Duration::from_secs(10), 1 << 20).unwrap();
		let err = http.get(&presigned_get(&server), &ContentHash::of(b"")).await.unwrap_err();
		assert!(check(&err), "{reply:?} -> {err:?}");
		assert_eq!(server.hits(), 1, "{reply:?} must not be retried");

		let server = Scripted::start(vec![reply.clone()]).await;
		let store = store_for(&server, 4, Duration::from_secs(10)).await;
		let err = store.get("key", &ContentHash::of(b"")).await.unwrap_err();
		assert!(check(&err), "SDK: {reply:?} -> {err:?}");
		assert_eq!(server.hits(), 1, "{reply:?} must not be retried by the SDK client");
	}
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
	let server = Scripted::start(vec![Reply::Hang]).await;
	let http = PresignedHttp::new(quick_retry(2), Duration::from_millis(300), 1 << 20).unwrap();
	let started = Instant::now();
	let err = http.get(&presigned_get(&server), &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Timeout { .. }), "{err:?}");
	assert_eq!(server.hits(), 2, "a timeout is retried");
	assert!(started.elapsed() < Duration::from_secs(5));

	let server = Scripted::start(vec![Reply::Hang]).await;
	let store = store_for(&server, 1, Duration::from_millis(300)).await;
	let err = store.get("key", &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Timeout { .. }), "{err:?}");
}

#[tokio::test]
async fn announced_size_over_the_limit_is_refused_before_reading() {
	let server = Scripted::start(vec![Reply::ok(&[1u8; 5000])]).await;
	let http = PresignedHttp::new(quick_retry(1), Duration::from_secs(10), 4096).unwrap();
	let err = http.get(&presigned_get(&server), &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::TooLarge { size: 5000, limit: 4096, .. }), "{err:?}");
}

#[tokio::test]
async fn a_body_that_stops_flowing_times_out() {
	let stall = Reply::Stall { announced: 1000, body: vec![1u8; 100] };
	let server = Scripted::start(vec![stall.clone()]).await;
	let http = PresignedHttp::new(quick_retry(1), Duration::from_millis(300), 1 << 20).unwrap();
	let err = http.get(&presigned_get(&server), &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Timeout { .. }), "{err:?}");

	let server = Scripted::start(vec![stall]).await;
	let store = store_for(&server, 1, Duration::from_millis(300)).await;
	let started = Instant::now();
	let err = store.get("key", &ContentHash::of(b"")).await.unwrap_err();
	assert!(matches!(err, StorageError::Timeout { .. }), "{err:?}");
	assert!(started.elapsed() < Duration::from_secs(5));
}
