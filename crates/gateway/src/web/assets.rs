//! The web app's files, built into the binary: `app/index.html`, `app.css`,
//! the chat's JavaScript modules (`app.js` starts the page; `page.js`,
//! `markdown.js`, `messages.js`, `live.js`, `approvals.js`, `socket.js`,
//! `composer.js`, `sidebar.js` and `views.js` hold its parts, as `app.js`
//! lists), `operate.js` (the operate views), and the vendored Markdown
//! renderer (marked), sanitizer (DOMPurify) and highlighter (Prism) in
//! `app/vendor/` (see its README.txt for versions and licences). No build
//! step, no CDN: the browser loads the modules by their `import`s.
//!
//! Every file goes out with a Content-Security-Policy that allows scripts
//! from the gateway's own files only: even HTML that got past the sanitizer
//! could not run a script from a model's answer.
//!
//! Each file is gzipped once, on first use, and sent compressed to browsers
//! that accept gzip (`Vary: Accept-Encoding`). Each has an `ETag` (a digest
//! of its bytes, one per encoding) and `Cache-Control: no-cache`: a browser
//! keeps the file and asks whether it changed, and gets `304 Not Modified`
//! (no body) until a new ferroclaw serves another one.

use std::io::Write;
use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

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
    ("/operate.js", "text/javascript; charset=utf-8", include_str!("app/operate.js")),
    ("/page.js", "text/javascript; charset=utf-8", include_str!("app/page.js")),
    ("/markdown.js", "text/javascript; charset=utf-8", include_str!("app/markdown.js")),
    ("/messages.js", "text/javascript; charset=utf-8", include_str!("app/messages.js")),
    ("/live.js", "text/javascript; charset=utf-8", include_str!("app/live.js")),
    ("/approvals.js", "text/javascript; charset=utf-8", include_str!("app/approvals.js")),
    ("/socket.js", "text/javascript; charset=utf-8", include_str!("app/socket.js")),
    ("/composer.js", "text/javascript; charset=utf-8", include_str!("app/composer.js")),
    ("/sidebar.js", "text/javascript; charset=utf-8", include_str!("app/sidebar.js")),
    ("/views.js", "text/javascript; charset=utf-8", include_str!("app/views.js")),
];

/// One file as it is served: its bytes plain and gzipped, with an `ETag` each.
struct Served {
    kind: &'static str,
    plain: &'static [u8],
    plain_tag: HeaderValue,
    gzip: Vec<u8>,
    gzip_tag: HeaderValue,
}

impl Served {
    fn new(kind: &'static str, body: &'static str) -> Served {
        let digest = Sha256::digest(body.as_bytes());
        let short: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        let tag = |suffix: &str| {
            HeaderValue::from_str(&format!("\"{short}{suffix}\""))
                .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
        };
        Served {
            kind,
            plain: body.as_bytes(),
            plain_tag: tag(""),
            gzip: gzipped(body.as_bytes()),
            gzip_tag: tag("-gz"),
        }
    }
}

/// `bytes` gzipped at the best level (done once per file); empty if that failed.
fn gzipped(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    match encoder.write_all(bytes).and_then(|()| encoder.finish()) {
        Ok(out) => out,
        Err(e) => {
            tracing::warn!("web: cannot gzip an app file, it goes uncompressed: {e}");
            Vec::new()
        }
    }
}

/// The files, prepared on first use.
fn served() -> &'static [Served] {
    static SERVED: OnceLock<Vec<Served>> = OnceLock::new();
    SERVED.get_or_init(|| FILES.iter().map(|&(_, kind, body)| Served::new(kind, body)).collect())
}

/// The routes of the app's files (no token: they hold no data).
pub(super) fn routes() -> Router<App> {
    FILES.iter().enumerate().fold(Router::new(), |router, (i, &(path, _, _))| {
        router
            .route(path, get(move |headers: HeaderMap| async move { file(&served()[i], &headers) }))
    })
}

/// True when the request's `Accept-Encoding` takes gzip (with a weight above 0).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let zero = parts.any(|p| {
                p.strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()) == Some(0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero
        })
    })
}

/// True when `If-None-Match` names `tag` (or is `*`).
fn unchanged(headers: &HeaderMap, tag: &HeaderValue) -> bool {
    let Some(wanted) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let tag = tag.to_str().unwrap_or_default();
    wanted.split(',').map(str::trim).any(|w| w == "*" || w.trim_start_matches("W/") == tag)
}

fn file(served: &Served, request: &HeaderMap) -> Response {
    let gzip = accepts_gzip(request) && !served.gzip.is_empty();
    let tag = if gzip { &served.gzip_tag } else { &served.plain_tag };
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // Kept, but checked with the ETag before each use.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    headers.insert(header::ETAG, tag.clone());
    if unchanged(request, tag) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(served.kind));
    if gzip {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        (headers, served.gzip.clone()).into_response()
    } else {
        (headers, served.plain).into_response()
    }
}

/// Bytes the app's page and files weigh together.
#[cfg(test)]
fn page_weight() -> usize {
    FILES.iter().map(|(_, _, body)| body.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_app_weighs_under_300_kb() {
        let weight = page_weight();
        assert!(weight < 300 * 1024, "the web app weighs {weight} bytes");
    }

    /// The file served at `path`.
    fn served_at(path: &str) -> &'static Served {
        let at = FILES.iter().position(|(p, _, _)| *p == path).unwrap();
        &served()[at]
    }

    fn request(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn a_browser_that_takes_gzip_gets_the_file_gzipped_and_a_plain_client_gets_it_plain() {
        let app = served_at("/messages.js");
        let zipped = file(app, &request(&[(header::ACCEPT_ENCODING, "gzip, deflate, br")]));
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
        assert!(app.gzip.len() * 2 < app.plain.len(), "gzip saves more than half of messages.js");
        let plain = file(app, &request(&[]));
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        assert_ne!(zipped.headers()[header::ETAG], plain.headers()[header::ETAG]);
        let refused = file(app, &request(&[(header::ACCEPT_ENCODING, "gzip;q=0, identity")]));
        assert!(refused.headers().get(header::CONTENT_ENCODING).is_none());
    }

    #[test]
    fn a_file_asked_again_with_its_etag_is_not_sent_again() {
        let app = served_at("/app.css");
        let first = file(app, &request(&[(header::ACCEPT_ENCODING, "gzip")]));
        let tag = first.headers()[header::ETAG].to_str().unwrap().to_string();
        let again = request(&[(header::ACCEPT_ENCODING, "gzip"), (header::IF_NONE_MATCH, &tag)]);
        assert_eq!(file(app, &again).status(), StatusCode::NOT_MODIFIED);
        let other = request(&[(header::ACCEPT_ENCODING, "gzip"), (header::IF_NONE_MATCH, "\"x\"")]);
        assert_eq!(file(app, &other).status(), StatusCode::OK);
    }
}
