//! The web channel's HTTP/1.1 server: hyper with a header-read timeout (so
//! half-open and idle connections are dropped), a cap on open connections,
//! and the per-address rate limit applied to every request before routing.
//! (`axum::serve` sets none of these.) While the gateway drains it keeps
//! listening and answers every new request 503 with `Retry-After` (rather
//! than resetting connections), until the drain is over.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

use super::limits::{MAX_HEADER_BYTES, Rate, RateLimiter};

/// How long to wait before accepting again after `accept` failed (out of
/// file descriptors, typically), instead of spinning.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// What the server holds connections to.
pub(super) struct ServerLimits {
    /// Connections open at once; more are closed at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers (and how
    /// long an idle kept-alive one stays): half-open connections are dropped.
    pub header_timeout: std::time::Duration,
    /// Requests by address.
    pub per_address: Arc<RateLimiter>,
}

/// Serves `router` on `listener`; from `draining` on, new requests get 503
/// (see [`super::draining`]); at `stop` it lets the requests in flight finish
/// (an API call waiting for its answer) and returns.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    draining: CancellationToken,
    stop: CancellationToken,
) {
    let ServerLimits { max_connections, header_timeout, per_address } = limits;
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("web: cannot accept a connection: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // At the cap, a new connection is closed at once rather than queued.
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "web: connection refused, {max_connections} already open");
            drop(stream);
            continue;
        };
        let (router, limiter) = (router.clone(), per_address.clone());
        let (draining, stop) = (draining.clone(), stop.clone());
        connections.spawn(async move {
            let _permit = permit;
            let address = peer.ip().to_string();
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                let mut router = router.clone();
                let rate = limiter.check(&address);
                let draining = draining.is_cancelled();
                async move {
                    if draining {
                        return Ok::<_, Infallible>(super::draining(request.uri().path()));
                    }
                    if let Rate::Limited { retry_after_secs, .. } = rate {
                        return Ok::<_, Infallible>(super::rate_limited(retry_after_secs));
                    }
                    router.call(request.map(Body::new)).await
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_header_size(MAX_HEADER_BYTES);
            let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
}
