//! The readable explanation of a translation (`eswitchctl trace`, like
//! `ovs-appctl ofproto/trace`): each table visited with the rule hit, the
//! actions run, notes on skipped steps, then the final megaflow with which
//! fields are exact, masked and wildcarded.

use std::fmt::Write as _;

use megaflow::{Field, FlowKey, Mask, Match};

use super::Translation;
use crate::rule::{Instructions, OfAction};
use crate::table::{Rule, RuleRef};
use crate::text;
use crate::{Cookie, Priority, RuleId, TableId};

/// A rule as a trace shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracedRule {
    pub rule: RuleRef,
    pub priority: Priority,
    pub cookie: Cookie,
    pub matched: Match,
}

impl TracedRule {
    pub(super) fn new(bridge: crate::BridgeNo, table: TableId, id: RuleId, r: &Rule) -> Self {
        TracedRule {
            rule: RuleRef {
                bridge,
                table,
                id,
                uid: r.uid,
            },
            priority: r.spec.priority,
            cookie: r.spec.cookie,
            matched: r.spec.matched,
        }
    }
}

/// One step of a traced translation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A table lookup and the rule it found (`None`: table miss, drop).
    Table {
        depth: u32,
        table: TableId,
        rule: Option<Box<TracedRule>>,
    },
    /// An action run.
    Action { depth: u32, action: OfAction },
    /// Something skipped or decided, in words.
    Note { depth: u32, text: String },
}

fn indent(depth: u32) -> String {
    "    ".repeat(depth as usize)
}

/// Nonzero fields of a key, as a match (what "Flow:" prints).
fn key_as_match(key: &FlowKey) -> Match {
    let mut mask = Mask::EMPTY;
    for &f in Field::ALL {
        if key.field(f) != 0 {
            mask.set_exact(f);
        }
    }
    Match::new(key, &mask)
}

impl Translation {
    /// The whole explanation, for the key that was translated.
    pub fn explain(&self, key: &FlowKey) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "Flow: {}", text::format_match(&key_as_match(key)));
        let _ = writeln!(s);
        for ev in &self.trace {
            match ev {
                TraceEvent::Table {
                    depth,
                    table,
                    rule: Some(r),
                } => {
                    let m = text::format_match(&r.matched);
                    let m = if m.is_empty() { "(any)".into() } else { m };
                    let _ = writeln!(
                        s,
                        "{}{:>2}. {m}, priority {}, cookie {:#x}",
                        indent(*depth),
                        table.0,
                        r.priority.0,
                        r.cookie.0
                    );
                }
                TraceEvent::Table {
                    depth,
                    table,
                    rule: None,
                } => {
                    let _ = writeln!(s, "{}{:>2}. No match: drop.", indent(*depth), table.0);
                }
                TraceEvent::Action { depth, action } => {
                    let i = Instructions {
                        apply: vec![action.clone()],
                        ..Default::default()
                    };
                    let _ = writeln!(s, "{}    {}", indent(*depth), text::format_instructions(&i));
                }
                TraceEvent::Note { depth, text } => {
                    let _ = writeln!(s, "{}    >> {text}", indent(*depth));
                }
            }
        }
        let _ = writeln!(s);
        if self.final_flow == *key {
            let _ = writeln!(s, "Final flow: unchanged");
        } else {
            let _ = writeln!(
                s,
                "Final flow: {}",
                text::format_match(&key_as_match(&self.final_flow))
            );
        }
        let mf = text::format_match(&self.megaflow(key));
        let _ = writeln!(s, "Megaflow: {}", if mf.is_empty() { "(any)" } else { &mf });
        let acts = if self.actions.is_empty() {
            "drop".to_string()
        } else {
            let v: Vec<String> = self.actions.iter().map(ToString::to_string).collect();
            v.join(",")
        };
        let _ = writeln!(s, "Datapath actions: {acts}");
        let _ = writeln!(s, "Fields: {}", describe_mask(&self.mask));
        if self.uses_mac_table {
            let _ = writeln!(
                s,
                "Depends on the MAC learning table (generation {}).",
                self.generations.mac
            );
        }
        if let Some(e) = &self.error {
            let _ = writeln!(s, "Translation failed: {e}; the packet is dropped.");
        }
        s
    }
}

/// "exact: a, b; masked: c/0x.., d/0x..; wildcarded: everything else".
pub fn describe_mask(mask: &Mask) -> String {
    let mut exact = Vec::new();
    let mut masked = Vec::new();
    for f in mask.fields() {
        if mask.is_exact(f) {
            exact.push(f.name().to_string());
        } else {
            masked.push(format!("{}/{:#x}", f.name(), mask.field(f)));
        }
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "exact: {}; masked: {}; wildcarded: everything else",
        list(&exact),
        list(&masked)
    )
}
