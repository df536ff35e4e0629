//! Fuzz target for `eswitch.toml` (`cli::config::Config::parse`): any UTF-8
//! text must be accepted or refused without a panic; an accepted config
//! yields its pipeline settings and its checked ports (names, OpenFlow
//! numbers and vports unique) again.
//!
//! Input: arbitrary bytes; non-UTF-8 inputs are skipped.

use cli::config::Config;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cfg) = Config::parse(s) else {
        return;
    };
    cfg.pipeline()
        .unwrap_or_else(|e| panic!("{s:?}: accepted, then pipeline() fails: {e:#}"));
    let ports = cfg
        .port_specs()
        .unwrap_or_else(|e| panic!("{s:?}: accepted, then port_specs() fails: {e:#}"));
    assert_eq!(ports.len(), cfg.ports.len());
    for (i, p) in ports.iter().enumerate() {
        for q in &ports[i + 1..] {
            assert!(
                p.name != q.name && p.no != q.no && p.vport != q.vport,
                "{s:?}: ports clash: {p:?} {q:?}"
            );
        }
    }
}
