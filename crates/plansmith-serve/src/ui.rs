//! The playground page at `/ui`: plain HTML, CSS and JavaScript embedded in the binary.
//!
//! No framework and no build step: the page is one form, one result view and one list, which
//! plain DOM code covers in a few hundred lines, and nothing has to be fetched or vendored to
//! build it. The page talks to the server through the public API only (`/v1/plan`,
//! `/v1/tools`, `/v1/models`), sending the API key the user types, so it gets no access a
//! client would not have.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/style.css");

/// Only this server's own files run and are reached: no inline script, no other origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// Whether a path is one of the page's own files (served without the API key: they hold no
/// data, and the page asks for the key before it calls the API).
pub fn is_page(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

/// Add the page's routes to the API's.
pub fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route(
            "/ui",
            get(|| async { file(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { file(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/ui/style.css",
            get(|| async { file(STYLE, "text/css; charset=utf-8") }),
        )
}

fn file(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
