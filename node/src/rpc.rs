//! The node's extra RPC methods: account nonces (`system_accountNextIndex`) and fee queries.

use iota_runtime::{opaque::Block, AccountId, Balance, Nonce};
use jsonrpsee::RpcModule;
use polkadot_sdk::{
	pallet_transaction_payment_rpc,
	sc_transaction_pool_api::TransactionPool,
	sp_api::ProvideRuntimeApi,
	sp_block_builder::BlockBuilder,
	sp_blockchain::{Error as BlockChainError, HeaderBackend, HeaderMetadata},
	substrate_frame_rpc_system,
};
use std::sync::Arc;

/// What the RPC extensions need.
pub struct FullDeps<C, P> {
	/// The client.
	pub client: Arc<C>,
	/// The transaction pool.
	pub pool: Arc<P>,
}

/// The RPC module with the system and transaction-payment extensions.
pub fn create_full<C, P>(
	deps: FullDeps<C, P>,
) -> Result<RpcModule<()>, Box<dyn std::error::Error + Send + Sync>>
where
	C: ProvideRuntimeApi<Block>
		+ HeaderBackend<Block>
		+ HeaderMetadata<Block, Error = BlockChainError>
		+ Send
		+ Sync
		+ 'static,
	C::Api: substrate_frame_rpc_system::AccountNonceApi<Block, AccountId, Nonce>,
	C::Api: pallet_transaction_payment_rpc::TransactionPaymentRuntimeApi<Block, Balance>,
	C::Api: BlockBuilder<Block>,
	P: TransactionPool + 'static,
{
	use pallet_transaction_payment_rpc::{TransactionPayment, TransactionPaymentApiServer};
	use substrate_frame_rpc_system::{System, SystemApiServer};

	let mut module = RpcModule::new(());
	let FullDeps { client, pool } = deps;
	module.merge(System::new(client.clone(), pool).into_rpc())?;
	module.merge(TransactionPayment::new(client).into_rpc())?;
	Ok(module)
}
