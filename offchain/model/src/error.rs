//! The crate's error type: every bad input becomes a typed variant naming what
//! was expected and what came; nothing in this crate panics on input.

use std::path::PathBuf;

/// Errors of `iota-model`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
	/// The model configuration is inconsistent (for example cuts that do not cover the blocks).
	#[error("invalid model config: {0}")]
	Config(String),
	/// A tensor had the wrong shape.
	#[error("{what}: expected shape {expected}, got {got:?}")]
	Shape {
		/// Which tensor.
		what: String,
		/// The expected shape, `?` for a free dimension.
		expected: String,
		/// The shape that came.
		got: Vec<usize>,
	},
	/// A tensor had the wrong element type.
	#[error("{what}: expected dtype {expected}, got {got}")]
	DType {
		/// Which tensor.
		what: String,
		/// Expected dtype name.
		expected: String,
		/// Dtype that came.
		got: String,
	},
	/// A flat vector or list had the wrong length.
	#[error("{what}: expected length {expected}, got {got}")]
	Length {
		/// Which vector.
		what: String,
		/// Expected length.
		expected: usize,
		/// Length that came.
		got: usize,
	},
	/// A tensor contained NaN or ±Inf.
	#[error("{what}: non-finite value (NaN or Inf) at flat index {index}")]
	NonFinite {
		/// Which tensor.
		what: String,
		/// Flat index of the first offending element.
		index: usize,
	},
	/// A token id was not below the vocabulary size.
	#[error("token id {id} at flat index {index} is out of range for vocab size {vocab}")]
	TokenOutOfRange {
		/// The offending id.
		id: u32,
		/// Its flat index in the batch.
		index: usize,
		/// The vocabulary size.
		vocab: usize,
	},
	/// An operation was called on a stage that does not support it.
	#[error("stage {stage}: {op} needs a {needs} stage")]
	WrongStage {
		/// Stage index.
		stage: usize,
		/// Operation attempted.
		op: &'static str,
		/// The kind of stage the operation needs.
		needs: &'static str,
	},
	/// A kept forward was handed to the backward of a different stage.
	#[error("stage {stage}: backward got the forward state of stage {got}")]
	ForeignForward {
		/// This stage.
		stage: usize,
		/// The stage that made the forward.
		got: usize,
	},
	/// An optimizer step was requested with no accumulated gradient.
	#[error("stage {stage}: no gradient accumulated (call backward first)")]
	NoGradient {
		/// Stage index.
		stage: usize,
	},
	/// A wire message is not an iota-wire message or is malformed.
	#[error("wire message: {0}")]
	Wire(String),
	/// A wire message ended early or could not be parsed as safetensors.
	#[error("wire message truncated or malformed safetensors ({len} bytes): {reason}")]
	WireTruncated {
		/// Length of the received buffer.
		len: usize,
		/// What the parser said.
		reason: String,
	},
	/// A wire message was larger than the receiver allows.
	#[error("wire message of {len} bytes exceeds the limit of {limit} bytes")]
	WireTooLarge {
		/// Length received.
		len: usize,
		/// Limit.
		limit: usize,
	},
	/// A Hugging Face folder ([`crate::hf`]) holds what this model cannot take, or lacks what it needs.
	#[error("Hugging Face folder {}: {reason}", dir.display())]
	HfFolder {
		/// The folder.
		dir: PathBuf,
		/// What is wrong, naming the file, field or tensor.
		reason: String,
	},
	/// A checkpoint did not match the stage it was loaded into.
	#[error("checkpoint: {0}")]
	Checkpoint(String),
	/// A checkpoint's state (weights, AdamW moments, step) does not hash to the attested state hash.
	#[error("checkpoint state hash {got} is not the attested {expected}")]
	StateHashMismatch {
		/// The attested hash (hex).
		expected: String,
		/// The hash of the checkpoint's state (hex).
		got: String,
	},
	/// The corpus is not where it was expected.
	#[error("corpus not found at {path}: run scripts/fetch-data.sh to download it")]
	CorpusMissing {
		/// Where it was looked for.
		path: PathBuf,
	},
	/// Data could not be used (empty corpus, too few tokens for one row, ...).
	#[error("data: {0}")]
	Data(String),
	/// The tokenizer failed to train, load, save or encode.
	#[error("tokenizer: {0}")]
	Tokenizer(String),
	/// A candle tensor operation failed.
	#[error("tensor op: {0}")]
	Candle(#[from] candle_core::Error),
	/// File I/O failed.
	#[error("io: {0}")]
	Io(#[from] std::io::Error),
	/// JSON (config) could not be parsed.
	#[error("json: {0}")]
	Json(#[from] serde_json::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl From<iota_protocol::model::ModelError> for Error {
	fn from(e: iota_protocol::model::ModelError) -> Self {
		match e {
			iota_protocol::model::ModelError::Config(m) => Error::Config(m),
			iota_protocol::model::ModelError::Json(j) => Error::Json(j),
		}
	}
}

impl From<iota_protocol::optim::OptimError> for Error {
	fn from(e: iota_protocol::optim::OptimError) -> Self {
		match e {
			iota_protocol::optim::OptimError::Length { what, expected, got } => {
				Error::Length { what, expected, got }
			},
			iota_protocol::optim::OptimError::NonFinite { what, index } => {
				Error::NonFinite { what, index }
			},
		}
	}
}

impl From<iota_protocol::encoding::UnknownEncoding> for Error {
	fn from(e: iota_protocol::encoding::UnknownEncoding) -> Self {
		Error::Wire(e.to_string())
	}
}

impl Error {
	pub(crate) fn shape(
		what: impl Into<String>,
		expected: impl Into<String>,
		got: &[usize],
	) -> Self {
		Error::Shape { what: what.into(), expected: expected.into(), got: got.to_vec() }
	}
	pub(crate) fn dtype(
		what: impl Into<String>,
		expected: candle_core::DType,
		got: candle_core::DType,
	) -> Self {
		Error::DType {
			what: what.into(),
			expected: expected.as_str().into(),
			got: got.as_str().into(),
		}
	}
}
