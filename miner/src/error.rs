//! The miner's error type: one variant per kind of failure the loop reacts to differently (retry the
//! call, skip the work item, resynchronise the stage, stop).

use iota_rpc::ErrorCode;
use iota_storage::StorageError;

use crate::merge::MergeError;

/// What went wrong in one step of the miner.
#[derive(Debug, thiserror::Error)]
pub enum MinerError {
	/// The orchestrator refused a call with one of its error codes.
	#[error("orchestrator refused {method}: {code:?}: {message}")]
	Refused {
		/// The JSON-RPC method.
		method: &'static str,
		/// The orchestrator's code.
		code: ErrorCode,
		/// Its message.
		message: String,
	},
	/// The orchestrator could not be reached or answered something that is not the API (after retries).
	#[error("orchestrator {method}: {message}")]
	Rpc {
		/// The JSON-RPC method.
		method: &'static str,
		/// The transport or decoding error.
		message: String,
	},
	/// An object transfer failed (after the storage client's retries), or its bytes failed their hash.
	#[error("object {what}: {source}")]
	Storage {
		/// Which object (input activation, gradient, data shard, reduced shard, checkpoint, ...).
		what: &'static str,
		/// The storage error.
		#[source]
		source: StorageError,
	},
	/// A work item or merge view from the orchestrator is unusable (wrong stage, epoch, shape, size,
	/// hash, data location, ...): the item is skipped.
	#[error("bad input: {0}")]
	BadInput(String),
	/// A tensor read from the network failed its checks, or the model refused it.
	#[error("model: {0}")]
	Model(#[from] iota_model::Error),
	/// Merge input was refused (hash, length, tiling, NaN/Inf).
	#[error("merge: {0}")]
	Merge(#[from] MergeError),
	/// The lease ran out before the result was ready; the result was dropped, not submitted.
	#[error("lease {lease} expired {late_ms} ms ago; result dropped")]
	LeaseExpired {
		/// The lease.
		lease: u64,
		/// How late the result was, in ms.
		late_ms: u64,
	},
	/// The chain could not be read.
	#[error("chain: {0}")]
	Chain(String),
	/// The run spec could not be used.
	#[error("run spec: {0}")]
	Spec(#[from] iota_rpc::SpecError),
}

impl From<candle_core::Error> for MinerError {
	fn from(e: candle_core::Error) -> Self {
		MinerError::Model(iota_model::Error::Candle(e))
	}
}

impl MinerError {
	/// A short, stable label for the `iota_miner_errors_total{kind}` metric.
	pub fn kind(&self) -> &'static str {
		match self {
			MinerError::Refused { code, .. } => code.name(),
			MinerError::Rpc { .. } => "rpc",
			MinerError::Storage { source, .. } => match source {
				StorageError::HashMismatch { .. } => "hash_mismatch",
				StorageError::UrlExpired { .. } => "url_expired",
				StorageError::NotFound { .. } => "not_found",
				_ => "storage",
			},
			MinerError::BadInput(_) => "bad_input",
			MinerError::Model(_) => "bad_tensor",
			MinerError::Merge(_) => "merge",
			MinerError::LeaseExpired { .. } => "lease_expired",
			MinerError::Chain(_) => "chain",
			MinerError::Spec(_) => "spec",
		}
	}

	/// The orchestrator's code, when it refused.
	pub fn code(&self) -> Option<ErrorCode> {
		match self {
			MinerError::Refused { code, .. } => Some(*code),
			_ => None,
		}
	}

	/// Map a jsonrpsee client error of `method`.
	pub fn rpc(method: &'static str, e: jsonrpsee::core::ClientError) -> Self {
		match (&e, iota_rpc::code_of(&e)) {
			(jsonrpsee::core::ClientError::Call(obj), Some(code)) => {
				MinerError::Refused { method, code, message: obj.message().to_string() }
			},
			_ => MinerError::Rpc { method, message: e.to_string() },
		}
	}

	/// Wrap a storage error about `what`.
	pub fn storage(what: &'static str, source: StorageError) -> Self {
		MinerError::Storage { what, source }
	}
}

/// Result alias of the miner library.
pub type Result<T, E = MinerError> = std::result::Result<T, E>;
