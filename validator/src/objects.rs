//! Where the validator reads objects from: the [`Objects`] trait (by key, checked against the BLAKE3 the
//! caller expects) and its production implementation over the orchestrator's presigned GETs
//! ([`OrchestratorObjects`]: `iota_presignGet` then [`iota_storage::PresignedHttp::get`], docs/design.md §7,
//! docs/design.md §7). Tests use [`MemoryObjects`].
//!
//! The three outcomes that matter for fairness are kept apart: an object that is **not there**
//! ([`FetchError::NotFound`], S3 404: counts against the miner that had to write it), one whose bytes do
//! **not hash** to what the pathway log or chain says ([`FetchError::HashMismatch`]: garbage, logged and
//! never a verdict), and a store or orchestrator that **cannot be reached** ([`FetchError::Unavailable`]:
//! logged and never a verdict).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use iota_primitives::ContentHash;
use iota_rpc::SignedClient;
use iota_storage::{PresignedHttp, StorageError};

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
	/// The object does not exist.
	#[error("object {key} not found")]
	NotFound {
		/// Key.
		key: String,
	},
	/// The bytes do not hash to the expected value.
	#[error("object {key} does not hash to {expected}")]
	HashMismatch {
		/// Key.
		key: String,
		/// The hash asked for.
		expected: ContentHash,
	},
	/// The orchestrator or the object store did not answer usefully (transport, timeout, expired or
	/// refused URL, server error, oversize).
	#[error("cannot read {key}: {reason}")]
	Unavailable {
		/// Key.
		key: String,
		/// What failed.
		reason: String,
	},
}

/// Read access to the run's objects, every read checked against its expected BLAKE3.
#[async_trait]
pub trait Objects: Send + Sync {
	/// The bytes of `key`, which must hash to `hash`.
	///
	/// # Errors
	/// [`FetchError`].
	async fn get(&self, key: &str, hash: &ContentHash) -> Result<Bytes, FetchError>;
}

/// In-memory objects (tests, and a cache): `get` checks the hash like the real store.
#[derive(Default)]
pub struct MemoryObjects {
	map: Mutex<HashMap<String, Bytes>>,
	/// When set, every read fails with [`FetchError::Unavailable`] (an unreachable store).
	pub unreachable: std::sync::atomic::AtomicBool,
}

impl MemoryObjects {
	/// Stores `bytes` under `key`; returns their hash.
	pub fn put(&self, key: &str, bytes: Vec<u8>) -> ContentHash {
		let h = ContentHash::of(&bytes);
		if let Ok(mut m) = self.map.lock() {
			m.insert(key.to_string(), Bytes::from(bytes));
		}
		h
	}

	/// Removes `key`.
	pub fn remove(&self, key: &str) {
		if let Ok(mut m) = self.map.lock() {
			m.remove(key);
		}
	}
}

#[async_trait]
impl Objects for MemoryObjects {
	async fn get(&self, key: &str, hash: &ContentHash) -> Result<Bytes, FetchError> {
		if self.unreachable.load(std::sync::atomic::Ordering::Relaxed) {
			return Err(FetchError::Unavailable {
				key: key.into(),
				reason: "store unreachable".into(),
			});
		}
		let bytes = self
			.map
			.lock()
			.map_err(|_| FetchError::Unavailable {
				key: key.into(),
				reason: "lock poisoned".into(),
			})?
			.get(key)
			.cloned()
			.ok_or_else(|| FetchError::NotFound { key: key.into() })?;
		if &ContentHash::of(&bytes) != hash {
			return Err(FetchError::HashMismatch { key: key.into(), expected: *hash });
		}
		Ok(bytes)
	}
}

/// Objects through the orchestrator: a presigned GET per key (`iota_presignGet`), performed with
/// [`PresignedHttp`] (retries, size limit, BLAKE3 check).
pub struct OrchestratorObjects<'a> {
	/// The signed orchestrator connection (the validator's key).
	pub rpc: &'a SignedClient,
	/// The HTTP client for presigned requests.
	pub http: &'a PresignedHttp,
}

/// Maps a storage error to a [`FetchError`] (only a 404 is "not found", only a BLAKE3 mismatch is
/// "garbage"; everything else is "unavailable").
pub fn classify(key: &str, err: StorageError) -> FetchError {
	match err {
		StorageError::NotFound { .. } => FetchError::NotFound { key: key.into() },
		StorageError::HashMismatch { expected, .. } => {
			FetchError::HashMismatch { key: key.into(), expected }
		},
		other => FetchError::Unavailable { key: key.into(), reason: other.to_string() },
	}
}

#[async_trait]
impl Objects for OrchestratorObjects<'_> {
	async fn get(&self, key: &str, hash: &ContentHash) -> Result<Bytes, FetchError> {
		let reqs = self.rpc.presign_get(vec![key.to_string()]).await.map_err(|e| {
			FetchError::Unavailable { key: key.into(), reason: format!("iota_presignGet: {e}") }
		})?;
		let req = reqs.first().ok_or_else(|| FetchError::Unavailable {
			key: key.into(),
			reason: "iota_presignGet returned no URL".into(),
		})?;
		self.http.get(req, hash).await.map_err(|e| classify(key, e))
	}
}

