//! `web_search`: searches the web through a configured backend (Brave,
//! Tavily, or a SearXNG instance). Without a backend the tool is not offered.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::tool_input::{parse, schema_for};
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// Results returned when the model does not say.
pub const DEFAULT_SEARCH_RESULTS: u64 = 5;
/// The most results a call may ask for.
pub const MAX_SEARCH_RESULTS: u64 = 20;
const TIMEOUT: Duration = Duration::from_secs(20);

/// Which search service answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchBackend {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// Tavily (`Authorization: Bearer`).
    Tavily,
    /// A SearXNG instance with the JSON format enabled; no key.
    Searxng,
}

impl SearchBackend {
    /// Parses `brave`, `tavily`, `searxng`.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "brave" => Ok(Self::Brave),
            "tavily" => Ok(Self::Tavily),
            "searxng" => Ok(Self::Searxng),
            other => {
                Err(format!("unknown web search backend {other:?}; valid: brave, tavily, searxng"))
            }
        }
    }

    /// The service's own address (SearXNG has none: its URL must be configured).
    pub fn default_url(self) -> Option<&'static str> {
        match self {
            Self::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            Self::Tavily => Some("https://api.tavily.com/search"),
            Self::Searxng => None,
        }
    }
}

/// The `web_search` tool, bound to one backend.
#[derive(Debug)]
pub struct WebSearchTool {
    backend: SearchBackend,
    url: String,
    api_key: Option<String>,
    client: reqwest::Client,
}

/// One hit.
#[derive(Debug, Clone, PartialEq)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

impl WebSearchTool {
    /// A tool for `backend` at `url` (or the backend's default) with `api_key`.
    pub fn new(
        backend: SearchBackend,
        url: Option<String>,
        api_key: Option<String>,
    ) -> Result<Self, String> {
        let url = url
            .or_else(|| backend.default_url().map(str::to_string))
            .ok_or("web_search: a searxng backend needs url = \"https://your-instance/search\"")?;
        if backend != SearchBackend::Searxng && api_key.is_none() {
            return Err(format!(
                "web_search: the {backend:?} backend needs an API key (api_key_env)"
            ));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("ferroclaw/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("web_search: cannot build the HTTP client: {e}"))?;
        Ok(Self { backend, url, api_key, client })
    }

    async fn search(&self, query: &str, count: u64) -> Result<Vec<Hit>, ToolError> {
        let key = self.api_key.clone().unwrap_or_default();
        let with_params = |params: &[(&str, &str)]| {
            reqwest::Url::parse_with_params(&self.url, params)
                .map_err(|e| ToolError::Failed(format!("web search: bad url {:?}: {e}", self.url)))
        };
        let request = match self.backend {
            SearchBackend::Brave => self
                .client
                .get(with_params(&[("q", query), ("count", &count.to_string())])?)
                .header("X-Subscription-Token", key)
                .header("Accept", "application/json"),
            SearchBackend::Tavily => self
                .client
                .post(&self.url)
                .bearer_auth(key)
                .json(&json!({"query": query, "max_results": count})),
            SearchBackend::Searxng => {
                self.client.get(with_params(&[("q", query), ("format", "json")])?)
            }
        };
        let response = request.send().await.map_err(|e| {
            ToolError::Failed(format!("web search ({:?}) failed: {e}", self.backend))
        })?;
        let status = response.status();
        let body = response.text().await.map_err(|e| {
            ToolError::Failed(format!(
                "web search ({:?}): cannot read the answer: {e}",
                self.backend
            ))
        })?;
        if !status.is_success() {
            let cut: String = body.chars().take(300).collect();
            return Err(ToolError::Failed(format!(
                "web search ({:?}) answered HTTP {status}: {cut}",
                self.backend
            )));
        }
        let value: Value = serde_json::from_str(&body).map_err(|e| {
            ToolError::Failed(format!(
                "web search ({:?}) sent something that is not JSON: {e}",
                self.backend
            ))
        })?;
        let (list, snippet_key) = match self.backend {
            SearchBackend::Brave => (&value["web"]["results"], "description"),
            SearchBackend::Tavily | SearchBackend::Searxng => (&value["results"], "content"),
        };
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .take(count as usize)
            .map(|r| Hit {
                title: r["title"].as_str().unwrap_or_default().to_string(),
                url: r["url"].as_str().unwrap_or_default().to_string(),
                snippet: strip_tags(r[snippet_key].as_str().unwrap_or_default()),
            })
            .collect())
    }
}

/// `web_search`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebSearchArgs {
    /// What to search for.
    query: String,
    /// How many results (default 5).
    #[schemars(range(min = 1, max = MAX_SEARCH_RESULTS))]
    count: Option<u64>,
}

/// Drops `<strong>`-style tags some backends put in snippets.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[async_trait]
impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Searches the web and returns the top results: title, URL and a snippet each. Use it to find \
         current information or documentation, then web_fetch a result to read it. \
         Example: {\"query\": \"tokio select cancellation safety\", \"count\": 5}"
    }

    fn input_schema(&self) -> Value {
        schema_for::<WebSearchArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WebSearchArgs = parse(input)?;
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolError::InvalidArguments("the query is empty".into()));
        }
        let count = args.count.unwrap_or(DEFAULT_SEARCH_RESULTS).clamp(1, MAX_SEARCH_RESULTS);
        let hits = tokio::select! {
            hits = self.search(query, count) => hits?,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        if hits.is_empty() {
            return Ok(ToolOutput::text(format!("no results for {query:?}")));
        }
        let text = hits
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{}. {}\n   {}\n   {}", i + 1, h.title, h.url, h.snippet))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolOutput::text(text))
    }
}
