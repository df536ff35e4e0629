//! Packets the translation tests share.

use megaflow::FlowKey;

/// A TCP packet on port 1 between two fixed MACs, TTL 64.
pub fn tcp(src: u32, dst: u32, sport: u16, dport: u16) -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1);
    k.set_eth_src(0x0200_0000_0001);
    k.set_eth_dst(0x0200_0000_0002);
    k.set_eth_type(0x0800);
    k.set_ip_proto(6);
    k.set_ip_ttl(64);
    k.set_ipv4_src(src.into());
    k.set_ipv4_dst(dst.into());
    k.set_tp_src(sport.into());
    k.set_tp_dst(dport.into());
    k
}
