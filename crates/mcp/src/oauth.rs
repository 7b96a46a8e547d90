//! OAuth for streamable HTTP servers that answer 401, as the MCP
//! authorization spec asks, on rmcp's `auth` module: discovery (protected
//! resource metadata, then authorization server metadata), dynamic client
//! registration, authorization code with PKCE, and token refresh.
//!
//! `ferroclaw mcp login NAME` runs [`login`]; the tokens it gets live in
//! [`TokenStore`], one file per server, and every later connection to that
//! server sends them (refreshing them when they expire). A server that
//! answers 401 without usable tokens fails to start with
//! [`McpError::NeedsLogin`](crate::McpError::NeedsLogin), which tells the
//! user to log in.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use ferroclaw_tools::repo_file::{MAX_REPO_FILE_BYTES, read_repo_text};
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, CredentialStore,
    OAuthState, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long [`login`] waits for the browser to come back to the loopback
/// redirect: long enough to type a password and pass two-factor checks.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The client name ferroclaw registers under (dynamic client registration).
const CLIENT_NAME: &str = "ferroclaw";

/// Why a login (or logout) failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("mcp server {server}: OAuth failed: {source}")]
    Auth {
        server: String,
        #[source]
        source: Box<AuthError>,
    },
    #[error("mcp server {server}: cannot listen for the OAuth redirect on 127.0.0.1: {source}")]
    Listen {
        server: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "mcp server {server}: nobody completed the login in the browser within {} s",
        LOGIN_TIMEOUT.as_secs()
    )]
    TimedOut { server: String },
    #[error("mcp server {server}: the authorization server sent no code: {message}")]
    Refused { server: String, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How the user's consent comes back from the authorization page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Print the page's address (and try to open a browser), then wait for
    /// the redirect on a loopback port.
    Browser,
    /// Fetch the page without a browser and follow its redirect: for
    /// authorization servers that approve without asking (tests, the
    /// conformance suite).
    Headless,
}

/// Saved OAuth tokens, one JSON file per server under a directory
/// (`$FERROCLAW_HOME/mcp-tokens/`), each readable by the user only and
/// replaced atomically.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

/// One token file: the server's URL (tokens of a server whose URL changed
/// are not sent) and rmcp's credentials.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    url: String,
    credentials: StoredCredentials,
}

impl TokenStore {
    /// Tokens under `dir` (created on the first login).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The file holding `server`'s tokens.
    pub fn path(&self, server: &str) -> PathBuf {
        self.dir.join(format!("{server}.json"))
    }

    /// Whether `server` at `url` has tokens saved.
    pub fn has_tokens(&self, server: &str, url: &str) -> bool {
        read_file(&self.path(server))
            .ok()
            .flatten()
            .is_some_and(|f| f.url == url && f.credentials.token_response.is_some())
    }

    /// The scopes the saved token of `server` at `url` was granted (empty
    /// when there is none, or the authorization server did not say).
    pub fn granted_scopes(&self, server: &str, url: &str) -> Vec<String> {
        match read_file(&self.path(server)) {
            Ok(Some(f)) if f.url == url => f.credentials.granted_scopes,
            _ => Vec::new(),
        }
    }

    /// Forgets `server`'s tokens; false when there were none.
    pub fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        let path = self.path(server);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(OAuthError::Io { path, source }),
        }
    }

    /// rmcp's view of one server's tokens.
    pub(crate) fn credentials(&self, server: &str, url: &str) -> FileCredentials {
        FileCredentials { path: self.path(server), url: url.to_string() }
    }
}

/// A [`CredentialStore`] on one token file.
pub(crate) struct FileCredentials {
    path: PathBuf,
    url: String,
}

fn read_file(path: &Path) -> Result<Option<TokenFile>, String> {
    let text = match read_repo_text(path, MAX_REPO_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{}: not a token file: {e}", path.display()))
}

/// Writes `bytes` to `path` with mode 0600: to a temporary file in the same
/// directory first, then renamed over `path`, so a crash never leaves half a file.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{}.{}.tmp", name.unwrap_or_default(), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[async_trait]
impl CredentialStore for FileCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let file = read_file(&self.path).map_err(AuthError::CredentialStoreError)?;
        Ok(file.filter(|f| f.url == self.url).map(|f| f.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let file = TokenFile { url: self.url.clone(), credentials };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        write_private(&self.path, &bytes)
            .map_err(|e| AuthError::CredentialStoreError(format!("{}: {e}", self.path.display())))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(AuthError::CredentialStoreError(format!("{}: {e}", self.path.display()))),
        }
    }
}

