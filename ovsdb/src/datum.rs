//! OVSDB values (RFC 7047 §5.1): atoms, and datums that are an atom, a
//! set or a map, in their JSON forms.
//!
//! A set of exactly one element may be written as the bare atom, and is
//! read either way; [`Datum::to_json`] writes a one-element set as the
//! atom, as Open vSwitch does, so what is read back compares equal.

use std::fmt;

use serde_json::{json, Value};

use crate::Error;

/// One value of an atomic type.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    /// A row's UUID, as `["uuid", "..."]`.
    Uuid(String),
    /// A row inserted by the same transaction, by the name its `insert`
    /// gave it (`["named-uuid", "..."]`).
    NamedUuid(String),
}

impl Atom {
    pub fn from_json(v: &Value) -> Result<Atom, Error> {
        match v {
            Value::Bool(b) => Ok(Atom::Boolean(*b)),
            Value::String(s) => Ok(Atom::String(s.clone())),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Ok(Atom::Integer(i)),
                None => n
                    .as_f64()
                    .map(Atom::Real)
                    .ok_or_else(|| Error::Datum(format!("number {n} out of range"))),
            },
            Value::Array(a) => match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("uuid"), Some(Value::String(u)), 2) => {
                    check_uuid(u)?;
                    Ok(Atom::Uuid(u.clone()))
                }
                (Some("named-uuid"), Some(Value::String(u)), 2) => Ok(Atom::NamedUuid(u.clone())),
                _ => Err(Error::Datum(format!("{v} is not an atom"))),
            },
            _ => Err(Error::Datum(format!("{v} is not an atom"))),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u]),
            Atom::NamedUuid(u) => json!(["named-uuid", u]),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_uuid(&self) -> Option<&str> {
        match self {
            Atom::Uuid(u) => Some(u),
            _ => None,
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Integer(i) => write!(f, "{i}"),
            Atom::Real(r) => write!(f, "{r}"),
            Atom::Boolean(b) => write!(f, "{b}"),
            Atom::String(s) => write!(f, "{s:?}"),
            Atom::Uuid(u) | Atom::NamedUuid(u) => f.write_str(u),
        }
    }
}

/// A UUID's text: 8-4-4-4-12 hex digits.
fn check_uuid(u: &str) -> Result<(), Error> {
    let groups: Vec<&str> = u.split('-').collect();
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(Error::Datum(format!("{u:?} is not a UUID")))
    }
}

/// A column's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    /// A set: zero or more atoms (a scalar column holds one).
    Set(Vec<Atom>),
    /// A map: key/value pairs.
    Map(Vec<(Atom, Atom)>),
}

impl Datum {
    /// One atom (a scalar column's value).
    pub fn atom(a: Atom) -> Datum {
        Datum::Set(vec![a])
    }

    pub fn string(s: impl Into<String>) -> Datum {
        Datum::atom(Atom::String(s.into()))
    }

    pub fn integer(i: i64) -> Datum {
        Datum::atom(Atom::Integer(i))
    }

    pub fn boolean(b: bool) -> Datum {
        Datum::atom(Atom::Boolean(b))
    }

    pub fn uuid(u: impl Into<String>) -> Datum {
        Datum::atom(Atom::Uuid(u.into()))
    }

    /// The empty set (an optional column with no value).
    pub fn empty() -> Datum {
        Datum::Set(Vec::new())
    }

