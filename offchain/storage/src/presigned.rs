//! Presigned URLs and the small HTTP client miners and validators use with them.
//!
//! Miners and validators hold no bucket credentials (docs/design.md §1, §7): the orchestrator, which does, signs a
//! [`PresignedRequest`] for exactly one key with a short expiry and sends it in an RPC reply. The holder
//! performs it with [`PresignedHttp`], which applies the same retry policy, size limit and BLAKE3 check as
//! [`crate::ObjectStore`]. Following the S3 presigned-URL contract, the request must be sent with the
//! signed method, the exact URI and every header listed (docs/design.md §9).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use crate::client::{unix_now, verify};
use crate::config::RetryPolicy;
use crate::error::{classify, Result, StorageError};
use crate::hash::ContentHash;

pub use iota_protocol::objects::{Method, PresignedRequest};

/// The protocol's [`PresignedRequest`] for an SDK presigned request valid for `expires_in`.
pub(crate) fn from_sdk(
	req: &aws_sdk_s3::presigning::PresignedRequest,
	expires_in: Duration,
) -> PresignedRequest {
	let method = if req.method().eq_ignore_ascii_case("PUT") { Method::Put } else { Method::Get };
	PresignedRequest {
		method,
		url: req.uri().to_owned(),
		headers: req.headers().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
		expires_at: unix_now() + expires_in.as_secs(),
	}
}

/// Performs [`PresignedRequest`]s over HTTP(S) with reqwest (rustls), with retries, a size limit and
/// BLAKE3 checks. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PresignedHttp {
	http: reqwest::Client,
	retry: RetryPolicy,
	attempt_timeout: Duration,
	max_object_size: u64,
}

impl PresignedHttp {
	/// A client with the given retry policy, per-attempt timeout (whole request including body) and
	/// largest object it will download or upload (bytes).
	///
	/// # Errors
	/// [`StorageError::Config`] if the TLS backend cannot be initialised.
	pub fn new(
		retry: RetryPolicy,
		attempt_timeout: Duration,
		max_object_size: u64,
	) -> Result<Self> {
		let http = reqwest::Client::builder()
			.timeout(attempt_timeout)
			.connect_timeout(attempt_timeout.min(Duration::from_secs(10)))
			.build()
			.map_err(|e| StorageError::Config(format!("building the HTTP client: {e}")))?;
		Ok(Self { http, retry, attempt_timeout, max_object_size })
	}

	/// Settings taken from a [`crate::StoreConfig`] (retry policy, attempt timeout, size limit).
	///
	/// # Errors
	/// As [`PresignedHttp::new`].
	pub fn from_config(config: &crate::StoreConfig) -> Result<Self> {
		Self::new(config.retry.clone(), config.attempt_timeout, config.max_object_size)
	}

	/// Uploads `data` through a presigned PUT and returns its hash (what the uploader reports to the
	/// orchestrator).
	///
	/// # Errors
	/// [`StorageError::Config`] if `req` is not a PUT; [`StorageError::TooLarge`] before sending if `data`
	/// exceeds the limit; [`StorageError::UrlExpired`]; [`StorageError::InvalidCredentials`] for an
	/// altered signature; [`StorageError::Unavailable`] / [`StorageError::Timeout`] /
	/// [`StorageError::Transport`] once retries are spent.
	pub async fn put(&self, req: &PresignedRequest, data: Bytes) -> Result<ContentHash> {
		let what = req.redacted_url().to_owned();
		if req.method != Method::Put {
			return Err(StorageError::Config(format!(
				"{what}: expected a presigned PUT, got {:?}",
				req.method
			)));
		}
		if data.len() as u64 > self.max_object_size {
			return Err(StorageError::TooLarge {
				key: what,
				size: data.len() as u64,
				limit: self.max_object_size,
			});
		}
		let hash = ContentHash::of(&data);
		self.with_retries(&what, || async {
			let mut rb = self.http.put(&req.url).body(data.clone());
			for (k, v) in &req.headers {
				rb = rb.header(k, v);
			}
			let resp = rb.send().await.map_err(|e| self.transport(&what, e))?;
			let status = resp.status();
			if !status.is_success() {
				return Err(self.error_response(&what, resp).await);
			}
			Ok(())
		})
		.await?;
		Ok(hash)
	}

