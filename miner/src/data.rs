//! The head's and the tail's tokens (docs/design.md §3 step 2): the data shard named by a work item's
//! [`DataSlice`] is checked against the run spec (index, hash, and that the slice is where
//! `DataManifest::locate(sample)` says the sample lives), downloaded once through its presigned GET
//! (hash-checked), decoded (size, vocabulary) and cached in memory and, if a cache directory is set, on
//! disk under its BLAKE3 (re-checked when read back).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use iota_primitives::ContentHash;
use iota_rpc::types::DataSlice;
use iota_rpc::RunSpec;

use crate::error::{MinerError, Result};
use crate::transfer::ObjectIo;

/// Most decoded shards held in memory (a shard of the tiny run is a few hundred KiB).
pub const MEMORY_SHARDS: usize = 16;

/// Decoded data shards, by index.
#[derive(Debug, Default)]
pub struct DataCache {
	dir: Option<PathBuf>,
	shards: HashMap<u32, Arc<Vec<u32>>>,
	/// Bytes downloaded to fill the cache.
	pub downloaded: u64,
}

impl DataCache {
	/// A cache that also keeps shard files in `dir` (created if missing).
	pub fn new(dir: Option<PathBuf>) -> Self {
		if let Some(d) = &dir {
			if let Err(e) = std::fs::create_dir_all(d) {
				tracing::warn!(dir = %d.display(), error = %e, "cannot create the cache directory; caching in memory only");
				return DataCache { dir: None, ..Default::default() };
			}
		}
		DataCache { dir, ..Default::default() }
	}

	/// The tokens of `sample` as `(inputs, targets)`, each `[B, T]` u32 (rows of `T + 1` stored tokens:
	/// inputs `row[0..T]`, targets `row[1..T+1]`).
	///
	/// # Errors
	/// [`MinerError::BadInput`] when the slice is not the spec's (unknown shard, other hash, other place
	/// than `locate(sample)`); [`MinerError::Storage`] for a failed or hash-mismatched download;
	/// [`MinerError::Spec`] for a shard of the wrong size or with tokens outside the vocabulary.
	pub async fn sample(
		&mut self,
		spec: &RunSpec,
		io: &dyn ObjectIo,
		sample: u64,
		slice: &DataSlice,
		device: &Device,
	) -> Result<(Tensor, Tensor)> {
		let d = &spec.data;
		let listed = d.shards.get(slice.shard as usize).ok_or_else(|| {
			MinerError::BadInput(format!("data shard {} is not in the run spec", slice.shard))
		})?;
		if listed.hash != slice.object.hash {
			return Err(MinerError::BadInput(format!(
				"data shard {}: offered hash {}, the run spec lists {}",
				slice.shard, slice.object.hash, listed.hash
			)));
		}
		let loc = d
			.locate(sample)
			.ok_or_else(|| MinerError::BadInput("the run spec's data manifest is empty".into()))?;
		if (loc.shard, loc.row_offset, loc.rows) != (slice.shard, slice.row_offset, slice.rows) {
			return Err(MinerError::BadInput(format!(
				"sample {sample}: offered shard {} rows {}+{}, the spec places it at shard {} rows {}+{}",
				slice.shard, slice.row_offset, slice.rows, loc.shard, loc.row_offset, loc.rows
			)));
		}
		let tokens = self.shard(spec, io, slice).await?;
		let rows = d.sample_tokens(&tokens, loc).ok_or_else(|| {
			MinerError::BadInput(format!("sample {sample}: rows beyond its shard"))
		})?;
		let (b, t) = (loc.rows as usize, d.seq_len as usize);
		let (x, y) = iota_protocol::sample::inputs_and_targets(rows, t).ok_or_else(|| {
			MinerError::BadInput(format!(
				"sample {sample}: rows are not whole rows of T + 1 tokens"
			))
		})?;
		Ok((Tensor::from_vec(x, (b, t), device)?, Tensor::from_vec(y, (b, t), device)?))
	}

	async fn shard(
		&mut self,
		spec: &RunSpec,
		io: &dyn ObjectIo,
		slice: &DataSlice,
	) -> Result<Arc<Vec<u32>>> {
		if let Some(t) = self.shards.get(&slice.shard) {
			return Ok(t.clone());
		}
		let hash = slice.object.hash;
		let path = self.dir.as_ref().map(|d| d.join(format!("data-{hash}.bin")));
		let mut bytes = None;
		if let Some(p) = &path {
			if let Ok(b) = std::fs::read(p) {
				if ContentHash::of(&b) == hash {
					bytes = Some(b);
				} else {
					tracing::warn!(path = %p.display(), "cached data shard fails its hash; downloading again");
				}
			}
		}
		let bytes = match bytes {
			Some(b) => b,
			None => {
				let b = io
					.get(&slice.object.get, &hash)
					.await
					.map_err(|e| MinerError::storage("data shard", e))?
					.to_vec();
				self.downloaded += b.len() as u64;
				if let Some(p) = &path {
					if let Err(e) = std::fs::write(p, &b) {
						tracing::warn!(path = %p.display(), error = %e, "cannot write the data shard cache");
					}
				}
				b
			},
		};
		let tokens =
			Arc::new(spec.data.decode_shard(slice.shard, &bytes, spec.model.vocab_size)?);
		if self.shards.len() >= MEMORY_SHARDS {
			self.shards.clear();
		}
		self.shards.insert(slice.shard, tokens.clone());
		Ok(tokens)
	}
}
