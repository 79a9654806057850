//! Connection and behaviour settings of the object layer.

use std::time::Duration;

use crate::error::{Result, StorageError};

/// 1 MiB, in bytes.
pub const MIB: u64 = 1024 * 1024;

/// Smallest part S3 accepts in a multipart upload (every part but the last), in bytes.
pub const MIN_PART_SIZE: u64 = 5 * MIB;

/// Where the credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
	/// An access key and secret given explicitly (the embedded server's static pair, or a config file).
	Static {
		/// Access key id.
		access_key: String,
		/// Secret access key.
		secret_key: String,
	},
	/// The standard AWS chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, then `~/.aws` profiles, then
	/// instance metadata (aws-config's default provider chain).
	FromEnvironment,
}

/// Retries with exponential backoff, for throttling (429, `SlowDown`), 5xx, timeouts and connection errors.
/// Other errors (404, 403, hash mismatch...) are never retried.
///
/// Modelled on the AWS SDKs' "standard" retry mode: retry n waits up to `min(initial * 2^(n-1), max)`.
/// [`crate::ObjectStore`] hands these numbers to the SDK's own implementation (full jitter, plus its
/// retry quota); [`crate::PresignedHttp`] uses [`RetryPolicy::backoff`] (equal jitter). Truncated
/// downloads are not retried automatically: the caller gets [`crate::StorageError::Truncated`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
	/// Attempts including the first; 1 disables retries.
	pub max_attempts: u32,
	/// Backoff ceiling before the first retry.
	pub initial_backoff: Duration,
	/// Backoff ceiling for any retry.
	pub max_backoff: Duration,
}

impl Default for RetryPolicy {
	/// 4 attempts, 100 ms initial, 5 s max.
	fn default() -> Self {
		Self {
			max_attempts: 4,
			initial_backoff: Duration::from_millis(100),
			max_backoff: Duration::from_secs(5),
		}
	}
}

impl RetryPolicy {
	/// The ceiling of the wait before retry number `retry` (1 = first retry): `initial * 2^(retry-1)`,
	/// capped at `max_backoff`.
	pub fn backoff_ceiling(&self, retry: u32) -> Duration {
		let factor = 1u32.checked_shl(retry.saturating_sub(1).min(30)).unwrap_or(u32::MAX);
		self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
	}

	/// The policy as backon's exponential backoff: waits from `initial_backoff` doubling up to
	/// `max_backoff`, each with random jitter added (so concurrent clients spread out), at most
	/// `max_attempts − 1` retries.
	pub fn backoff(&self) -> backon::ExponentialBuilder {
		backon::ExponentialBuilder::default()
			.with_min_delay(self.initial_backoff)
			.with_max_delay(self.max_backoff)
			.with_max_times(self.max_attempts.saturating_sub(1) as usize)
			.with_jitter()
	}
}

/// Runs `op` until it succeeds, fails with an error `retryable` refuses, or `policy`'s attempts are
/// spent, waiting the policy's backoff between attempts ([`RetryPolicy::backoff`]); each retry is
/// logged at debug level with `what`. Returns the last result and the number of attempts made. The one
/// retry loop of the project: storage, presigned HTTP and the miner's orchestrator calls use it.
pub async fn retry<T, E, F, Fut>(
	policy: &RetryPolicy,
	what: &str,
	mut op: F,
	retryable: impl FnMut(&E) -> bool,
) -> (std::result::Result<T, E>, u32)
where
	F: FnMut() -> Fut,
	Fut: std::future::Future<Output = std::result::Result<T, E>>,
	E: std::fmt::Display,
{
	use backon::Retryable;
	let attempts = std::sync::atomic::AtomicU32::new(0);
	let result = (|| {
		attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
		op()
	})
	.retry(policy.backoff())
	.sleep(tokio::time::sleep)
	.when(retryable)
	.notify(|e, wait| tracing::debug!(what, ?wait, error = %e, "retrying"))
	.await;
	(result, attempts.into_inner())
}

