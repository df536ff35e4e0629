//! A monitor's view of tables: its updates, and a local copy they keep
//! current.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::datum::Datum;
use crate::Error;

/// A row: column name to value.
pub type Row = BTreeMap<String, Datum>;

/// One row's change (monitor protocol version 1): `old` holds the columns
/// that changed as they were (all of them for a deleted row), `new` all
/// monitored columns as they are (absent for a deleted row).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowUpdate {
    pub old: Option<Row>,
    pub new: Option<Row>,
}

/// Table name to row UUID to change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableUpdates(pub BTreeMap<String, BTreeMap<String, RowUpdate>>);

fn row_from_json(v: &Value) -> Result<Row, Error> {
    let o = v
        .as_object()
        .ok_or_else(|| Error::Datum(format!("row {v} is not an object")))?;
    o.iter()
        .map(|(k, v)| Ok((k.clone(), Datum::from_json(v)?)))
        .collect()
}

impl TableUpdates {
    pub fn from_json(v: &Value) -> Result<TableUpdates, Error> {
        let tables = v
            .as_object()
            .ok_or_else(|| Error::Datum(format!("table updates {v} are not an object")))?;
        let mut out = BTreeMap::new();
        for (table, rows) in tables {
            let rows = rows
                .as_object()
                .ok_or_else(|| Error::Datum(format!("{table}: rows are not an object")))?;
            let mut t = BTreeMap::new();
            for (uuid, u) in rows {
                let side = |k: &str| u.get(k).map(row_from_json).transpose();
                t.insert(
                    uuid.clone(),
                    RowUpdate {
                        old: side("old")?,
                        new: side("new")?,
                    },
                );
            }
            out.insert(table.clone(), t);
        }
        Ok(TableUpdates(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(BTreeMap::is_empty)
    }
}

/// The monitored tables as the server has them, kept current by applying
/// the monitor's initial contents and each update in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replica {
    tables: BTreeMap<String, BTreeMap<String, Row>>,
}

impl Replica {
    pub fn new() -> Replica {
        Replica::default()
    }

    /// Applies one update (or a monitor's initial contents).
    pub fn apply(&mut self, u: &TableUpdates) {
        for (table, rows) in &u.0 {
            let t = self.tables.entry(table.clone()).or_default();
            for (uuid, change) in rows {
                match &change.new {
                    Some(new) => {
                        t.insert(uuid.clone(), new.clone());
                    }
                    None => {
                        t.remove(uuid);
                    }
                }
            }
        }
    }

    /// The rows of `table`, by UUID.
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (&str, &Row)> + '_ {
        self.tables
            .get(table)
            .into_iter()
            .flatten()
            .map(|(u, r)| (u.as_str(), r))
    }

    pub fn row(&self, table: &str, uuid: &str) -> Option<&Row> {
        self.tables.get(table)?.get(uuid)
    }

    /// The first row of `table` whose `column` is the string `value`
    /// (a `name`, say), with its UUID.
    pub fn find(&self, table: &str, column: &str, value: &str) -> Option<(&str, &Row)> {
        self.rows(table)
            .find(|(_, r)| r.get(column).and_then(Datum::as_str) == Some(value))
    }

    /// `table`'s one row (`Open_vSwitch`'s root row), if it has exactly one.
    pub fn only(&self, table: &str) -> Option<(&str, &Row)> {
        let mut rows = self.rows(table);
        let first = rows.next()?;
        rows.next().is_none().then_some(first)
    }
}
