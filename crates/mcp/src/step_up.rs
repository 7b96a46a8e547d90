//! Scope step-up (the MCP authorization spec's scope challenge handling):
//! an HTTP server that answers a request mid-session with 403 and
//! `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."` wants
//! a token with more scopes. ferroclaw asks the authorization server for the
//! union of the scopes it was granted and those demanded, saves the new
//! token (the live connection reads the token store before every request)
//! and the connection retries the request once. A server that refuses again
//! gets an error, not a loop, and no second step-up for the same scopes on
//! that connection.
//!
//! How the user consents is [`ClientHooks::scope_consent`](crate::ClientHooks):
//! in a browser in the REPL, which first says which scopes it asks for and
//! why; where nobody can consent (gateway, ACP, `-p`), the request fails with
//! the `ferroclaw mcp login --scopes` command that grants them.

use std::collections::BTreeSet;

use rmcp::service::ServiceError;
use rmcp::transport::auth::WWWAuthenticateParams;

use crate::error::McpError;
use crate::oauth::{self, Ask, Consent, OAuthClient, TokenStore};

/// A 403 `insufficient_scope` answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeChallenge {
    /// The whole `WWW-Authenticate` header (it seeds discovery).
    pub header: String,
    /// The scopes the server demands for the request.
    pub scopes: Vec<String>,
    /// The server's `error_description`, when it gave one.
    pub description: Option<String>,
}

impl ScopeChallenge {
    /// The challenge of a request to `url` that failed on 403
    /// `insufficient_scope`; `None` for any other failure (a 401 included).
    pub(crate) fn of(e: &ServiceError, url: &str) -> Option<ScopeChallenge> {
        let header = e.auth_challenge()?;
        let base = reqwest::Url::parse(url).ok()?;
        let params = WWWAuthenticateParams::parse(header, &base);
        if !params.is_insufficient_scope() {
            return None;
        }
        let scopes = params.scope.unwrap_or_default();
        Some(ScopeChallenge {
            header: header.to_string(),
            scopes: scopes.split_whitespace().map(str::to_string).collect(),
            description: params.error_description,
        })
    }

    /// The demanded scopes as the server wrote them.
    fn named(&self) -> String {
        match self.scopes.is_empty() {
            true => "(not named)".to_string(),
            false => self.scopes.join(" "),
        }
    }
}

/// `granted`, then the scopes of `demanded` not among them.
pub(crate) fn union(granted: &[String], demanded: &[String]) -> Vec<String> {
    let mut all = granted.to_vec();
    for scope in demanded {
        if !all.contains(scope) {
            all.push(scope.clone());
        }
    }
    all
}

/// The server a step-up is for, and how its user consents.
pub(crate) struct Target<'a> {
    pub server: &'a str,
    pub url: &'a str,
    pub tokens: Option<&'a TokenStore>,
    pub consent: Option<Consent>,
    pub client: &'a OAuthClient,
}

/// Where one connection's step-ups stand.
#[derive(Default)]
pub(crate) struct StepUps {
    /// One step-up at a time: requests refused together wait for the first
    /// one's login instead of each opening a browser.
    running: tokio::sync::Mutex<()>,
    /// Demanded scope sets the server refused again after a step-up.
    refused: std::sync::Mutex<BTreeSet<String>>,
}

impl StepUps {
    /// Gets (and saves) a token with the scopes `challenge` demands on top
    /// of those granted, or says why it cannot.
    pub(crate) async fn run(
        &self,
        target: &Target<'_>,
        what: &str,
        challenge: &ScopeChallenge,
    ) -> Result<(), McpError> {
        let fail = |advice: String| McpError::NeedsScopes {
            server: target.server.to_string(),
            what: what.to_string(),
            scopes: challenge.named(),
            advice,
        };
        if challenge.scopes.is_empty() {
            return Err(fail("the server did not say which, so ferroclaw cannot ask".into()));
        }
        let Some(tokens) = target.tokens else {
            return Err(fail("this client keeps no OAuth tokens".into()));
        };
        let _one_at_a_time = self.running.lock().await;
        let granted = tokens.granted_scopes(target.server, target.url);
        if challenge.scopes.iter().all(|s| granted.contains(s)) {
            // Granted meanwhile (a request refused together stepped up), or
            // granted already and refused anyway: the retry tells which.
            return Ok(());
        }
        let asked = union(&granted, &challenge.scopes);
        let login = login_command(target.server, &asked);
        if self.was_refused(challenge) {
            return Err(fail(format!(
                "it refused them after a step-up before, so ferroclaw does not ask again; {login}"
            )));
        }
        let Some(consent) = target.consent else {
            return Err(fail(login));
        };
        let why = why(target.server, what, challenge, &granted, &asked);
        tracing::info!("{why}");
        let ask = Ask { scopes: asked, why: Some(why) };
        let header = Some(challenge.header.clone());
        oauth::authorize(target.server, target.url, tokens, consent, header, target.client, &ask)
            .await
            .map_err(|e| fail(format!("asking for them failed: {e}")))
    }