    /// A map of strings (`other_config`, `external_ids`, `options`).
    pub fn string_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Datum {
        Datum::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Atom::String(k.into()), Atom::String(v.into())))
                .collect(),
        )
    }

    pub fn from_json(v: &Value) -> Result<Datum, Error> {
        if let Value::Array(a) = v {
            match (a.first().and_then(Value::as_str), a.get(1), a.len()) {
                (Some("set"), Some(Value::Array(items)), 2) => {
                    return items
                        .iter()
                        .map(Atom::from_json)
                        .collect::<Result<_, _>>()
                        .map(Datum::Set)
                }
                (Some("map"), Some(Value::Array(pairs)), 2) => {
                    return pairs
                        .iter()
                        .map(|p| match p.as_array().map(Vec::as_slice) {
                            Some([k, v]) => Ok((Atom::from_json(k)?, Atom::from_json(v)?)),
                            _ => Err(Error::Datum(format!("map pair {p} is not [key, value]"))),
                        })
                        .collect::<Result<_, _>>()
                        .map(Datum::Map)
                }
                _ => {}
            }
        }
        Atom::from_json(v).map(Datum::atom)
    }

    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(v) if v.len() == 1 => v[0].to_json(),
            Datum::Set(v) => json!(["set", v.iter().map(Atom::to_json).collect::<Vec<_>>()]),
            Datum::Map(m) => json!([
                "map",
                m.iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// The one atom of a scalar (or a one-element set).
    pub fn as_atom(&self) -> Option<&Atom> {
        match self {
            Datum::Set(v) if v.len() == 1 => v.first(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        self.as_atom().and_then(Atom::as_str)
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.as_atom().and_then(Atom::as_i64)
    }

    pub fn as_bool(&self) -> Option<bool> {
        self.as_atom().and_then(Atom::as_bool)
    }

    /// The atoms of a set (empty for a map).
    pub fn set(&self) -> &[Atom] {
        match self {
            Datum::Set(v) => v,
            Datum::Map(_) => &[],
        }
    }

    /// The value of `key` in a map of strings.
    pub fn get(&self, key: &str) -> Option<&Atom> {
        match self {
            Datum::Map(m) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            Datum::Set(_) => None,
        }
    }

    /// The UUIDs of a set of references.
    pub fn uuids(&self) -> impl Iterator<Item = &str> + '_ {
        self.set().iter().filter_map(Atom::as_uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn atom() -> impl Strategy<Value = Atom> {
        prop_oneof![
            any::<i64>().prop_map(Atom::Integer),
            (-1e12f64..1e12)
                .prop_filter("a real", |r| r.fract() != 0.0)
                .prop_map(Atom::Real),
            any::<bool>().prop_map(Atom::Boolean),
            ".{0,12}".prop_map(Atom::String),
            any::<u128>().prop_map(|u| {
                let h = format!("{u:032x}");
                Atom::Uuid(format!(
                    "{}-{}-{}-{}-{}",
                    &h[..8],
                    &h[8..12],
                    &h[12..16],
                    &h[16..20],
                    &h[20..]
                ))
            }),
            "[a-z]{1,8}".prop_map(Atom::NamedUuid),
        ]
    }

    fn datum() -> impl Strategy<Value = Datum> {
        prop_oneof![
            prop::collection::vec(atom(), 0..5).prop_map(Datum::Set),
            prop::collection::vec((atom(), atom()), 0..5).prop_map(Datum::Map),
        ]
    }

    proptest! {
        #[test]
        fn a_datum_reads_back_as_written(d in datum()) {
            prop_assert_eq!(Datum::from_json(&d.to_json()).expect("reads"), d);
        }
    }

    #[test]
    fn the_forms_of_rfc_7047() {
        let u = "550e8400-e29b-41d4-a716-446655440000";
        let d = Datum::from_json(&json!(["set", [["uuid", u], ["named-uuid", "p"]]])).expect("set");
        assert_eq!(d.uuids().collect::<Vec<_>>(), vec![u]);
        assert_eq!(d.set()[1], Atom::NamedUuid("p".into()));
        let m = Datum::from_json(&json!([
            "map",
            [["remote_ip", "198.18.0.2"], ["key", "flow"]]
        ]))
        .expect("map");
        assert_eq!(m.get("key").and_then(Atom::as_str), Some("flow"));
        // A one-element set is written as its atom.
        assert_eq!(Datum::integer(7).to_json(), json!(7));
        assert_eq!(
            Datum::from_json(&json!(["set", [7]])).expect("set"),
            Datum::integer(7)
        );
        assert_eq!(Datum::empty().to_json(), json!(["set", []]));
        // What is not a datum says what it was.
        for (bad, says) in [
            (json!(["uuid", "not-a-uuid"]), "is not a UUID"),
            (json!(["map", [["k"]]]), "is not [key, value]"),
            (json!({"a": 1}), "is not an atom"),
            (json!(["set", [["set", []]]]), "is not an atom"),
            (json!(null), "is not an atom"),
        ] {
            let e = Datum::from_json(&bad).expect_err("bad").to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
