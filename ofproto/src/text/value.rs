//! Lexical pieces of the flow syntax: numbers, Ethernet and IP addresses
//! with their masks, port names, and the splitting of comma/space separated
//! lists with nested parentheses.
//!
//! Nothing here knows about fields: a function reads one piece of text and
//! returns a value or a [`ValueError`] saying why not; the caller, who knows
//! which field or action the text was given for, turns that into a
//! [`ParseError`] naming both. Every function takes untrusted text and
//! never panics: slicing happens only at positions of ASCII characters found
//! by `find`/`split_once`.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{ParseError, ParseErrorKind};
use crate::rule::OfPort;

/// Why a value did not parse.
#[derive(Debug)]
pub(crate) enum ValueError {
    /// The text is not a value of the expected form; the reason in words.
    Bad(String),
    /// A `/N` prefix longer than the address.
    PrefixTooLong { prefix: u32, family: &'static str },
}

impl ValueError {
    pub(crate) fn bad(reason: impl Into<String>) -> Self {
        ValueError::Bad(reason.into())
    }

    /// The error for `value` given for the field or action `field`.
    pub(crate) fn at(self, value: &str, field: &str) -> ParseError {
        match self {
            ValueError::Bad(reason) => ParseError::new(
                value,
                ParseErrorKind::BadValue {
                    field: field.to_string(),
                    reason,
                },
            ),
            ValueError::PrefixTooLong { prefix, family } => {
                ParseError::new(value, ParseErrorKind::PrefixTooLong { prefix, family })
            }
        }
    }
}

pub(crate) type VResult<T> = Result<T, ValueError>;

/// A decimal or `0x` hexadecimal number.
pub(crate) fn number(s: &str) -> VResult<u128> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(ValueError::bad("not a number"));
    }
    u128::from_str_radix(digits, radix).map_err(|_| ValueError::bad("number too large"))
}

/// A number no larger than `max`.
pub(crate) fn number_max(s: &str, max: u128) -> VResult<u128> {
    let n = number(s)?;
    if n > max {
        return Err(ValueError::bad(format!("out of range (at most {max})")));
    }
    Ok(n)
}

/// `VALUE/MASK` split at the first `/`.
/// Bytes as `HH.HH...` (`note:`, `controller(userdata=...)`); empty
/// parts are skipped.
pub(crate) fn dotted_hex(text: &str) -> VResult<Vec<u8>> {
    text.split('.')
        .filter(|p| !p.is_empty())
        .map(|part| {
            (part.len() == 2)
                .then(|| u8::from_str_radix(part, 16).ok())
                .flatten()
                .ok_or_else(|| ValueError::bad(format!("{part:?} is not a hex byte")))
        })
        .collect()
}

/// `HH.HH...` of `bytes`.
pub(crate) fn to_dotted_hex(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.join(".")
}

pub(crate) fn split_mask(s: &str) -> (&str, Option<&str>) {
    match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    }
}

/// An Ethernet address `aa:bb:cc:dd:ee:ff` (one or two hex digits a byte).
pub(crate) fn mac(s: &str) -> VResult<u128> {
    let mut out = 0u128;
    let mut n = 0;
    for part in s.split(':') {
        let ok = (1..=2).contains(&part.len()) && part.chars().all(|c| c.is_ascii_hexdigit());
        let byte = if ok {
            u8::from_str_radix(part, 16).ok()
        } else {
            None
        };
        match byte {
            Some(b) if n < 6 => out = (out << 8) | u128::from(b),
            _ => return Err(ValueError::bad("not an Ethernet address")),
        }
        n += 1;
    }
    if n != 6 {
        return Err(ValueError::bad("not an Ethernet address"));
    }
    Ok(out)
}

/// A dotted-quad IPv4 address.
pub(crate) fn ipv4(s: &str) -> VResult<u128> {
    s.parse::<Ipv4Addr>()
        .map(|a| u128::from(u32::from(a)))
        .map_err(|_| ValueError::bad("not an IPv4 address"))
}

