//! One subxt RPC client over several chain nodes (issue 18): every call goes to the node in use; when
//! its connection is lost, or a call fails in transport, the next endpoint in the list (wrapping
//! around) is connected and the call is tried there, as many times as there are endpoints.
//!
//! subxt's own clients either reconnect to one URL (`reconnecting-rpc-client`) or spread calls over
//! several (`RoundRobinRpcClient`, which fails with the first dead node); neither moves to another node
//! when one dies.
//!
//! - A node that stops answering without closing its connection is found by WebSocket pings (every
//!   [`PING_INTERVAL`], given up after [`INACTIVE_LIMIT`] of silence) or by jsonrpsee's 60 s request
//!   timeout; a connection attempt (TCP and the WebSocket handshake) is given [`CONNECT_TIMEOUT`].
//! - Submitting an extrinsic is never tried again on another node ([`replayable`]): whether a submission
//!   whose connection broke reached its node is unknown, so the transport error is returned (and the next
//!   call moves on); the caller must read the chain before signing it again (`IotaClient::submit_pooled`
//!   does not re-sign after a transport error).
//! - A subscription ends with its connection (the stream closes); callers subscribe again, as the
//!   daemons do on their next tick.
//! - Connecting happens under the client's lock, so while the nodes are being tried (at most
//!   [`CONNECT_TIMEOUT`] each) other calls wait.

use std::sync::Arc;
use std::time::Duration;

use jsonrpsee::core::client::Client as JsonrpseeRpcClient;
use jsonrpsee::ws_client::{PingConfig, WsClientBuilder};
use subxt::backend::rpc::{RawRpcFuture, RawRpcSubscription, RawValue, RpcClientT};
use subxt::ext::subxt_rpcs::Error as RpcError;
use tokio::sync::Mutex;

/// Most time one connection attempt (TCP connect and WebSocket handshake) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Interval of the WebSocket pings that tell a silent node from a quiet one.
pub const PING_INTERVAL: Duration = Duration::from_secs(10);
/// Silence after which a connection counts as lost.
pub const INACTIVE_LIMIT: Duration = Duration::from_secs(30);

/// Whether a call of `method` may be sent again to another node after a transport failure: everything
/// but extrinsic submission (`author_submit*`), whose effect may already have happened.
pub fn replayable(method: &str) -> bool {
	!method.starts_with("author_submit")
}

/// A WebSocket JSON-RPC client of `url` with subxt's subscription buffer and pings on, within
/// [`CONNECT_TIMEOUT`].
async fn connect_one(url: &str) -> Result<JsonrpseeRpcClient, String> {
	let builder = WsClientBuilder::default()
		.connection_timeout(CONNECT_TIMEOUT)
		.max_buffer_capacity_per_subscription(4096)
		.enable_ws_ping(
			PingConfig::new().ping_interval(PING_INTERVAL).inactive_limit(INACTIVE_LIMIT),
		);
	match tokio::time::timeout(CONNECT_TIMEOUT, builder.build(url)).await {
		Ok(Ok(c)) => Ok(c),
		Ok(Err(e)) => Err(e.to_string()),
		Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
	}
}

/// The endpoints and the live connection, if any.
struct State {
	/// Index into the endpoint list of the node in use (or to try next).
	index: usize,
	/// The connection to `urls[index]`, once made.
	client: Option<Arc<JsonrpseeRpcClient>>,
}

impl State {
	/// Drop the connection in use and point at the next endpoint of `urls`.
	fn move_on(&mut self, urls: &[String]) {
		tracing::warn!(url = %urls[self.index], "chain node connection lost; moving to the next endpoint");
		self.client = None;
		self.index = (self.index + 1) % urls.len();
	}
}

/// An [`RpcClientT`] over several node WebSocket URLs, failing over in list order.
#[derive(Clone)]
pub struct FailoverRpc {
	urls: Arc<Vec<String>>,
	state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FailoverRpc {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		f.debug_struct("FailoverRpc").field("urls", &self.urls).finish()
	}
}

impl FailoverRpc {
	/// A client over `urls` (tried in order), connected to the first that answers.
	///
	/// # Errors
	/// [`RpcError::Client`] when `urls` is empty or no endpoint answers (with the last one's error).
	pub async fn connect(urls: Vec<String>) -> Result<Self, RpcError> {
		if urls.is_empty() {
			return Err(RpcError::Client("no chain RPC endpoint given".into()));
		}
		let rpc = FailoverRpc {
			urls: Arc::new(urls),
			state: Arc::new(Mutex::new(State { index: 0, client: None })),
		};
		rpc.live(None).await?;
		Ok(rpc)
	}

