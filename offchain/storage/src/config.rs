//! Connection and behaviour settings of the object layer.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

	/// The wait before retry number `retry`: a uniform draw in `[ceiling/2, ceiling]` ("equal jitter",
	/// so concurrent clients spread out but never retry immediately). The draw uses the clock's
	/// nanoseconds; it needs to be spread, not unpredictable.
	pub fn backoff(&self, retry: u32) -> Duration {
		let ceiling = self.backoff_ceiling(retry);
		let nanos = SystemTime::now()
			.duration_since(UNIX_EPOCH)
			.map(|d| d.subsec_nanos())
			.unwrap_or(0);
		let frac = f64::from(nanos % 1_000_000) / 1_000_000.0;
		ceiling.mul_f64(0.5 + 0.5 * frac)
	}
}

/// Everything the client needs to reach one bucket.
#[derive(Clone, Debug)]
pub struct StoreConfig {
	/// Endpoint URL (`http://127.0.0.1:9000` for the embedded server or MinIO,
	/// `https://<account>.r2.cloudflarestorage.com` for R2); `None` means AWS S3 for `region`.
	pub endpoint: Option<String>,
	/// Region name used for signing (`us-east-1` for servers that ignore it; `auto` for R2).
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
		for r in 1..6 {
			let b = p.backoff(r);
			assert!(b >= p.backoff_ceiling(r) / 2 && b <= p.backoff_ceiling(r), "{r}: {b:?}");
		}
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
