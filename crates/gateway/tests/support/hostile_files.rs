//! Files a hostile or broken platform might serve: a body that never ends
//! (no `Content-Length`), and one that says it is a gigabyte.

use axum::body::{Body, Bytes};
use axum::response::Response;

/// The `max_file_bytes` the tests set: anything past it must be refused.
pub(crate) const SMALL_CAP: usize = 4096;

/// A body of `x` that never ends, sent in chunks without a size.
pub(crate) fn endless() -> Response {
    let chunk = Bytes::from(vec![b'x'; 1024]);
    let stream = futures_util::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
    Response::new(Body::from_stream(stream))
}

/// A response that declares a gigabyte (and would send it).
pub(crate) fn declared_huge() -> Response {
    let mut response = endless();
    response.headers_mut().insert("content-length", 1_073_741_824u64.into());
    response
}
