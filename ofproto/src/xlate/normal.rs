//! The NORMAL action: a VLAN-aware MAC-learning L2 switch.
//!
//! The packet's VLAN comes from its ingress port (an access port's VLAN,
//! or a trunk's outer VID, 0 when untagged; a tagged frame on an access port
//! is dropped). Its source is learned (returned in the translation, applied
//! by the caller). Broadcast, multicast and unknown unicast flood to every
//! up, flooding port in the VLAN except the input; a known destination goes
//! to its port, or nowhere when that is the input port. Each output is
//! tagged as its port wants: untagged on access ports and for VLAN 0, tagged
//! with the VLAN on trunks.
//!
//! Wildcards: in_port, eth_src (so a new source always reaches the slow path
//! and is learned, as in Open vSwitch), eth_dst, and the VLAN bits read. The
//! result also depends on the MAC table, so the translation says so and the
//! megaflow is tied to the table's generation.

use megaflow::key::VLAN_VID_MASK;
use megaflow::{Field, PortNo};

use super::Ctx;
use crate::bridge::{Bridge, VlanMode};
use crate::mac::MacLearn;

impl<'a> Ctx<'a> {
    pub(super) fn normal(&mut self) {
        self.uses_mac_table = true;
        let br: &'a Bridge = self.br;
        let in_port = PortNo(self.read(Field::InPort) as u32);
        let Some(inp) = br.ports.get(in_port) else {
            self.note(|| format!("NORMAL: input port {in_port} unknown, dropped"));
            return;
        };
        let tag = self.vlan_current();
        let vlan = match (inp.vlan, tag) {
            (VlanMode::Access(_), Some(_)) => {
                self.note(|| "NORMAL: tagged frame on an access port, dropped".into());
                return;
            }
            (VlanMode::Access(v), None) => v,
            (VlanMode::Trunk, t) => t.unwrap_or(0),
        };
        let src = self.read(Field::EthSrc) as u64;
        let dst = self.read(Field::EthDst) as u64;
        if !is_multicast(src) {
            self.learned.push(MacLearn {
                bridge: self.bi,
                vlan,
                mac: src,
                port: in_port,
            });
        }
        if is_multicast(dst) {
            self.note(|| format!("NORMAL: multicast/broadcast, flooding VLAN {vlan}"));
            return self.normal_flood(vlan, in_port);
        }
        match br.mac.lookup(vlan, dst, self.now) {
            Some(p) if p == in_port => {
                self.note(|| "NORMAL: destination is on the input port, dropped".into());
            }
            Some(p) => {
                self.note(|| format!("NORMAL: learned destination on port {p}"));
                self.normal_output(p, vlan);
            }
            None => {
                self.note(|| format!("NORMAL: unknown destination, flooding VLAN {vlan}"));
                self.normal_flood(vlan, in_port);
            }
        }
    }

    fn normal_flood(&mut self, vlan: u16, in_port: PortNo) {
        let br: &'a Bridge = self.br;
        for p in br.ports.iter() {
            if p.no != in_port && p.flood && p.up {
                self.normal_output(p.no, vlan);
            }
        }
    }

    /// Outputs to `port` with the tagging it wants for `vlan`; nothing when
    /// the port is not in the VLAN.
    fn normal_output(&mut self, port: PortNo, vlan: u16) {
        let Some(info) = self.br.ports.get(port) else {
            return;
        };
        let tagged = match info.vlan {
            VlanMode::Access(v) if v != vlan => return,
            VlanMode::Access(_) => false,
            VlanMode::Trunk => vlan != 0,
        };
        let cur = self.vlan_current();
        match (tagged, cur) {
            (false, Some(_)) => self.vlan_pop(),
            (true, Some(v)) if v == vlan => {}
            (true, _) => self.vlan_set(VLAN_VID_MASK, vlan),
            (false, None) => {}
        }
        self.output_port(port);
    }
}

/// The group bit of an Ethernet address (48 bits in the low bits).
fn is_multicast(mac: u64) -> bool {
    mac & (1 << 40) != 0
}