	/// The endpoints, in failover order.
	pub fn urls(&self) -> &[String] {
		&self.urls
	}

	/// The endpoint in use (or to be tried next).
	pub async fn current(&self) -> String {
		let st = self.state.lock().await;
		self.urls[st.index].clone()
	}

	/// A live connection: the one in use if it is connected and is not `failed`, else the next endpoint
	/// that answers, trying each at most once. `failed` is a connection a call just failed on: it is
	/// dropped (unless another call has replaced it already) and the search starts after it.
	async fn live(
		&self,
		failed: Option<&Arc<JsonrpseeRpcClient>>,
	) -> Result<Arc<JsonrpseeRpcClient>, RpcError> {
		let mut st = self.state.lock().await;
		let stale = match (&st.client, failed) {
			(Some(c), Some(f)) => Arc::ptr_eq(c, f) || !c.is_connected(),
			(Some(c), None) => !c.is_connected(),
			(None, _) => false,
		};
		if stale {
			st.move_on(&self.urls);
		}
		if let Some(c) = &st.client {
			return Ok(c.clone());
		}
		let mut last = None;
		for _ in 0..self.urls.len() {
			let url = &self.urls[st.index];
			match connect_one(url).await {
				Ok(c) => {
					tracing::info!(url = %url, "connected to chain node");
					let c = Arc::new(c);
					st.client = Some(c.clone());
					return Ok(c);
				},
				Err(e) => {
					tracing::warn!(url = %url, error = %e, "chain node does not answer");
					last = Some(e);
					st.index = (st.index + 1) % self.urls.len();
				},
			}
		}
		Err(RpcError::Client(
			format!(
				"no chain node answers ({}): {}",
				self.urls.join(", "),
				last.map(|e| e.to_string()).unwrap_or_default()
			)
			.into(),
		))
	}
}

impl FailoverRpc {
	/// Drop `failed` as the connection in use (unless a call has replaced it already), so the next call
	/// connects the next endpoint.
	async fn forget(&self, failed: &Arc<JsonrpseeRpcClient>) {
		let mut st = self.state.lock().await;
		if st.client.as_ref().is_some_and(|c| Arc::ptr_eq(c, failed)) {
			st.move_on(&self.urls);
		}
	}

	/// `call` on the live connection; after a transport failure, on the next endpoint, up to once per
	/// endpoint, except for a call of a method that is not [`replayable`], whose error is returned (the
	/// failed connection dropped for the next call).
	async fn with_failover<T, F, Fut>(&self, method: &str, call: F) -> Result<T, RpcError>
	where
		F: Fn(Arc<JsonrpseeRpcClient>) -> Fut,
		Fut: std::future::Future<Output = Result<T, RpcError>>,
	{
		let mut client = self.live(None).await?;
		let mut tries = 1;
		loop {
			match call(client.clone()).await {
				Err(e) if is_transport(&e) && !replayable(method) => {
					self.forget(&client).await;
					return Err(e);
				},
				Err(e) if is_transport(&e) && tries < self.urls.len() => {
					tracing::warn!(method, error = %e, "chain call failed in transport");
					client = self.live(Some(&client)).await?;
					tries += 1;
				},
				other => return other,
			}
		}
	}
}

/// Whether `e` says the connection failed (rather than the node refusing the call).
fn is_transport(e: &RpcError) -> bool {
	matches!(e, RpcError::Client(_) | RpcError::DisconnectedWillReconnect(_))
}

