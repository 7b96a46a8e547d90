//! `web_fetch`: fetches a URL and returns it as Markdown or text.
//!
//! It never reaches the machine's own services or its private network unless
//! config allows them (see [`crate::ssrf`]): every address is checked after
//! DNS resolution, the connection goes only to the checked address (so a DNS
//! answer that changes cannot switch it), and every redirect is checked again.
//! Through an HTTP proxy (`HTTPS_PROXY`, ...), which resolves names itself,
//! each host is resolved here first and refused when it resolves privately.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::html::{html_to_markdown, html_to_text};
use crate::ssrf::{CheckedResolver, PrivateAllowList, Refused};
use crate::tool_input::{AtLeastOne, parse, schema_for};
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// Characters returned when no `max_chars` is given (as OpenClaw's web_fetch).
pub const DEFAULT_MAX_CHARS: usize = 20_000;
/// The most characters a call may ask for.
pub(crate) const MAX_MAX_CHARS: u64 = 200_000;
/// Response bodies are read up to this size, then cut.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;
/// Time allowed to connect, and for the whole request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(30);

/// `web_fetch`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebFetchArgs {
    url: String,
    /// For HTML (default markdown).
    format: Option<Format>,
    /// Cut the result here (default 20000).
    #[schemars(range(max = MAX_MAX_CHARS))]
    max_chars: Option<AtLeastOne>,
}

/// What HTML becomes.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    Markdown,
    Text,
}

/// Fetches web pages.
#[derive(Debug, Default)]
pub struct WebFetchTool {
    client: OnceLock<Result<reqwest::Client, String>>,
    /// Private addresses config allows (`[web_fetch] allow_private`).
    allow: Arc<PrivateAllowList>,
    /// A proxy for every request instead of the environment's (tests).
    proxy: Option<String>,
    /// Host names answered without DNS, as curl's `--resolve` (tests).
    resolved: Vec<(String, std::net::IpAddr)>,
}

/// How a body is turned into text.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    Html,
    Text,
}