/// Objects read recently, by content hash, within a byte budget (least recently used out first). Only
/// bytes that hashed to what was asked are kept, so a hit needs no second check; the key is not part of
/// the lookup (equal hashes are equal bytes). In local mode one revealed inner state (`12·P + 8`
/// bytes, 38 MB for the small preset's stages) is read by several checks of an epoch: the step replays
/// of adjacent challenged steps, the earlier states of stale passes and the spot-checks at revealed
/// states; without the cache each read was another download and BLAKE3 pass.
#[derive(Debug)]
pub struct ObjectCache {
	max_bytes: u64,
	inner: Mutex<(u64, VecDeque<(ContentHash, Bytes)>)>,
}

impl ObjectCache {
	/// A cache of at most `max_bytes` (0: nothing is kept; an object larger than the budget is never
	/// kept).
	pub fn new(max_bytes: u64) -> Self {
		ObjectCache { max_bytes, inner: Mutex::new((0, VecDeque::new())) }
	}

	/// The bytes of `hash`, if kept (then they become the most recently used).
	pub fn get(&self, hash: &ContentHash) -> Option<Bytes> {
		let mut g = self.inner.lock().ok()?;
		let i = g.1.iter().position(|(h, _)| h == hash)?;
		let e = g.1.remove(i)?;
		let b = e.1.clone();
		g.1.push_back(e);
		Some(b)
	}

	/// Keep `bytes`, which hash to `hash`, dropping the least recently used to stay in the budget.
	pub fn put(&self, hash: ContentHash, bytes: Bytes) {
		let len = bytes.len() as u64;
		if len > self.max_bytes {
			return;
		}
		let Ok(mut g) = self.inner.lock() else { return };
		if g.1.iter().any(|(h, _)| *h == hash) {
			return;
		}
		while g.0 + len > self.max_bytes {
			match g.1.pop_front() {
				Some((_, b)) => g.0 -= b.len() as u64,
				None => break,
			}
		}
		g.0 += len;
		g.1.push_back((hash, bytes));
	}

	/// Bytes kept.
	pub fn bytes(&self) -> u64 {
		self.inner.lock().map_or(0, |g| g.0)
	}
}

/// [`Objects`] read through an [`ObjectCache`].
pub struct CachedObjects<'a> {
	/// Where misses are read.
	pub inner: &'a dyn Objects,
	/// The cache.
	pub cache: &'a ObjectCache,
}

#[async_trait]
impl Objects for CachedObjects<'_> {
	async fn get(&self, key: &str, hash: &ContentHash) -> Result<Bytes, FetchError> {
		if let Some(b) = self.cache.get(hash) {
			return Ok(b);
		}
		let b = self.inner.get(key, hash).await?;
		self.cache.put(*hash, b.clone());
		Ok(b)
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[tokio::test]
	async fn the_cache_serves_checked_bytes_within_its_budget() {
		let m = MemoryObjects::default();
		let (a, b, c) = (vec![1u8; 40], vec![2u8; 40], vec![3u8; 30]);
		let (ha, hb, hc) = (m.put("a", a.clone()), m.put("b", b.clone()), m.put("c", c.clone()));
		let cache = ObjectCache::new(100);
		let objects = CachedObjects { inner: &m, cache: &cache };
		assert_eq!(objects.get("a", &ha).await.unwrap(), a);
		assert_eq!(objects.get("b", &hb).await.unwrap(), b);
		assert_eq!(cache.bytes(), 80);
		// A hit needs no store (and a failed or garbage read is never kept).
		m.unreachable.store(true, std::sync::atomic::Ordering::Relaxed);
		assert_eq!(objects.get("a", &ha).await.unwrap(), a);
		assert!(matches!(objects.get("c", &hc).await, Err(FetchError::Unavailable { .. })));
		m.unreachable.store(false, std::sync::atomic::Ordering::Relaxed);
		assert!(matches!(objects.get("a", &hc).await, Err(FetchError::HashMismatch { .. })));
		assert_eq!(cache.bytes(), 80);
		// Over the budget the least recently used goes: `b` (`a` was read after it).
		assert_eq!(objects.get("c", &hc).await.unwrap(), c);
		assert_eq!(cache.bytes(), 70);
		assert!(cache.get(&hb).is_none() && cache.get(&ha).is_some() && cache.get(&hc).is_some());
		// An object larger than the budget passes through unkept.
		let big = m.put("big", vec![4u8; 101]);
		assert_eq!(objects.get("big", &big).await.unwrap().len(), 101);
		assert!(cache.get(&big).is_none());
		assert!(ObjectCache::new(0).get(&ha).is_none());
	}

	#[tokio::test]
	async fn memory_objects_check_hashes_and_tell_failures_apart() {
		let m = MemoryObjects::default();
		let h = m.put("a", b"xyz".to_vec());
		assert_eq!(m.get("a", &h).await.unwrap(), Bytes::from_static(b"xyz"));
		assert!(matches!(
			m.get("a", &ContentHash::of(b"other")).await,
			Err(FetchError::HashMismatch { .. })
		));
		assert!(matches!(m.get("b", &h).await, Err(FetchError::NotFound { .. })));
		m.unreachable.store(true, std::sync::atomic::Ordering::Relaxed);
		assert!(matches!(m.get("a", &h).await, Err(FetchError::Unavailable { .. })));
		assert!(matches!(
			classify("k", StorageError::NotFound { key: "k".into() }),
			FetchError::NotFound { .. }
		));
		assert!(matches!(
			classify("k", StorageError::Config("x".into())),
			FetchError::Unavailable { .. }
		));
	}
}
