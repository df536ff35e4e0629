//! How deep `resubmit` may nest, as Open vSwitch counts it: a resubmit to
//! a later table cannot loop and does not count against [`MAX_DEPTH`]
//! (OVN's pipeline resubmits through a hundred tables in a row), one back
//! to an earlier or the same table does; and every nesting is bounded by
//! [`MAX_NESTING`], within a thread's default stack.

use megaflow::{DpAction, FlowKey, Match, PortNo, Timestamp};
use ofproto::rule::{Instructions, OfAction, OfPort, RuleSpec};
use ofproto::xlate::{XlateError, MAX_DEPTH, MAX_NESTING};
use ofproto::{Bridge, FlowMod, Priority, TableId};

// The chain through every table is deeper than the loop limit, and the
// loop through every table meets the nesting limit before the loop limit.
const _: () = assert!(253 > MAX_DEPTH && MAX_NESTING / 254 < MAX_DEPTH);

fn now() -> Timestamp {
    Timestamp::from_millis(1)
}

fn add(br: &mut Bridge, table: u8, apply: Vec<OfAction>) {
    let mut spec = RuleSpec::new(TableId(table), Priority(1), Match::catch_all());
    spec.instructions = Instructions {
        apply,
        ..Default::default()
    };
    br.apply_flow_mod(&FlowMod::add(spec), now()).expect("rule");
}

fn out(p: u32) -> OfAction {
    OfAction::Output {
        port: OfPort::Port(PortNo(p)),
        max_len: 0,
    }
}

fn packet() -> FlowKey {
    let mut k = FlowKey::ZERO;
    k.set_in_port(1);
    k.set_eth_type(0x0800);
    k
}

/// Runs `f` on a thread with Rust's default stack for spawned threads
/// (2 MiB), as the datapath threads run translations.
fn on_default_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("no stack overflow")
}

#[test]
fn a_resubmit_through_every_table_in_order_is_not_too_deep() {
    let t = on_default_stack(|| {
        let mut br = Bridge::with_ports(1..=3);
        for t in 0..253u8 {
            add(&mut br, t, vec![OfAction::Resubmit(TableId(t + 1))]);
        }
        add(&mut br, 253, vec![out(2)]);
        br.translate(&packet(), now())
    });
    assert_eq!(t.error, None);
    assert_eq!(t.actions.as_slice(), &[DpAction::Output(PortNo(2))]);
}

#[test]
fn resubmits_back_to_an_earlier_table_stop_at_the_depth_limit() {
    // Table 0 outputs to 2 and resubmits to itself: a loop, cut after
    // MAX_DEPTH nested resubmits; what ran before stays.
    let t = on_default_stack(|| {
        let mut br = Bridge::with_ports(1..=3);
        add(&mut br, 0, vec![out(2), OfAction::Resubmit(TableId(0))]);
        br.translate(&packet(), now())
    });
    assert_eq!(t.error, Some(XlateError::TooDeep));
}

#[test]
fn a_loop_through_every_table_stops_at_the_nesting_limit_on_a_default_stack() {
    // 0 -> 1 -> ... -> 253 -> 0 -> ...: one resubmit in 254 goes back, so
    // the nesting limit, not the loop limit, ends it; the native stack
    // holds MAX_NESTING nested translations.
    let t = on_default_stack(|| {
        let mut br = Bridge::with_ports(1..=3);
        for t in 0..253u8 {
            add(&mut br, t, vec![OfAction::Resubmit(TableId(t + 1))]);
        }
        add(&mut br, 253, vec![OfAction::Resubmit(TableId(0))]);
        br.translate(&packet(), now())
    });
    assert_eq!(t.error, Some(XlateError::TooDeep));
}
