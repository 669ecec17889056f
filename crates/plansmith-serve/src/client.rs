//! A small HTTP/1.1 client over one kept-alive connection: enough for the tests and for
//! `plansmith bench serve`, without another HTTP stack.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
    #[error("bad request: {0}")]
    Request(#[from] axum::http::Error),
}

/// A response, body read whole.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One connection, reopened when the server closes it.
pub struct Client {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Extra headers sent with every request (e.g. `authorization`).
    pub headers: Vec<(String, String)>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Client {
            addr,
            sender: None,
            headers: Vec::new(),
        }
    }

    pub fn with_bearer(mut self, key: &str) -> Self {
        self.headers
            .push(("authorization".into(), format!("Bearer {key}")));
        self
    }

    async fn connect(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, ClientError> {
        let stale = self.sender.as_ref().is_none_or(|s| s.is_closed());
        if stale {
            let stream = tokio::net::TcpStream::connect(self.addr)
                .await
                .map_err(|source| ClientError::Connect {
                    addr: self.addr,
                    source,
                })?;
            let _ = stream.set_nodelay(true);
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.sender = Some(sender);
        }
        Ok(self.sender.as_mut().expect("connected above"))
    }

    /// Send one request; `extra` headers are added to the client's own.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        extra: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Result<HttpResponse, ClientError> {
        let body: Bytes = body.into();
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        if !body.is_empty() {
            builder = builder.header("content-type", "application/json");
        }
        for (k, v) in &self.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        for (k, v) in extra {
            builder = builder.header(*k, *v);
        }
        let req = builder.body(Full::new(body))?;
        let sender = self.connect().await?;
        sender.ready().await?;
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                self.sender = None;
                return Err(e.into());
            }
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }

    pub async fn get(&mut self, path: &str) -> Result<HttpResponse, ClientError> {
        self.send(Method::GET, path, &[], Bytes::new()).await
    }

    pub async fn post_json(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<HttpResponse, ClientError> {
        self.send(Method::POST, path, &[], body.to_string()).await
    }
}