impl RpcClientT for FailoverRpc {
	fn request_raw<'a>(
		&'a self,
		method: &'a str,
		params: Option<Box<RawValue>>,
	) -> RawRpcFuture<'a, Box<RawValue>> {
		Box::pin(self.with_failover(method, move |c| {
			let params = params.clone();
			async move { c.request_raw(method, params).await }
		}))
	}

	fn subscribe_raw<'a>(
		&'a self,
		sub: &'a str,
		params: Option<Box<RawValue>>,
		unsub: &'a str,
	) -> RawRpcFuture<'a, RawRpcSubscription> {
		Box::pin(self.with_failover(sub, move |c| {
			let params = params.clone();
			async move { c.subscribe_raw(sub, params, unsub).await }
		}))
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use jsonrpsee::server::{RpcModule, Server, ServerHandle};
	use subxt::backend::rpc::RpcClient;
	use subxt::ext::subxt_rpcs::rpc_params;

	/// A WebSocket JSON-RPC server on 127.0.0.1 answering `system_name` with `name`.
	async fn node(name: &'static str) -> (String, ServerHandle) {
		let server = Server::builder().build("127.0.0.1:0").await.unwrap();
		let addr = server.local_addr().unwrap();
		let mut module = RpcModule::new(());
		module.register_method("system_name", move |_, _, _| name).unwrap();
		(format!("ws://{addr}"), server.start(module))
	}

	async fn name(rpc: &RpcClient) -> Result<String, RpcError> {
		rpc.request::<String>("system_name", rpc_params![]).await
	}

	#[tokio::test]
	async fn calls_move_to_the_next_node_when_one_dies_and_come_back_around() {
		let (a, stop_a) = node("a").await;
		let (b, stop_b) = node("b").await;
		let fo = FailoverRpc::connect(vec![a.clone(), b.clone()]).await.unwrap();
		let rpc = RpcClient::new(fo.clone());
		assert_eq!(name(&rpc).await.unwrap(), "a");
		stop_a.stop().unwrap();
		stop_a.stopped().await;
		assert_eq!(name(&rpc).await.unwrap(), "b");
		assert_eq!(fo.current().await, b);
		assert_eq!(name(&rpc).await.unwrap(), "b");
		// A node back at a's address is found again once b dies.
		let port = a.rsplit(':').next().unwrap().to_string();
		let server = Server::builder().build(format!("127.0.0.1:{port}")).await.unwrap();
		let mut module = RpcModule::new(());
		module.register_method("system_name", |_, _, _| "a again").unwrap();
		let _again = server.start(module);
		stop_b.stop().unwrap();
		stop_b.stopped().await;
		assert_eq!(name(&rpc).await.unwrap(), "a again");
	}

	#[tokio::test]
	async fn a_dead_first_endpoint_is_skipped_and_no_live_node_is_a_typed_error() {
		let (b, stop_b) = node("b").await;
		// A port just freed: nothing listens there.
		let dead = {
			let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
			format!("ws://{}", l.local_addr().unwrap())
		};
		let fo = FailoverRpc::connect(vec![dead.clone(), b.clone()]).await.unwrap();
		assert_eq!(fo.current().await, b);
		let rpc = RpcClient::new(fo);
		assert_eq!(name(&rpc).await.unwrap(), "b");
		stop_b.stop().unwrap();
		stop_b.stopped().await;
		let err = name(&rpc).await.unwrap_err();
		assert!(is_transport(&err), "{err}");
		assert!(err.to_string().contains("no chain node answers"), "{err}");
		assert!(FailoverRpc::connect(vec![]).await.is_err());
		assert!(FailoverRpc::connect(vec![dead]).await.is_err());
	}

	#[tokio::test]
	async fn a_node_that_accepts_and_never_answers_is_given_up_after_the_connect_timeout() {
		// Accepts TCP connections and never completes the WebSocket handshake (a frozen node).
		let frozen = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
		let frozen_url = format!("ws://{}", frozen.local_addr().unwrap());
		let held = tokio::spawn(async move {
			let mut kept = Vec::new();
			while let Ok((sock, _)) = frozen.accept().await {
				kept.push(sock);
			}
		});
		let (b, _stop_b) = node("b").await;
		let t0 = std::time::Instant::now();
		let fo = FailoverRpc::connect(vec![frozen_url, b.clone()]).await.unwrap();
		assert!(t0.elapsed() < CONNECT_TIMEOUT * 2, "{:?}", t0.elapsed());
		assert_eq!(fo.current().await, b);
		assert_eq!(name(&RpcClient::new(fo)).await.unwrap(), "b");
		held.abort();
	}

	#[test]
	fn only_extrinsic_submission_is_kept_to_its_node() {
		assert!(!replayable("author_submitExtrinsic"));
		assert!(!replayable("author_submitAndWatchExtrinsic"));
		for m in [
			"system_accountNextIndex",
			"state_getStorage",
			"chain_subscribeNewHeads",
			"system_name",
		] {
			assert!(replayable(m), "{m}");
		}
	}

	#[tokio::test]
	async fn a_refused_call_is_not_retried_elsewhere() {
		let (a, _stop_a) = node("a").await;
		let (b, _stop_b) = node("b").await;
		let fo = FailoverRpc::connect(vec![a.clone(), b]).await.unwrap();
		let rpc = RpcClient::new(fo.clone());
		let err = rpc.request::<String>("no_such_method", rpc_params![]).await.unwrap_err();
		assert!(!is_transport(&err), "{err}");
		assert_eq!(fo.current().await, a);
	}
}