    /// The error for a server that refused `challenge`'s scopes again after
    /// a step-up; that set is not asked for again on this connection.
    pub(crate) fn refused_again(
        &self,
        target: &Target<'_>,
        what: &str,
        challenge: &ScopeChallenge,
    ) -> McpError {
        if let Ok(mut refused) = self.refused.lock() {
            refused.insert(key(challenge));
        }
        let granted = target
            .tokens
            .map(|t| t.granted_scopes(target.server, target.url))
            .filter(|g| !g.is_empty())
            .map_or_else(|| "the scopes asked for".to_string(), |g| g.join(" "));
        McpError::NeedsScopes {
            server: target.server.to_string(),
            what: what.to_string(),
            scopes: challenge.named(),
            advice: format!(
                "it still refused after ferroclaw was granted {granted}, so ferroclaw gives up \
                 (the authorization server may not grant them to you)"
            ),
        }
    }

    fn was_refused(&self, challenge: &ScopeChallenge) -> bool {
        self.refused.lock().map(|r| r.contains(&key(challenge))).unwrap_or(false)
    }
}

/// A demanded scope set, order aside.
fn key(challenge: &ScopeChallenge) -> String {
    let sorted: BTreeSet<&str> = challenge.scopes.iter().map(String::as_str).collect();
    sorted.into_iter().collect::<Vec<_>>().join(" ")
}

/// The command that grants `scopes` where nobody can consent in a browser.
fn login_command(server: &str, scopes: &[String]) -> String {
    format!("run `ferroclaw mcp login {server} --scopes \"{}\"` to grant them", scopes.join(" "))
}

/// What the user reads before consenting to a step-up: which scopes, and why.
fn why(
    server: &str,
    what: &str,
    challenge: &ScopeChallenge,
    granted: &[String],
    asked: &[String],
) -> String {
    let reason = challenge.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
    let granted = match granted.is_empty() {
        true => "none recorded".to_string(),
        false => granted.join(" "),
    };
    format!(
        "mcp server {server} refused {what}: it needs the OAuth scope(s) {}{reason}; \
         granted so far: {granted}. ferroclaw asks its authorization server for {}.",
        challenge.named(),
        asked.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(scopes: &[&str]) -> ScopeChallenge {
        ScopeChallenge {
            header: String::new(),
            scopes: scopes.iter().map(ToString::to_string).collect(),
            description: Some("Token has insufficient scope".into()),
        }
    }

    #[test]
    fn the_union_keeps_granted_scopes_first_and_adds_each_new_one_once() {
        let granted = vec!["mcp:basic".to_string(), "offline_access".to_string()];
        let demanded = vec!["mcp:basic".to_string(), "mcp:write".to_string()];
        assert_eq!(union(&granted, &demanded), ["mcp:basic", "offline_access", "mcp:write"]);
    }

    #[test]
    fn the_consent_text_names_the_scopes_the_reason_and_what_is_asked() {
        let text = why(
            "web",
            "the call of write_file",
            &challenge(&["files:read", "files:write"]),
            &["files:read".to_string()],
            &["files:read".to_string(), "files:write".to_string()],
        );
        assert_eq!(
            text,
            "mcp server web refused the call of write_file: it needs the OAuth scope(s) \
             files:read files:write (Token has insufficient scope); granted so far: files:read. \
             ferroclaw asks its authorization server for files:read files:write."
        );
    }

    #[tokio::test]
    async fn without_consent_the_error_names_the_login_command_with_the_union() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TokenStore::new(dir.path());
        let client = OAuthClient::default();
        let target = Target {
            server: "web",
            url: "http://127.0.0.1:1/mcp",
            tokens: Some(&tokens),
            consent: None,
            client: &client,
        };
        let err = StepUps::default()
            .run(&target, "the call of write_file", &challenge(&["files:write"]))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "mcp server web refused the call of write_file: it needs the OAuth scope(s) \
             files:write; run `ferroclaw mcp login web --scopes \"files:write\"` to grant them"
        );
    }
}
