//! Fuzz target for the control socket's requests
//! (`cli::control::parse_request`, one JSON object per line): any text is
//! parsed or refused with a message, never a panic; a request that parses
//! serializes and parses back to the same request.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.

use cli::control::parse_request;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match parse_request(s) {
        Ok(req) => {
            let text = serde_json::to_string(&req).expect("a request serializes");
            assert_eq!(parse_request(&text).ok(), Some(req), "{text}");
        }
        Err(e) => assert!(e.starts_with("bad request: "), "{e}"),
    }
}
