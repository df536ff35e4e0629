//! `learn(...)` in a translation ([`crate::learn`]).

use megaflow::DpAction;

use super::{Ctx, LEARN_NOT_RUN};
use crate::bridge::Bridge;
use crate::learn::Src;

impl<'a> Ctx<'a> {
    /// Builds the flow `learn` adds from the packet as the pipeline sees it
    /// now (the fields it reads become the megaflow's), for the slow path
    /// to add once the translation is done ([`crate::Translation::learned_flows`]).
    /// A form this switch keeps but does not run keeps its megaflow in
    /// software, with the reason.
    pub(super) fn learn(&mut self, learn2: bool, body: &[u8]) {
        let br: &'a Bridge = self.br;
        let range =
            |h, ofs, n, tlv: &_| crate::channel::convert::range_from_wire(h, ofs, n, tlv).ok();
        match crate::learn::decode(learn2, body, br.tlv(), range) {
            Ok(l) => {
                let fm = l.flow(|s| match &s.src {
                    Src::Field(r) => self.read_bits(r.field, r.mask()) >> r.ofs,
                    Src::Immediate(v) => *v,
                });
                let (t, p) = (fm.rule.table, fm.rule.priority.0);
                self.note(|| format!("learn: a flow in table {t} at priority {p}"));
                self.learned_flows.push((self.bi, fm));
            }
            Err(why) => {
                self.note(|| why);
                if !self.out.contains(&DpAction::SoftwareOnly(LEARN_NOT_RUN)) {
                    self.out.push(DpAction::SoftwareOnly(LEARN_NOT_RUN));
                }
            }
        }
    }
}