/// An IPv4 mask: `/N` prefix length or a dotted-quad mask.
pub(crate) fn ipv4_mask(s: &str) -> VResult<u128> {
    if s.contains('.') {
        return ipv4(s).map_err(|_| ValueError::bad("not an IPv4 mask"));
    }
    let n = prefix_len(s, 32, "IPv4")?;
    Ok(if n == 0 {
        0
    } else {
        u128::from(u32::MAX << (32 - n))
    })
}

/// An IPv6 address in any form `std` accepts (`::1`, `fe80::1`, ...).
pub(crate) fn ipv6(s: &str) -> VResult<u128> {
    s.parse::<Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| ValueError::bad("not an IPv6 address"))
}

/// An IPv6 mask: `/N` prefix length or an address-shaped mask.
pub(crate) fn ipv6_mask(s: &str) -> VResult<u128> {
    if s.contains(':') {
        return ipv6(s).map_err(|_| ValueError::bad("not an IPv6 mask"));
    }
    let n = prefix_len(s, 128, "IPv6")?;
    Ok(if n == 0 { 0 } else { u128::MAX << (128 - n) })
}

fn prefix_len(s: &str, max: u32, family: &'static str) -> VResult<u32> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) {
        return Err(ValueError::bad(format!("not an {family} mask")));
    }
    match s.parse::<u32>() {
        Ok(n) if n <= max => Ok(n),
        Ok(prefix) => Err(ValueError::PrefixTooLong { prefix, family }),
        Err(_) => Err(ValueError::PrefixTooLong {
            prefix: u32::MAX,
            family,
        }),
    }
}

/// A reserved port by its `ovs-ofctl` name, in any case.
pub(crate) fn reserved_port(s: &str) -> Option<OfPort> {
    const NAMES: [(&str, OfPort); 8] = [
        ("in_port", OfPort::InPort),
        ("all", OfPort::All),
        ("flood", OfPort::Flood),
        ("controller", OfPort::Controller),
        ("local", OfPort::Local),
        ("normal", OfPort::Normal),
        ("any", OfPort::Any),
        ("none", OfPort::Any),
    ];
    NAMES
        .iter()
        .find(|(name, _)| s.eq_ignore_ascii_case(name))
        .map(|&(_, p)| p)
}

/// A port as actions and `out_port` name it: a reserved name or an OpenFlow
/// 1.3 port number.
pub(crate) fn port(s: &str) -> VResult<OfPort> {
    if let Some(p) = reserved_port(s) {
        return Ok(p);
    }
    let n = number(s).map_err(|_| ValueError::bad("not a port number or name"))?;
    u32::try_from(n)
        .ok()
        .and_then(OfPort::from_number)
        .ok_or_else(|| ValueError::bad("not a valid OpenFlow port number"))
}

/// The 32-bit number of a port in a match (`in_port=LOCAL`, `in_port=3`).
pub(crate) fn port_number(s: &str) -> VResult<u128> {
    match reserved_port(s) {
        Some(p) => Ok(u128::from(p.number())),
        None => number_max(s, u128::from(u32::MAX))
            .map_err(|_| ValueError::bad("not a port number or name")),
    }
}

/// Splits a list at commas and white space outside parentheses:
/// `a,b(c,d) e` gives `a`, `b(c,d)`, `e`. Empty items are dropped. Errors
/// (with the reason) on unbalanced parentheses.
pub(crate) fn split_list(s: &str) -> Result<Vec<&str>, &'static str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or("unbalanced parentheses: \")\" without \"(\"")?;
            }
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if i > start {
                    items.push(&s[start..i]);
                }
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses: \"(\" without \")\"");
    }
    if start < s.len() {
        items.push(&s[start..]);
    }
    Ok(items)
}

/// The index of the `)` that closes the `(` at byte `open` of `s`.
pub(crate) fn matching_paren(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices().skip_while(|&(i, _)| i < open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `key=value` pairs of a parenthesised argument list
/// (`port=2,max_len=100`); a bare key has no value.
pub(crate) fn key_values(s: &str) -> Result<Vec<(&str, Option<&str>)>, &'static str> {
    Ok(split_list(s)?
        .into_iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        })
        .collect())
}

#[cfg(test)]
#[path = "tests/value.rs"]
mod tests;