#[async_trait]
impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        "web_fetch"
    }

    fn description(&self) -> &str {
        "Fetches an http(s) URL: HTML becomes Markdown (the <main> element if any, without \
         scripts, styles and navigation), text and JSON come as they are, binary content is \
         refused. Follows up to 5 redirects; times out after 30 s."
    }

    fn input_schema(&self) -> Value {
        schema_for::<WebFetchArgs>()
    }

    // It changes nothing here, so it may run in plan mode and beside other
    // reads; the permission gate still asks before it reaches out (a URL can
    // carry data out).
    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WebFetchArgs = parse(input)?;
        let raw = args.url.trim();
        let url = reqwest::Url::parse(raw)
            .map_err(|e| ToolError::InvalidArguments(format!("{raw:?} is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::InvalidArguments(format!(
                "only http and https URLs can be fetched, not {}:",
                url.scheme()
            )));
        }
        let markdown = args.format.unwrap_or(Format::Markdown) == Format::Markdown;
        let max_chars =
            args.max_chars.map_or(DEFAULT_MAX_CHARS, |n| n.get().min(MAX_MAX_CHARS) as usize);
        tokio::select! {
            result = self.fetch(url, markdown, max_chars) => result,
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

impl WebFetchTool {
    /// A web_fetch tool; its HTTP client is built on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// A web_fetch tool that may also reach these private addresses: IPs,
    /// CIDR ranges (`10.0.0.0/8`) or host names (`localhost`), as in
    /// `[web_fetch] allow_private`. A bad entry is an error naming it.
    pub fn allowing_private(entries: &[String]) -> Result<Self, String> {
        let allow = Arc::new(PrivateAllowList::parse(entries)?);
        Ok(Self { allow, ..Self::default() })
    }

    /// Sends every request through the HTTP proxy at `url` instead of the
    /// environment's `HTTPS_PROXY`/`HTTP_PROXY`.
    pub fn through_proxy(mut self, url: &str) -> Self {
        self.proxy = Some(url.to_string());
        self
    }

    /// Answers DNS for `host` with `ip` (as curl's `--resolve`); the answer
    /// is checked like any other.
    pub fn resolving(mut self, host: &str, ip: std::net::IpAddr) -> Self {
        self.resolved.push((host.to_ascii_lowercase(), ip));
        self
    }

    /// Whether requests may go through a proxy, which resolves names itself.
    fn proxied(&self) -> bool {
        self.proxy.is_some()
            || ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"].iter().any(|name| {
                [name.to_string(), name.to_ascii_lowercase()]
                    .iter()
                    .any(|n| std::env::var_os(n).is_some_and(|v| !v.is_empty()))
            })
    }

    /// Refuses `url` when its host is a forbidden address, or, where a proxy
    /// would resolve it (or a name is answered here), when it resolves to one.
    async fn check_destination(&self, url: &reqwest::Url) -> Result<(), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::Failed(format!(
                "fetching {url} refused: a redirect to a {}: URL",
                url.scheme()
            )));
        }
        if let Some(refused) = self.allow.check_url(url) {
            return Err(ToolError::Failed(format!("fetching {url} refused: {refused}")));
        }
        let Some(url::Host::Domain(host)) = url.host() else { return Ok(()) };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let answered: Vec<std::net::IpAddr> =
            self.resolved.iter().filter(|(h, _)| *h == host).map(|(_, ip)| *ip).collect();
        let addrs = if !answered.is_empty() {
            answered
        } else if self.proxied() {
            // A name we cannot resolve is left to the proxy (networks where
            // only the proxy resolves outside names).
            match tokio::net::lookup_host((host.as_str(), 0)).await {
                Ok(addrs) => addrs.map(|a| a.ip()).collect(),
                Err(_) => Vec::new(),
            }
        } else {
            return Ok(()); // the client's resolver checks it when connecting
        };
        if let Some(refused) = self.allow.check_addrs(&host, &addrs) {
            return Err(ToolError::Failed(format!("fetching {url} refused: {refused}")));
        }
        Ok(())
    }

    /// Fetches `url`, following up to [`MAX_REDIRECTS`] redirects, each
    /// destination checked before anything is sent to it.
    async fn get(&self, url: reqwest::Url) -> Result<reqwest::Response, ToolError> {
        let client = self.client()?;
        let shown = url.to_string();
        let mut url = url;
        for _ in 0..=MAX_REDIRECTS {
            self.check_destination(&url).await?;
            let response =
                client.get(url.clone()).send().await.map_err(|e| request_error(&shown, &e))?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .filter(|_| response.status().is_redirection());
            let Some(location) = location else { return Ok(response) };
            url = url.join(location).map_err(|e| {
                ToolError::Failed(format!(
                    "fetching {shown} failed: a redirect to {location:?}: {e}"
                ))
            })?;
        }
        Err(ToolError::Failed(format!("fetching {shown} failed: {TooManyRedirects}")))
    }

    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                // Redirects are followed by `get`, which checks each one.
                let mut builder = reqwest::Client::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(TOTAL_TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .dns_resolver(CheckedResolver::new(self.allow.clone()))
                    .user_agent(concat!("ferroclaw/", env!("CARGO_PKG_VERSION")));
                for (host, ip) in &self.resolved {
                    builder = builder.resolve(host, std::net::SocketAddr::new(*ip, 0));
                }
                if let Some(proxy) = &self.proxy {
                    let proxy = reqwest::Proxy::all(proxy)
                        .map_err(|e| format!("bad proxy {proxy:?}: {e}"))?;
                    builder = builder.no_proxy().proxy(proxy);
                }
                builder.build().map_err(|e| format!("cannot build the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))
    }
}

impl WebFetchTool {
    /// Downloads `url` whole, under the same rules as the tool (http and
    /// https only, every address and redirect checked against the private
    /// network), refusing a body over `max_bytes`: the bytes and the
    /// declared content type. For callers that need a file rather than a
    /// page (the gateway's API fetching a picture a client linked).
    pub async fn fetch_bytes(
        &self,
        url: &str,
        max_bytes: usize,
    ) -> Result<(Vec<u8>, Option<String>), ToolError> {
        let url = reqwest::Url::parse(url.trim())
            .map_err(|e| ToolError::InvalidArguments(format!("{url:?} is not a valid URL: {e}")))?;
        let shown = url.to_string();
        let mut response = self.get(url).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError::Failed(format!("fetching {shown} failed: HTTP {status}")));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase());
        let too_big = || {
            ToolError::Failed(format!("fetching {shown} refused: larger than {max_bytes} bytes"))
        };
        if response.content_length().is_some_and(|n| n > max_bytes as u64) {
            return Err(too_big());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| request_error(&shown, &e))? {
            if bytes.len() + chunk.len() > max_bytes {
                return Err(too_big());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((bytes, content_type))
    }
}

impl WebFetchTool {
    /// Fetches `url` and renders it.
    async fn fetch(
        &self,
        url: reqwest::Url,
        markdown: bool,
        max_chars: usize,
    ) -> Result<ToolOutput, ToolError> {
        let shown = url.to_string();
        let mut response = self.get(url).await?;
        let final_url = response.url().to_string();
        let status = response.status();
        if status.is_redirection() {
            // The redirect policy stops only at a Location it cannot follow.
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(none)")
                .to_string();
            return Err(ToolError::Failed(format!(
                "fetching {shown} refused: a redirect to {to} (only http and https are followed)"
            )));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase());
        let declared = match content_type.as_deref() {
        Some(ct) => Some(body_kind(ct).ok_or_else(|| {
            ToolError::Failed(format!(
                "{final_url} returned binary content ({ct}); web_fetch only returns text, HTML and JSON"
            ))
        })?),
        None => None,
    };

        let mut bytes = Vec::new();
        let mut cut = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| request_error(&final_url, &e))? {
            let room = MAX_BODY_BYTES - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                cut = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        let kind = match declared {
            Some(kind) => kind,
            None if bytes.contains(&0) => {
                return Err(ToolError::Failed(format!(
                    "{final_url} returned binary content (no content type, NUL bytes in the body)"
                )));
            }
            None => sniff(&bytes),
        };
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let text = match kind {
            Body::Html => tokio::task::spawn_blocking(move || {
                if markdown { html_to_markdown(&body) } else { html_to_text(&body) }
            })
            .await
            .map_err(|e| ToolError::Failed(format!("HTML conversion failed: {e}")))?,
            Body::Text => body,
        };

        let mut out = format!(
            "URL: {final_url}\nStatus: {status}\nContent-Type: {}\n\n",
            content_type.as_deref().unwrap_or("(none)")
        );
        let total_chars = text.chars().count();
        match text.char_indices().nth(max_chars) {
            None => out.push_str(&text),
            Some((at, _)) => {
                out.push_str(&text[..at]);
                out.push_str(&format!(
                "\n\n[... cut at {max_chars} of {total_chars} characters; call web_fetch with a larger max_chars to see more ...]"
            ));
            }
        }
        if cut {
            out.push_str(&format!(
                "\n[the response was larger than {} MB; only its start was read]",
                MAX_BODY_BYTES / (1024 * 1024)
            ));
        }
        if !status.is_success() {
            return Ok(ToolOutput::error(format!("HTTP {status} from {final_url}\n\n{out}")));
        }
        Ok(ToolOutput::text(out))
    }
}

/// How to treat a body of content type `ct`; `None` for binary types.
fn body_kind(ct: &str) -> Option<Body> {
    match ct {
        "text/html" | "application/xhtml+xml" => Some(Body::Html),
        _ if ct.starts_with("text/") => Some(Body::Text),
        _ if ct.ends_with("+json") || ct.ends_with("+xml") => Some(Body::Text),
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-sh"
        | "application/sql"
        | "application/graphql"
        | "application/x-ndjson" => Some(Body::Text),
        _ => None,
    }
}

/// HTML or plain text, for a body without a content type.
fn sniff(bytes: &[u8]) -> Body {
    let start = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).to_ascii_lowercase();
    let start = start.trim_start();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Body::Html
    } else {
        Body::Text
    }
}

/// The redirect limit was passed.
#[derive(Debug)]
struct TooManyRedirects;

impl std::fmt::Display for TooManyRedirects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "too many redirects (more than {MAX_REDIRECTS})")
    }
}

impl std::error::Error for TooManyRedirects {}

/// A request error said plainly.
fn request_error(url: &str, e: &reqwest::Error) -> ToolError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(inner) = source {
        if let Some(refused) = inner.downcast_ref::<Refused>() {
            return ToolError::Failed(format!("fetching {url} refused: {refused}"));
        }
        if inner.downcast_ref::<TooManyRedirects>().is_some() {
            return ToolError::Failed(format!("fetching {url} failed: {inner}"));
        }
        source = inner.source();
    }
    let why = if e.is_timeout() {
        format!(
            "timed out (connect {} s, total {} s)",
            CONNECT_TIMEOUT.as_secs(),
            TOTAL_TIMEOUT.as_secs()
        )
    } else if e.is_redirect() {
        format!("too many redirects (more than {MAX_REDIRECTS})")
    } else if e.is_connect() {
        format!("cannot connect: {e}")
    } else {
        e.to_string()
    };
    ToolError::Failed(format!("fetching {url} failed: {why}"))
}
