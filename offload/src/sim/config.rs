//! What the simulated device is (its capacities and vports) and the
//! summary of what is programmed in it. Leaf of the sim: the device's
//! state reads these, nothing here reads the state.

use crate::prm::SourcePortMode;
use crate::Vport;

/// Capacities and identity of the simulated device.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The vports the eSwitch has (dest_vport to another is EINVAL).
    pub vports: Vec<Vport>,
    /// Rules per table (steering memory).
    pub max_rules_per_table: usize,
    /// Matchers per table.
    pub max_matchers_per_table: usize,
    /// Flow counters over all bulks.
    pub max_counters: usize,
    /// Largest bulk, as log2 of its size.
    pub max_bulk_log: u8,
    /// Flow meters.
    pub max_meters: usize,
    /// Actions in one modify-header object.
    pub max_modify_actions: usize,
    /// The longest encap header (`max_encap_header_size`): 128 bytes, as
    /// ConnectX-5 and -6 report (VXLAN over IPv6 is 70; Geneve options
    /// beyond the rest stay in software).
    pub max_encap_header_size: usize,
    /// Seed of the samplers' random numbers.
    pub seed: u64,
    /// How the firmware marks the source vport: with vport metadata, reg_c_0
    /// starts as the vport's tag; `misc.source_port` is always filled.
    pub source_port: SourcePortMode,
    /// Whether software receives the eSwitch manager's packets on the
    /// slow-path queue that reads restore tags (the `verbs` port: a
    /// completion per packet with the flow tag and reg_b), or on the
    /// representor netdevs, which carry none (`false`).
    pub restore_path: bool,
}

impl Default for SimConfig {
    /// A ConnectX-6 Dx-like eSwitch with the PF, 127 VFs, the ECPF and the
    /// uplink; vport metadata in the upper half of reg_c_0, as Linux sets
    /// it up.
    fn default() -> Self {
        let mut vports = vec![Vport::PF, Vport::ECPF, Vport::UPLINK];
        vports.extend((0..127).filter_map(Vport::vf));
        SimConfig {
            vports,
            max_rules_per_table: 1 << 24,
            max_matchers_per_table: 4096,
            max_counters: 1 << 24,
            max_bulk_log: 16,
            max_meters: 1 << 16,
            max_modify_actions: 64,
            max_encap_header_size: 128,
            seed: 0x5eed_5eed,
            source_port: SourcePortMode::REG_C0_UPPER_16,
            restore_path: true,
        }
    }
}

/// A summary of the programmed objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub domains: usize,
    pub tables: usize,
    pub matchers: usize,
    pub rules: usize,
    pub actions: usize,
    pub counter_bulks: usize,
    pub counters: usize,
    pub meters: usize,
    pub restore_rules: usize,
}
