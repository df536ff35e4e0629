//! The Direct Rule conformance suite ([`conformance`]) on the software
//! eSwitch: one test per case, each on a fresh [`SimBackend`].

mod conformance;
mod support;

use conformance::Device;
use offload::dr::DomainId;
use offload::sim::{OutFrame, Output, SimBackend, SimConfig};
use offload::Vport;

impl Device for SimBackend {
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame> {
        let mut out = Output::new();
        self.process(d, now_ns, ingress, frame, &mut out);
        out.frames().to_vec()
    }
}

/// The default device: a ConnectX-6 Dx-like eSwitch.
fn sim() -> SimBackend {
    SimBackend::default()
}

/// A device with small capacities, for the ENOSPC cases.
fn small(config: impl FnOnce(&mut SimConfig)) -> SimBackend {
    let mut c = SimConfig::default();
    config(&mut c);
    SimBackend::new(c)
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                conformance::$name(&sim());
            }
        )*
    };
}

cases!(
    duplicate_rule_eexist_when_disallowed,
    duplicate_rule_eexist_in_root,
    duplicates_allowed_oldest_answers,
    value_outside_mask_einval,
    match_sizes_and_criteria_einval,
    ip_version_rules,
    drop_with_destination_eopnotsupp,
    dest_vport_domain_and_vport,
    table_levels,
    busy_table_with_matchers,
    busy_matcher_with_rules,
    busy_action_in_use,
    busy_table_led_to,
    busy_counter_bulk,
    busy_domain,
    stale_handles_einval,
    push_vlan_tpid,
    modify_header_bad_bytes,
    action_drop,
    action_default_miss,
    action_dest_vport,
    action_dest_table,
    action_dest_array,
    action_counter,
    action_meter,
    action_sampler,
    action_push_pop_vlan,
    action_modify_header,
    counters_exact_under_random_traffic,
    meter_rate_conformance,
    sampler_ratio_within_bounds,
);

#[test]
fn enospc_rules_per_table() {
    const MAX: usize = 10;
    let dev = small(|c| c.max_rules_per_table = MAX);
    conformance::enospc_rules_per_table(&dev, MAX);
}

#[test]
fn enospc_counters() {
    const MAX: usize = 96;
    let dev = small(|c| c.max_counters = MAX);
    conformance::enospc_counters(&dev, MAX);
}

#[test]
fn enospc_meters() {
    const MAX: usize = 4;
    let dev = small(|c| c.max_meters = MAX);
    conformance::enospc_meters(&dev, MAX);
}
