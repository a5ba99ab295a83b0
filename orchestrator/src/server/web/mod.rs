//! The web page `cordon serve` serves at `/`: sessions, a session's live transcript,
//! pending permission requests with approve and deny, pause, resume, delete. Three static
//! files compiled into the binary (no build step); the page talks to the same `/v1` API as
//! any client, with a key the user types, kept in the tab's sessionStorage only.
//!
//! The routes need no key: the files hold no data. Every response forbids framing (the
//! approve button must not be clickjacked) and inline script (the transcript shows model
//! and sandbox output, set as text only; the policy is the second line of defence).

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("index.html");
const APP_JS: &str = include_str!("app.js");
const APP_CSS: &str = include_str!("app.css");

/// What every page response carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's routes: `/` redirects to `/ui/`, which serves the page and its two assets.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route(
            "/ui/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/ui/app.css",
            get(|| async { page(APP_CSS, "text/css; charset=utf-8") }),
        )
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_its_assets_from_the_paths_served() {
        assert!(INDEX_HTML.contains("src=\"/ui/app.js\""));
        assert!(INDEX_HTML.contains("href=\"/ui/app.css\""));
    }

    #[test]
    fn the_script_never_parses_data_as_html() {
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!APP_JS.contains(sink), "app.js uses {sink}");
        }
    }

    #[test]
    fn responses_forbid_framing_and_inline_script() {
        let res = page(INDEX_HTML, "text/html");
        assert_eq!(res.headers()[header::X_FRAME_OPTIONS], "DENY");
        let csp = res.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("ascii");
        assert!(csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe-inline"));
    }
}