/// An authorization manager for `url` whose tokens live in `store`. The
/// authorization server may be at a private address: the user chose the server.
pub(crate) async fn manager(
    store: &TokenStore,
    server: &str,
    url: &str,
) -> Result<AuthorizationManager, AuthError> {
    crate::connection::install_crypto();
    let mut manager = AuthorizationManager::new_allowing_private_addresses(url).await?;
    manager.set_credential_store(store.credentials(server, url));
    Ok(manager)
}

/// How ferroclaw identifies itself to an authorization server: a client id
/// (and secret) registered out of band, a client ID metadata document's
/// address, or neither (dynamic client registration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// Used when the authorization server supports such documents and no
    /// client id is given.
    pub client_metadata_url: Option<String>,
}

/// Logs in to the HTTP server `server` at `url`: discovers its
/// authorization server, registers ferroclaw there (unless `client` names a
/// pre-registered client or a metadata document), gets the user's consent as
/// `consent` says, and saves the tokens in `store`. `challenge` is the
/// `WWW-Authenticate` header of a 401, when one is at hand (it carries the
/// scopes the server wants); without it the server is asked for one.
/// `scopes` are asked for as given; empty, discovery chooses them.
pub async fn login(
    server: &str,
    url: &str,
    store: &TokenStore,
    consent: Consent,
    challenge: Option<String>,
    client: &OAuthClient,
    scopes: &[String],
) -> Result<(), OAuthError> {
    let challenge = match challenge {
        Some(c) => Some(c),
        None => probe_challenge(url).await,
    };
    let ask = Ask { scopes: scopes.to_vec(), why: None };
    authorize(server, url, store, consent, challenge, client, &ask).await
}

/// What an authorization asks for and why, beyond what discovery selects.
pub(crate) struct Ask {
    /// The scopes to ask for; empty: those discovery selects.
    pub scopes: Vec<String>,
    /// Said before the address to open, when the user has to consent in a
    /// browser (a step-up says which scopes it asks for and why).
    pub why: Option<String>,
}

/// One authorization code flow: discovery (seeded by `challenge`), client
/// registration as `client` says, consent, and the tokens saved in `store`.
pub(crate) async fn authorize(
    server: &str,
    url: &str,
    store: &TokenStore,
    consent: Consent,
    challenge: Option<String>,
    client: &OAuthClient,
    ask: &Ask,
) -> Result<(), OAuthError> {
    let auth = |source| OAuthError::Auth { server: server.to_string(), source: Box::new(source) };
    let (listener, redirect_uri) = match consent {
        Consent::Browser => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|source| OAuthError::Listen { server: server.to_string(), source })?;
            let port = listener
                .local_addr()
                .map_err(|source| OAuthError::Listen { server: server.to_string(), source })?
                .port();
            (Some(listener), format!("http://127.0.0.1:{port}/callback"))
        }
        Consent::Headless => (None, "http://127.0.0.1:1/callback".to_string()),
    };
    let mut state = OAuthState::Unauthorized(manager(store, server, url).await.map_err(auth)?);
    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(id) = &client.client_id {
        request = request.with_preregistered_client(id);
    }
    if let Some(secret) = &client.client_secret {
        request = request.with_client_secret(secret);
    }
    if let Some(document) = &client.client_metadata_url {
        request = request.with_client_metadata_url(document);
    }
    if let Some(c) = challenge {
        request = request.with_challenge(c);
    }
    if !ask.scopes.is_empty() {
        request = request.with_scopes(ask.scopes.iter().cloned());
    }
    state.start_authorization(request).await.map_err(auth)?;
    let page = state.get_authorization_url().await.map_err(auth)?;
    let callback = match listener {
        Some(listener) => {
            match &ask.why {
                Some(why) => eprintln!("{why}\nTo grant them, open this address in a browser:"),
                None => {
                    eprintln!("To log in to mcp server {server}, open this address in a browser:");
                }
            }
            eprintln!("  {page}");
            open_browser(&page);
            tokio::time::timeout(LOGIN_TIMEOUT, wait_for_redirect(listener))
                .await
                .map_err(|_| OAuthError::TimedOut { server: server.to_string() })?
                .map_err(|source| OAuthError::Listen { server: server.to_string(), source })?
        }
        None => follow_redirect(&page).await.map_err(auth)?,
    };
    let parsed = AuthorizationCallback::from_redirect_url(&callback).map_err(|_| {
        OAuthError::Refused { server: server.to_string(), message: redirect_error(&callback) }
    })?;
    state
        .handle_callback_with_issuer(&parsed.code, &parsed.csrf_token, parsed.issuer.as_deref())
        .await
        .map_err(auth)
}

