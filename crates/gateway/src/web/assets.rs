//! The web app's files, built into the binary: `app/index.html`, `app.js`,
//! `app.css`, and the vendored Markdown renderer (marked), sanitizer
//! (DOMPurify) and highlighter (Prism) in `app/vendor/` (see its README.txt
//! for versions and licences). No build step, no CDN.
//!
//! Every file goes out with a Content-Security-Policy that allows scripts
//! from the gateway's own files only: even HTML that got past the sanitizer
//! could not run a script from a model's answer.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::App;

/// Scripts and styles from the gateway only; images also from `data:`/`blob:`
/// (pasted pictures); connections to the gateway (and its WebSocket).
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data: blob:; connect-src 'self' ws: wss:; object-src 'none'; \
base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

/// `(path, content type, bytes)` of every file served.
const FILES: &[(&str, &str, &str)] = &[
    ("/", "text/html; charset=utf-8", include_str!("app/index.html")),
    ("/app.js", "text/javascript; charset=utf-8", include_str!("app/app.js")),
    ("/app.css", "text/css; charset=utf-8", include_str!("app/app.css")),
    (
        "/vendor/marked.min.js",
        "text/javascript; charset=utf-8",
        include_str!("app/vendor/marked.min.js"),
    ),
    (
        "/vendor/purify.min.js",
        "text/javascript; charset=utf-8",
        include_str!("app/vendor/purify.min.js"),
    ),
    (
        "/vendor/prism.min.js",
        "text/javascript; charset=utf-8",
        include_str!("app/vendor/prism.min.js"),
    ),
];

/// The routes of the app's files (no token: they hold no data).
pub(super) fn routes() -> Router<App> {
    FILES.iter().fold(Router::new(), |router, &(path, kind, body)| {
        router.route(path, get(move || async move { file(kind, body) }))
    })
}

fn file(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Bytes the app's page and files weigh together.
#[cfg(test)]
fn page_weight() -> usize {
    FILES.iter().map(|(_, _, body)| body.len()).sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_whole_app_weighs_under_300_kb() {
        let weight = super::page_weight();
        assert!(weight < 300 * 1024, "the web app weighs {weight} bytes");
    }
}
