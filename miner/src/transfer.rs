//! Moving objects through presigned URLs (docs/design.md §7: miners hold no bucket credentials).
//!
//! [`ObjectIo`] is what the miner needs: a hash-checked GET, a ranged GET (a butterfly reducer reads
//! only the chunk-aligned span of each submission, checked chunk by chunk by [`crate::merge`]), and a
//! PUT that returns the hash of what was sent. [`HttpIo`] performs them over HTTP: full GETs and PUTs with
//! [`PresignedHttp`] (retries, size limit, BLAKE3 check), ranged GETs with the same presigned GET plus an
//! HTTP `Range` header (SigV4 query signing covers only the `host` header, so the same URL serves any
//! range), retried on the same policy. [`ByteCounter`] counts bytes each way for the metrics and the
//! merge benchmark.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use iota_storage::{
	ContentHash, Method, PresignedHttp, PresignedRequest, RetryPolicy, StorageError,
};

/// Object transfers through presigned requests.
#[async_trait]
pub trait ObjectIo: Send + Sync {
	/// The whole object, only if it hashes to `expected`.
	///
	/// # Errors
	/// [`StorageError::HashMismatch`], `NotFound`, `UrlExpired`, `TooLarge`, `Truncated`, transport errors.
	async fn get(
		&self,
		req: &PresignedRequest,
		expected: &ContentHash,
	) -> Result<Bytes, StorageError>;
	/// Bytes `range` (end exclusive) of the object, exactly `range.end − range.start` of them. A range has
	/// no hash of its own: the caller checks it (chunk hashes).
	///
	/// # Errors
	/// [`StorageError::InvalidRange`], `Truncated`, `NotFound`, `UrlExpired`, transport errors.
	async fn get_range(
		&self,
		req: &PresignedRequest,
		range: Range<u64>,
	) -> Result<Bytes, StorageError>;
	/// Upload `data`; returns its BLAKE3.
	///
	/// # Errors
	/// `TooLarge`, `UrlExpired`, `InvalidCredentials`, transport errors.
	async fn put(&self, req: &PresignedRequest, data: Bytes) -> Result<ContentHash, StorageError>;
}

/// Bytes moved, both ways (shared, cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct ByteCounter {
	up: Arc<AtomicU64>,
	down: Arc<AtomicU64>,
}

impl ByteCounter {
	/// Bytes uploaded so far.
	pub fn up(&self) -> u64 {
		self.up.load(Ordering::Relaxed)
	}
	/// Bytes downloaded so far.
	pub fn down(&self) -> u64 {
		self.down.load(Ordering::Relaxed)
	}
	fn add_up(&self, n: usize) {
		self.up.fetch_add(n as u64, Ordering::Relaxed);
	}
	fn add_down(&self, n: usize) {
		self.down.fetch_add(n as u64, Ordering::Relaxed);
	}
}

/// [`ObjectIo`] over HTTP(S).
#[derive(Clone, Debug)]
pub struct HttpIo {
	presigned: PresignedHttp,
	raw: reqwest::Client,
	retry: RetryPolicy,
	/// Bytes moved (payloads only, not headers).
	pub bytes: ByteCounter,
}

impl HttpIo {
	/// A client with `retry`, a per-attempt timeout and the largest object it moves, in bytes.
	///
	/// # Errors
	/// [`StorageError::Config`] if the HTTP client cannot be built.
	pub fn new(
		retry: RetryPolicy,
		attempt_timeout: Duration,
		max_object_size: u64,
	) -> Result<Self, StorageError> {
		let presigned = PresignedHttp::new(retry.clone(), attempt_timeout, max_object_size)?;
		let raw = reqwest::Client::builder()
			.timeout(attempt_timeout)
			.build()
			.map_err(|e| StorageError::Config(format!("building the HTTP client: {e}")))?;
		Ok(HttpIo { presigned, raw, retry, bytes: ByteCounter::default() })
	}

	async fn range_once(
		&self,
		req: &PresignedRequest,
		range: &Range<u64>,
	) -> Result<Bytes, StorageError> {
		let what = req.redacted_url().to_owned();
		let mut rb = self
			.raw
			.get(&req.url)
			.header("range", format!("bytes={}-{}", range.start, range.end - 1));
		for (k, v) in &req.headers {
			rb = rb.header(k, v);
		}
		let resp = rb.send().await.map_err(|e| {
			if e.is_timeout() {
				StorageError::Timeout { key: what.clone(), after: Duration::ZERO }
			} else {
				StorageError::Transport { key: what.clone(), message: e.to_string() }
			}
		})?;
		let status = resp.status().as_u16();
		let want = range.end - range.start;
		match status {
			206 => {},
			// A server that ignores Range answers 200 with the whole object: refuse rather than slice a
			// body we have not bounded.
			200 => {
				return Err(StorageError::Transport {
					key: what,
					message: "server ignored the Range header".into(),
				})
			},
			416 => {
				return Err(StorageError::InvalidRange {
					key: what,
					start: range.start,
					end: range.end,
				})
			},
			404 => return Err(StorageError::NotFound { key: what }),
			403 => {
				let body = resp.text().await.unwrap_or_default();
				return Err(if body.contains("expired") {
					StorageError::UrlExpired { message: "Request has expired".into() }
				} else {
					StorageError::AccessDenied {
						key: what,
						message: body.chars().take(200).collect(),
					}
				});
			},
			s if s == 429 || s >= 500 => {
				return Err(StorageError::Unavailable {
					key: what,
					status: s,
					message: String::new(),
					attempts: 1,
				})
			},
			s => return Err(StorageError::Transport { key: what, message: format!("HTTP {s}") }),
		}
		let data = resp
			.bytes()
			.await
			.map_err(|e| StorageError::Transport { key: what.clone(), message: e.to_string() })?;
		if data.len() as u64 != want {
			return Err(StorageError::Truncated {
				key: what,
				expected: want,
				received: data.len() as u64,
			});
		}
		Ok(data)
	}
}

#[async_trait]
impl ObjectIo for HttpIo {
	async fn get(
		&self,
		req: &PresignedRequest,
		expected: &ContentHash,
	) -> Result<Bytes, StorageError> {
		let b = self.presigned.get(req, expected).await?;
		self.bytes.add_down(b.len());
		Ok(b)
	}

	async fn get_range(
		&self,
		req: &PresignedRequest,
		range: Range<u64>,
	) -> Result<Bytes, StorageError> {
		if req.method != Method::Get {
			return Err(StorageError::Config(format!(
				"{}: expected a presigned GET",
				req.redacted_url()
			)));
		}
		if range.start >= range.end {
			return Err(StorageError::InvalidRange {
				key: req.redacted_url().into(),
				start: range.start,
				end: range.end,
			});
		}
		let what = req.redacted_url();
		let (r, _) = iota_storage::retry(
			&self.retry,
			what,
			|| self.range_once(req, &range),
			StorageError::is_retryable,
		)
		.await;
		let b = r?;
		self.bytes.add_down(b.len());
		Ok(b)
	}

	async fn put(&self, req: &PresignedRequest, data: Bytes) -> Result<ContentHash, StorageError> {
		let n = data.len();
		let h = self.presigned.put(req, data).await?;
		self.bytes.add_up(n);
		Ok(h)
	}
}
