//! Model configuration: the protocol core's ([`iota_protocol::model`]), so the RPC contract and the run
//! spec use it without the candle stack.

pub use iota_protocol::model::{ModelConfig, ModelError, PRESETS};