/// The `WWW-Authenticate` header of the server's 401 to an unauthenticated
/// `initialize`, if it answers so.
async fn probe_challenge(url: &str) -> Option<String> {
    let client = crate::connection::http_client().ok()?;
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}}});
    let response = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    response.headers().get(reqwest::header::WWW_AUTHENTICATE)?.to_str().ok().map(str::to_string)
}

/// Fetches the authorization page without a browser and returns where its
/// redirect points.
async fn follow_redirect(page: &str) -> Result<String, AuthError> {
    crate::connection::install_crypto();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()?;
    let response = client.get(page).send().await?;
    response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| {
            AuthError::AuthorizationFailed(format!(
                "the authorization page answered {} without a redirect",
                response.status()
            ))
        })
}

/// Accepts connections on the loopback listener until one brings the
/// redirect (`GET /callback?code=...`); answers it with a short page.
async fn wait_for_redirect(listener: tokio::net::TcpListener) -> std::io::Result<String> {
    let port = listener.local_addr()?.port();
    loop {
        let (mut stream, _) = listener.accept().await?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        while len < buf.len() {
            let n = stream.read(&mut buf[len..]).await?;
            if n == 0 {
                break;
            }
            len += n;
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split_whitespace().next())
            .filter(|t| t.starts_with("/callback"))
            .map(str::to_string);
        let (status, text) = match &target {
            Some(_) => ("200 OK", "ferroclaw got the authorization; you can close this window."),
            None => ("404 Not Found", "not the OAuth redirect"),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
        if let Some(target) = target {
            return Ok(format!("http://127.0.0.1:{port}{target}"));
        }
    }
}

/// The `error` and `error_description` of a redirect that carries no code.
fn redirect_error(callback: &str) -> String {
    let Ok(url) = reqwest::Url::parse(callback) else {
        return format!("unreadable redirect {callback:?}");
    };
    let get = |key: &str| url.query_pairs().find(|(k, _)| k == key).map(|(_, v)| v.into_owned());
    match (get("error"), get("error_description")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e,
        _ => "the redirect has no code and no error".to_string(),
    }
}

/// Tries to open `url` in the user's browser; the printed address is the
/// fallback. The browser is the user's own program, started for the user
/// (not the model) with the whole environment (`DISPLAY`, ...), unconfined.
fn open_browser(url: &str) {
    use ferroclaw_tools::process::{EnvPolicy, Launch};
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut command = Launch::new(opener, cwd).arg(url).env_policy(EnvPolicy::Inherit).command();
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _ = ferroclaw_tools::process::spawn(move || command.spawn());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn token_files_are_private_replaced_whole_and_bound_to_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path().join("mcp-tokens"));
        let creds = store.credentials("web", "http://127.0.0.1:1/mcp");
        let saved = StoredCredentials::new("client-1".into(), None, vec![], Some(1));
        creds.save(saved.clone()).await.unwrap();
        creds.save(saved).await.unwrap();
        let path = store.path("web");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["web.json"], "no temporary file is left behind");
        assert_eq!(creds.load().await.unwrap().unwrap().client_id, "client-1");
        let moved = store.credentials("web", "http://127.0.0.1:2/mcp");
        assert!(moved.load().await.unwrap().is_none());
        assert!(store.remove("web").unwrap());
        assert!(!store.remove("web").unwrap());
    }

    #[tokio::test]
    async fn the_loopback_listener_ignores_other_requests_and_returns_the_redirect() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting = tokio::spawn(wait_for_redirect(listener));
        for path in ["/favicon.ico", "/callback?code=c1&state=s1"] {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await.unwrap();
            let expected = if path == "/favicon.ico" { "404" } else { "200" };
            assert!(reply.contains(expected), "{path}: {reply}");
        }
        let url = waiting.await.unwrap().unwrap();
        assert_eq!(url, format!("http://127.0.0.1:{port}/callback?code=c1&state=s1"));
    }

    #[test]
    fn a_refused_redirect_says_what_the_server_said() {
        assert_eq!(
            redirect_error(
                "http://127.0.0.1:1/callback?error=access_denied&error_description=no+way"
            ),
            "access_denied: no way"
        );
    }
}
