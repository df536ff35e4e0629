//! The operations of a transaction (RFC 7047 §5.2), as JSON for
//! [`Client::transact`](crate::Client::transact).

use serde_json::{json, Value};

use crate::datum::Datum;

fn row(columns: &[(&str, Datum)]) -> Value {
    Value::Object(
        columns
            .iter()
            .map(|(c, d)| ((*c).to_string(), d.to_json()))
            .collect(),
    )
}

/// Inserts a row; `name` lets later operations of the transaction refer
/// to it (`Atom::NamedUuid`).
pub fn insert(table: &str, columns: &[(&str, Datum)], name: Option<&str>) -> Value {
    let mut o = json!({"op": "insert", "table": table, "row": row(columns)});
    if let Some(n) = name {
        o["uuid-name"] = json!(n);
    }
    o
}

/// Sets `columns` in the rows matching every condition of `conds`.
pub fn update(table: &str, conds: Vec<Value>, columns: &[(&str, Datum)]) -> Value {
    json!({"op": "update", "table": table, "where": conds, "row": row(columns)})
}

/// Applies `mutations` ([`mutation`]) to the matching rows.
pub fn mutate(table: &str, conds: Vec<Value>, mutations: Vec<Value>) -> Value {
    json!({"op": "mutate", "table": table, "where": conds, "mutations": mutations})
}

pub fn delete(table: &str, conds: Vec<Value>) -> Value {
    json!({"op": "delete", "table": table, "where": conds})
}

/// The matching rows' `columns` (all when empty).
pub fn select(table: &str, conds: Vec<Value>, columns: &[&str]) -> Value {
    let mut o = json!({"op": "select", "table": table, "where": conds});
    if !columns.is_empty() {
        o["columns"] = json!(columns);
    }
    o
}

/// Words for the server's log with the transaction.
pub fn comment(text: &str) -> Value {
    json!({"op": "comment", "comment": text})
}

/// A condition: `column function value` (`==`, `!=`, `includes`, ...).
pub fn cond(column: &str, function: &str, value: &Datum) -> Value {
    json!([column, function, value.to_json()])
}

/// The row with UUID `uuid`.
pub fn uuid_is(uuid: &str) -> Value {
    json!(["_uuid", "==", ["uuid", uuid]])
}

/// A mutation: `column mutator value` (`insert`, `delete`, `+=`, ...).
pub fn mutation(column: &str, mutator: &str, value: &Datum) -> Value {
    json!([column, mutator, value.to_json()])
}