	/// Downloads through a presigned GET and checks the bytes against `expected`.
	///
	/// # Errors
	/// [`StorageError::Config`] if `req` is not a GET; [`StorageError::NotFound`];
	/// [`StorageError::UrlExpired`]; [`StorageError::InvalidCredentials`] for an altered signature;
	/// [`StorageError::TooLarge`] if the announced or received size exceeds the limit;
	/// [`StorageError::Truncated`] if the body ended before its `Content-Length`;
	/// [`StorageError::HashMismatch`]; retryable errors once retries are spent.
	pub async fn get(&self, req: &PresignedRequest, expected: &ContentHash) -> Result<Bytes> {
		let what = req.redacted_url().to_owned();
		if req.method != Method::Get {
			return Err(StorageError::Config(format!(
				"{what}: expected a presigned GET, got {:?}",
				req.method
			)));
		}
		let data = self
			.with_retries(&what, || async {
				let mut rb = self.http.get(&req.url);
				for (k, v) in &req.headers {
					rb = rb.header(k, v);
				}
				let resp = rb.send().await.map_err(|e| self.transport(&what, e))?;
				if !resp.status().is_success() {
					return Err(self.error_response(&what, resp).await);
				}
				self.read_body(&what, resp).await
			})
			.await?;
		verify(&what, data, expected)
	}

	async fn read_body(&self, what: &str, resp: reqwest::Response) -> Result<Bytes> {
		let announced = resp.content_length();
		let limit = self.max_object_size;
		if let Some(n) = announced {
			if n > limit {
				return Err(StorageError::TooLarge { key: what.into(), size: n, limit });
			}
		}
		let mut buf = BytesMut::with_capacity(announced.unwrap_or(0) as usize);
		let mut body = resp.bytes_stream();
		while let Some(chunk) = body.next().await {
			match chunk {
				Ok(c) => {
					buf.extend_from_slice(&c);
					if buf.len() as u64 > limit {
						return Err(StorageError::TooLarge {
							key: what.into(),
							size: buf.len() as u64,
							limit,
						});
					}
				},
				Err(e) if e.is_timeout() => {
					return Err(StorageError::Timeout {
						key: what.into(),
						after: self.attempt_timeout,
					})
				},
				Err(e) => {
					let received = buf.len() as u64;
					return Err(match announced {
						Some(expected) if received < expected => {
							StorageError::Truncated { key: what.into(), expected, received }
						},
						_ => self.transport(what, e),
					});
				},
			}
		}
		match announced {
			Some(expected) if (buf.len() as u64) < expected => Err(StorageError::Truncated {
				key: what.into(),
				expected,
				received: buf.len() as u64,
			}),
			_ => Ok(buf.freeze()),
		}
	}

	fn transport(&self, what: &str, e: reqwest::Error) -> StorageError {
		if e.is_timeout() {
			StorageError::Timeout { key: what.into(), after: self.attempt_timeout }
		} else {
			let mut message = e.to_string();
			let mut src = std::error::Error::source(&e);
			while let Some(s) = src {
				message.push_str(": ");
				message.push_str(&s.to_string());
				src = s.source();
			}
			StorageError::Transport { key: what.into(), message }
		}
	}

	/// Reads an S3 XML error body (`<Code>`, `<Message>`) and classifies it.
	async fn error_response(&self, what: &str, resp: reqwest::Response) -> StorageError {
		let status = resp.status().as_u16();
		let body = resp.text().await.unwrap_or_default();
		let code = xml_field(&body, "Code");
		let message = xml_field(&body, "Message");
		classify(what, status, code.as_deref(), message.as_deref())
	}

	async fn with_retries<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T>
	where
		F: FnMut() -> Fut,
		Fut: std::future::Future<Output = Result<T>>,
	{
		match crate::config::retry(&self.retry, what, attempt, StorageError::is_retryable).await {
			(Err(StorageError::Unavailable { key, status, message, .. }), n) => {
				Err(StorageError::Unavailable { key, status, message, attempts: n })
			},
			(other, _) => other,
		}
	}
}

/// The text of the first `<name>...</name>` element, unescaped for the five XML entities.
fn xml_field(body: &str, name: &str) -> Option<String> {
	let open = format!("<{name}>");
	let close = format!("</{name}>");
	let start = body.find(&open)? + open.len();
	let end = start + body[start..].find(&close)?;
	let raw = &body[start..end];
	Some(
		raw.replace("&lt;", "<")
			.replace("&gt;", ">")
			.replace("&quot;", "\"")
			.replace("&apos;", "'")
			.replace("&amp;", "&"),
	)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn reads_s3_error_xml() {
		let body = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>";
		assert_eq!(xml_field(body, "Code").as_deref(), Some("AccessDenied"));
		assert_eq!(xml_field(body, "Message").as_deref(), Some("Request has expired"));
		assert_eq!(xml_field(body, "Resource"), None);
		assert_eq!(xml_field("<Message>a &amp; b</Message>", "Message").as_deref(), Some("a & b"));
	}

	#[test]
	fn redacted_url_has_no_signature() {
		let r = PresignedRequest {
			method: Method::Get,
			url: "http://h/b/k?X-Amz-Signature=abc".into(),
			headers: vec![],
			expires_at: 0,
		};
		assert_eq!(r.redacted_url(), "http://h/b/k");
	}
}
