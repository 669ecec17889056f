//! Errors: [`ApiError`] is what a client sees (OpenAI's error shape), [`ServeError`] is what
//! starting the server can fail with.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An HTTP error in OpenAI's shape:
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type` (`invalid_request_error`, `authentication_error`, ...).
    pub kind: &'static str,
    /// The request parameter at fault (a JSON path such as `messages[2].content`).
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: Some(code),
        }
    }

    /// 400: a parameter has a value we cannot accept.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.into()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_value",
                message,
            )
        }
    }

    /// 400: a known OpenAI parameter whose value this server cannot honour.
    pub fn unsupported(param: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.into()),
            ..Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "unsupported_parameter",
                message,
            )
        }
    }

    /// 400: the body is not the JSON we expect.
    pub fn bad_body(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_json",
            message,
        )
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("request body is larger than the server's limit of {limit} bytes"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            message,
        )
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            message,
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            "method not allowed on this route",
        )
    }

    pub fn queue_full(queue: usize) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "queue_full",
            format!("the server is busy: all workers are planning and the queue ({queue} waiting) is full; retry later"),
        )
    }

    pub fn timeout(ms: u128) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout_error",
            "timeout",
            format!("planning did not finish within {ms} ms"),
        )
    }

    /// 422: the request was understood but no verified plan could be made for it.
    pub fn no_plan(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "no_verified_plan",
            message,
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message,
        )
    }

    /// A teacher answered but its trace could not be written (a full disk): a server fault.
    /// The answer is not returned, so nothing is acknowledged that is not on disk.
    pub fn harvest_failed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "harvest_failed",
            message,
        )
    }

    /// 502: the inference engine behind `--backend` failed (unreachable, an error status, a
    /// reply that is not a chat completion); the message names its address.
    pub fn bad_gateway(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "backend_failed",
            message,
        )
    }

    /// 504: the inference engine behind `--backend` did not answer in time.
    pub fn backend_timeout(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout_error",
            "backend_timeout",
            message,
        )
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "unavailable",
            message,
        )
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
}