/// Everything the client needs to reach one bucket.
#[derive(Clone, Debug)]
pub struct StoreConfig {
	/// Endpoint URL (`http://127.0.0.1:9000` for the embedded server or MinIO,
	/// `https://<account>.r2.cloudflarestorage.com` for R2); `None` means AWS S3 for `region`.
	pub endpoint: Option<String>,
	/// Region name used for signing: AWS's region without an endpoint; `us-east-1` with one (what
	/// MinIO and Ceph expect; R2 accepts it as well as its own `auto`).
	pub region: String,
	/// The bucket holding every object of the deployment.
	pub bucket: String,
	/// Credentials source.
	pub credentials: Credentials,
	/// Path-style addressing (`endpoint/bucket/key`), needed by local S3 servers; AWS prefers virtual-hosted.
	pub force_path_style: bool,
	/// Objects of at least this many bytes are uploaded in parts (bytes; default 16 MiB).
	pub multipart_threshold: u64,
	/// Part size of multipart uploads (bytes, at least [`MIN_PART_SIZE`]; default 8 MiB).
	pub part_size: u64,
	/// Parts uploaded at once per multipart upload (default 4).
	pub part_concurrency: usize,
	/// Largest object this client writes or reads (bytes; default 4 GiB). Protects memory against a
	/// hostile or broken peer announcing a huge object.
	pub max_object_size: u64,
	/// Timeout of one attempt of one request (default 120 s). [`crate::PresignedHttp`] applies it to the
	/// whole request, body included; [`crate::ObjectStore`] to the request up to the response head, and
	/// then to each wait for the next chunk of a downloaded body (a body that stops flowing fails).
	pub attempt_timeout: Duration,
	/// Timeout for establishing a connection (default 5 s).
	pub connect_timeout: Duration,
	/// Retry policy.
	pub retry: RetryPolicy,
}

impl StoreConfig {
	/// Settings for an S3-compatible server at `endpoint` with static credentials: path-style addressing,
	/// region `us-east-1`, defaults for the rest.
	pub fn s3_compatible(
		endpoint: impl Into<String>,
		bucket: impl Into<String>,
		access_key: impl Into<String>,
		secret_key: impl Into<String>,
	) -> Self {
		Self {
			endpoint: Some(endpoint.into()),
			region: "us-east-1".into(),
			bucket: bucket.into(),
			credentials: Credentials::Static {
				access_key: access_key.into(),
				secret_key: secret_key.into(),
			},
			force_path_style: true,
			..Self::aws("us-east-1", "")
		}
	}

	/// Settings for AWS S3 in `region`, credentials from the standard environment/profile chain.
	pub fn aws(region: impl Into<String>, bucket: impl Into<String>) -> Self {
		Self {
			endpoint: None,
			region: region.into(),
			bucket: bucket.into(),
			credentials: Credentials::FromEnvironment,
			force_path_style: false,
			multipart_threshold: 16 * MIB,
			part_size: 8 * MIB,
			part_concurrency: 4,
			max_object_size: 4096 * MIB,
			attempt_timeout: Duration::from_secs(120),
			connect_timeout: Duration::from_secs(5),
			retry: RetryPolicy::default(),
		}
	}

