//! TLS for connections to PostgreSQL: rustls with the system's roots over
//! TCP, and nothing over a Unix socket.
//!
//! tokio-postgres asks for a connector before it knows whether TLS will be
//! used, and for a Unix socket it asks with an empty host name, which rustls
//! refuses ("invalid dns name") even under `sslmode=disable`. [`StoreTls`]
//! answers that request with a connector that never does TLS: PostgreSQL
//! offers none on a Unix socket.

use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Makes connectors: rustls for a host name, none for a Unix socket.
#[derive(Clone)]
pub(crate) struct StoreTls(MakeRustlsConnect);

impl StoreTls {
    /// rustls with the system's root certificates (only used when the
    /// server offers TLS, or `sslmode=require` asks for it).
    pub(crate) fn new() -> Result<Self, StoreError> {
        // Ignore the error: another crate or an earlier call installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        let config =
            rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        Ok(StoreTls(MakeRustlsConnect::new(config)))
    }
}

/// One connection's TLS: rustls over TCP; over a Unix socket, a refusal
/// should a server ever offer TLS there.
pub(crate) enum SocketTls<T> {
    Rustls(T),
    UnixSocket,
}

impl<S, T> TlsConnect<S> for SocketTls<T>
where
    T: TlsConnect<S>,
    T::Future: Send + 'static,
    T::Error: Into<BoxError>,
{
    type Stream = T::Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<T::Stream, BoxError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        match self {
            SocketTls::Rustls(tls) => {
                let handshake = tls.connect(stream);
                Box::pin(async move { handshake.await.map_err(Into::into) })
            }
            SocketTls::UnixSocket => Box::pin(async {
                Err("the server offered TLS over a Unix socket; use sslmode=disable there".into())
            }),
        }
    }
}

impl<S> MakeTlsConnect<S> for StoreTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
    type TlsConnect = SocketTls<<MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect>;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<Self::TlsConnect, Self::Error> {
        if host.is_empty() {
            return Ok(SocketTls::UnixSocket);
        }
        <MakeRustlsConnect as MakeTlsConnect<S>>::make_tls_connect(&mut self.0, host)
            .map(SocketTls::Rustls)
    }
}
