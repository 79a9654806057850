//! The butterfly merge's arithmetic as the miner uses it: the protocol core's (`iota-protocol`), so a
//! reducer, the orchestrator and every validator compute a shard the same way. See
//! [`iota_protocol::merge`] for the reduction rule and [`iota_protocol::chunks`] for hashed chunks.

pub use iota_protocol::chunks::{
	chunk_count, chunk_hashes, chunk_hashes_with, chunk_span, chunk_span_with,
	gradient_chunk_elems, shard_len, submission_len,
};
pub use iota_protocol::codec::{ErrorFeedback, MergeCodec};
pub use iota_protocol::merge::{
	assemble_mean, decode_f32, reduce_shard, reduce_shard_bytes, reduce_shard_chunked, shard_bytes,
	submission_bytes, submission_with_feedback, MergeError, ShardInput, SpanInput,
};