	/// Checks the values S3 or this client cannot work with.
	///
	/// # Errors
	/// [`StorageError::Config`] naming the bad field: empty bucket, `part_size` below [`MIN_PART_SIZE`],
	/// `multipart_threshold` below `part_size`, a zero `part_concurrency` or `retry.max_attempts`, or
	/// `max_object_size` needing more than 10,000 parts of `part_size`.
	pub fn validate(&self) -> Result<()> {
		let fail = |m: String| Err(StorageError::Config(m));
		if self.bucket.is_empty() {
			return fail("bucket is empty".into());
		}
		if self.part_size < MIN_PART_SIZE {
			return fail(format!(
				"part_size {} bytes is below the S3 minimum of {MIN_PART_SIZE}",
				self.part_size
			));
		}
		if self.multipart_threshold < self.part_size {
			return fail(format!(
				"multipart_threshold {} bytes is below part_size {} bytes",
				self.multipart_threshold, self.part_size
			));
		}
		if self.max_object_size.div_ceil(self.part_size) > 10_000 {
			return fail(format!(
				"max_object_size {} bytes needs more than 10,000 parts of {} bytes (the S3 limit)",
				self.max_object_size, self.part_size
			));
		}
		if self.part_concurrency == 0 || self.retry.max_attempts == 0 {
			return fail("part_concurrency and retry.max_attempts must be at least 1".into());
		}
		Ok(())
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn backoff_doubles_and_caps() {
		let p = RetryPolicy {
			max_attempts: 10,
			initial_backoff: Duration::from_millis(100),
			max_backoff: Duration::from_secs(1),
		};
		assert_eq!(p.backoff_ceiling(1), Duration::from_millis(100));
		assert_eq!(p.backoff_ceiling(2), Duration::from_millis(200));
		assert_eq!(p.backoff_ceiling(4), Duration::from_millis(800));
		assert_eq!(p.backoff_ceiling(5), Duration::from_secs(1));
		assert_eq!(p.backoff_ceiling(500), Duration::from_secs(1));
		use backon::BackoffBuilder;
		let waits: Vec<Duration> = p.backoff().build().collect();
		assert_eq!(waits.len(), 9, "max_attempts − 1 retries");
		for (i, w) in waits.iter().enumerate() {
			let ceiling = p.backoff_ceiling(i as u32 + 1);
			assert!(*w >= ceiling && *w <= 2 * ceiling, "retry {}: {w:?}", i + 1);
		}
	}

	#[tokio::test]
	async fn retry_stops_at_a_permanent_error_or_the_last_attempt() {
		let p = RetryPolicy {
			max_attempts: 3,
			initial_backoff: Duration::from_millis(1),
			max_backoff: Duration::from_millis(2),
		};
		let (r, n) = retry(&p, "t", || async { Err::<(), _>("transient") }, |_| true).await;
		assert_eq!((r, n), (Err("transient"), 3));
		let (r, n) = retry(&p, "t", || async { Err::<(), _>("permanent") }, |_| false).await;
		assert_eq!((r, n), (Err("permanent"), 1));
		let calls = std::sync::atomic::AtomicU32::new(0);
		let (r, n) = retry(
			&p,
			"t",
			|| async {
				let k = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
				if k == 0 {
					Err("once")
				} else {
					Ok(k)
				}
			},
			|_| true,
		)
		.await;
		assert_eq!((r, n), (Ok(1), 2));
	}

	#[test]
	fn bad_config_is_refused() {
		let ok = StoreConfig::s3_compatible("http://127.0.0.1:1", "b", "a", "s");
		ok.validate().unwrap();
		let mut c = ok.clone();
		c.part_size = MIN_PART_SIZE - 1;
		assert!(matches!(c.validate(), Err(StorageError::Config(m)) if m.contains("part_size")));
		let mut c = ok.clone();
		c.bucket.clear();
		assert!(matches!(c.validate(), Err(StorageError::Config(m)) if m.contains("bucket")));
		let mut c = ok.clone();
		c.max_object_size = 10_001 * c.part_size;
		assert!(matches!(c.validate(), Err(StorageError::Config(m)) if m.contains("10,000 parts")));
		let mut c = ok;
		c.multipart_threshold = MIN_PART_SIZE;
		c.part_size = 2 * MIN_PART_SIZE;
		assert!(
			matches!(c.validate(), Err(StorageError::Config(m)) if m.contains("multipart_threshold"))
		);
	}
}
