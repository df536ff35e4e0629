//! A packet sent to a patch port: translation goes on in the peer's
//! bridge ([`crate::bridges`]), as Open vSwitch's `patch_port_output`.

use megaflow::key::{REGS, TUNNEL_FIELDS};
use megaflow::{Field, PortNo};

use super::{Ctx, XlateError, MAX_DEPTH, MAX_NESTING};
use crate::bridge::Bridge;
use crate::bridges::BridgeNo;
use crate::TableId;

impl<'a> Ctx<'a> {
    /// The packet is in bridge `bi` (`br`) from here on.
    pub(super) fn enter(&mut self, bi: BridgeNo, br: &'a Bridge) {
        self.bi = bi;
        self.br = br;
    }

    /// Sends the packet through patch port `port` to its `peer`: received
    /// there with metadata, registers, tunnel and tracking state cleared
    /// and an empty action set, it runs the peer bridge's pipeline (or
    /// NORMAL when that bridge is fail-open); then the sender goes on with
    /// the packet and state it had. A freeze in the peer's pipeline (a
    /// `ct()`, a `dp_hash` group, a pause) is finished there: the sender's
    /// actions still run now. A crossing counts as a resubmit back to an
    /// earlier table (two bridges can send a packet back and forth).
    pub(super) fn patch_output(&mut self, port: PortNo, peer: Option<PortNo>) {
        let Some(peer) = peer else {
            return;
        };
        let root: &'a Bridge = self.root;
        let (pb, peer_br) = root.home(peer);
        match peer_br.ports.get(peer) {
            Some(info) if info.patch == Some(port) => {}
            Some(_) => {
                self.note(|| format!("output:{port} skipped: patch peer {peer} is not its peer"));
                return;
            }
            None => {
                self.note(|| format!("output:{port} skipped: patch peer {peer} is on no bridge"));
                return;
            }
        }
        if self.loops >= MAX_DEPTH || self.depth >= MAX_NESTING {
            self.fail(XlateError::TooDeep);
            return;
        }
        let (from_bi, from_br) = (self.bi, self.br);
        let action_set = std::mem::take(&mut self.action_set);
        let (current, ct_live) = (self.current, self.ct_live);
        self.note(|| format!("output:{port}: patch to port {peer} of {pb}"));
        self.on_copy(|ctx| {
            ctx.loops += 1;
            ctx.stack.clear();
            for &f in REGS.iter().chain(&[Field::Metadata]).chain(&TUNNEL_FIELDS) {
                ctx.set_field(f, 0, f.layout().max_value());
            }
            ctx.set_field(Field::InPort, u128::from(peer.0), u128::from(u32::MAX));
            ctx.clear_ct_fields();
            ctx.enter(pb, peer_br);
            if peer_br.fail_open() {
                ctx.normal();
            } else {
                ctx.run_chain(TableId(0), true);
            }
            ctx.finish_freezing();
            ctx.loops -= 1;
        });
        self.enter(from_bi, from_br);
        self.action_set = action_set;
        self.current = current;
        self.ct_live = ct_live;
    }
}
