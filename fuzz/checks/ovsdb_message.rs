//! Fuzz target for what an OVSDB server sends (`ovsdb`): a stream of JSON
//! values as the client's reader takes them. No input may panic; a value
//! read as a datum writes back (`to_json`) to JSON that reads as the same
//! datum; a monitor reply or `update` notification that reads applies to a
//! replica, which then holds each row's new contents (or not, deleted).
//!
//! Input: arbitrary bytes.

use ovsdb::{Datum, Replica, TableUpdates};
use serde_json::Value;

fn round_trip(d: &Datum) {
    let back = Datum::from_json(&d.to_json())
        .unwrap_or_else(|e| panic!("{d:?} written as {} does not read: {e}", d.to_json()));
    assert_eq!(&back, d, "{}", d.to_json());
}

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let mut replica = Replica::new();
    for v in serde_json::Deserializer::from_slice(data)
        .into_iter::<Value>()
        .take(64)
    {
        let Ok(v) = v else { return };
        if let Ok(d) = Datum::from_json(&v) {
            round_trip(&d);
        }
        let updates = match v.get("method").and_then(Value::as_str) {
            Some("update") => v.get("params").and_then(|p| p.get(1)),
            _ => v.get("result"),
        };
        let Some(Ok(u)) = updates.map(TableUpdates::from_json) else {
            continue;
        };
        replica.apply(&u);
        for (table, rows) in &u.0 {
            for (uuid, change) in rows {
                assert_eq!(
                    replica.row(table, uuid),
                    change.new.as_ref(),
                    "{table} {uuid}"
                );
                for d in change
                    .old
                    .iter()
                    .chain(&change.new)
                    .flat_map(|r| r.values())
                {
                    round_trip(d);
                }
            }
        }
    }
}
