//! The HTTP side of `--server`: one client of a server's API, with its token, bounded waits, and
//! the API's problem answers (RFC 9457) turned into one-line errors that say what to do.

use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use shiftboss_engine::outbound::tls::{self, TlsConfig};
use std::path::PathBuf;
use std::time::Duration;

/// How long a connection to the server may take to open: a server that is up answers at once
/// on a network an operator reaches it over.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of a non-problem error body shown (a proxy's HTML page, say).
const SHOWN_BODY: usize = 200;

/// Where `--server` points and how to reach it.
#[derive(Debug, Clone)]
pub struct ServerTarget {
    pub url: String,
    pub token: String,
    /// The whole of one request, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// A PEM file of CA certificates trusted besides the system's roots, for an https:// server.
    pub ca_bundle: Option<PathBuf>,
}

/// Why a request to the server gave no answer the command can use.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("--server {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("the HTTP client for --server: {0}")]
    Setup(String),
    #[error("cannot reach the server at {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("the server at {url} did not answer within {timeout:?} (--server-timeout)")]
    Timeout { url: String, timeout: Duration },
    #[error(
        "the server refused the token: {detail} (401 {code}). Check --token or SHIFTBOSS_TOKEN: \
         `shiftboss tokens create` makes one"
    )]
    Unauthorized { code: String, detail: String },
    #[error("the token may not do this: {detail} (403 {code}). Use a token with that scope")]
    Forbidden { code: String, detail: String },
    /// The API's own error answer: its `detail` is the store's or the route's own words.
    #[error("{detail} ({code}, HTTP {status}{})", request_id.as_deref().map(|r| format!(", request {r}")).unwrap_or_default())]
    Problem { status: u16, code: String, detail: String, request_id: Option<String> },
    /// An error answer that is not a problem (a proxy in front of the server, say).
    #[error("HTTP {status} from the server at {url}: {body}")]
    Http { status: u16, url: String, body: String },
    #[error(
        "the server's answer to {what} is not what this CLI reads: {why} (is --server a shiftboss server of this version?)"
    )]
    Answer { what: String, why: String },
}

impl ClientError {
    /// Whether the server said there is no such resource.
    fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Problem { status: 404, .. })
    }
}

/// The problem body's fields that the CLI shows.
#[derive(Debug, serde::Deserialize)]
struct Problem {
    code: String,
    detail: String,
    #[serde(default)]
    request_id: Option<String>,
}

/// A client of one server's API.
pub struct ApiClient {
    base: Url,
    token: String,
    timeout: Duration,
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new(target: &ServerTarget) -> Result<ApiClient, ClientError> {
        let base = Url::parse(target.url.trim()).map_err(|_| ClientError::BadUrl(target.url.clone()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() || base.host().is_none() {
            return Err(ClientError::BadUrl(target.url.clone()));
        }
        // reqwest's rustls comes without a crypto provider in this build (the engine hands it
        // ring's); the same rustls config as the engine's outbound calls: ring, the system's
        // roots, plus the CA bundle if one is given.
        let tls = tls::client_config(&TlsConfig { ca_bundle: target.ca_bundle.clone(), ..TlsConfig::default() })
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(CONNECT_TIMEOUT.min(target.timeout))
            .timeout(target.timeout)
            // The API never redirects; a redirect would carry the token elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("shiftboss-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        Ok(ApiClient { base, token: target.token.clone(), timeout: target.timeout, http })
    }

    /// The URL of `path`'s segments (each percent-encoded: a task key may hold `/` or spaces)
    /// under the base URL's own path.
    fn url(&self, path: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend(path);
        }
        url.set_query(None);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Sends one request and reads a JSON answer of type `T`.
    pub async fn send<T: DeserializeOwned, B: Serialize + Sync + ?Sized>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let url = self.url(path, query);
        let what = format!("{method} {}", url.path());
        let mut req = self.http.request(method, url).bearer_auth(&self.token);
        if let Some(b) = body {
            let json = serde_json::to_vec(b).map_err(|e| ClientError::Setup(format!("encoding the request: {e}")))?;
            req = req.header(reqwest::header::CONTENT_TYPE, "application/json").body(json);
        }
        let res = req.send().await.map_err(|e| self.transport(&e))?;
        let status = res.status();
        let text = res.text().await.map_err(|e| self.transport(&e))?;
        if !status.is_success() {
            return Err(self.refusal(status, &text));
        }
        serde_json::from_str(&text).map_err(|e| ClientError::Answer { what, why: e.to_string() })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &[&str], query: &[(&str, String)]) -> Result<T, ClientError> {
        self.send::<T, ()>(Method::GET, path, query, None).await
    }

    /// A GET whose 404 means "none": a lookup by id or key.
    pub async fn find<T: DeserializeOwned>(
        &self,
        path: &[&str],
        query: &[(&str, String)],
    ) -> Result<Option<T>, ClientError> {
        match self.get(path, query).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn post<T: DeserializeOwned, B: Serialize + Sync + ?Sized>(
        &self,
        path: &[&str],
        query: &[(&str, String)],
        body: &B,
    ) -> Result<T, ClientError> {
        self.send(Method::POST, path, query, Some(body)).await
    }

    /// A request that got no answer: the server is down or out of reach, or too slow.
    fn transport(&self, e: &reqwest::Error) -> ClientError {
        let url = self.base.to_string();
        if e.is_timeout() {
            return ClientError::Timeout { url, timeout: self.timeout };
        }
        if let Some(sentence) = tls::describe(e) {
            return ClientError::Unreachable { url, why: sentence };
        }
        // reqwest's own text is "error sending request": the cause says what happened.
        let mut why = e.to_string();
        let mut next = std::error::Error::source(e);
        while let Some(cause) = next {
            why = cause.to_string();
            next = cause.source();
        }
        ClientError::Unreachable { url, why }
    }

    /// An error answer, explained.
    fn refusal(&self, status: StatusCode, text: &str) -> ClientError {
        let Ok(p) = serde_json::from_str::<Problem>(text) else {
            let body: String = text.chars().take(SHOWN_BODY).collect();
            return ClientError::Http { status: status.as_u16(), url: self.base.to_string(), body };
        };
        match status {
            StatusCode::UNAUTHORIZED => ClientError::Unauthorized { code: p.code, detail: p.detail },
            StatusCode::FORBIDDEN => ClientError::Forbidden { code: p.code, detail: p.detail },
            _ => ClientError::Problem {
                status: status.as_u16(),
                code: p.code,
                detail: p.detail,
                request_id: p.request_id,
            },
        }
    }
}
