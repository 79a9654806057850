//! AdamW and gradient clipping: the protocol core's ([`iota_protocol::optim`]), one pure function every
//! replica applies, so the run spec and the RPC contract carry the hyper-parameters without candle.

pub use iota_protocol::optim::{
	adamw_step, apply_step, clip_in_place, inner_state_hash, l2_norm, nesterov_step,
	pseudo_gradient, stage_clip_norm, state_hash, AdamState, AdamW, InnerState, OptimError,
	OuterSgd, OuterState, Training,
};
