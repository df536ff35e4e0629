//! The Direct Rule conformance suite, written against [`DrBackend`] so
//! every backend runs the same cases: the `sim` in `cargo test`, the `mlx5`
//! backend on a ConnectX through `eswitchd hw-check` (and `cargo test` when
//! `ESWITCH_MLX5_DEVICE` names a device).
//!
//! Each case is a `pub fn` generic over [`Device`]: a backend plus a way to
//! put a frame into the eSwitch and see what leaves. A case builds its own
//! domain and objects, so cases share nothing but the device. Cases that
//! need a capacity (ENOSPC) take it as a parameter: the runner knows the
//! device it built. A case states what it expects with `assert!`, like a
//! test; [`run`] runs each under `catch_unwind`, so one failing case is a
//! line in the [`Report`] and the next case still runs.
//!
//! What is covered:
//! - every documented error with its errno (duplicates, value outside the
//!   mask, IP version, action sequences, domains and vports, table levels,
//!   objects in use, capacities, stale handles, VLAN and modify-header
//!   arguments);
//! - each action on real frames;
//! - counters exact under random traffic against an independent model;
//! - meter rates within 1% over one second at several CIRs;
//! - sampler ratios within 5 sigma.
//!
//! Assumptions about the device: it has the PF and the VFs that
//! [`Device::vf`] names, and no vport [`NO_SUCH_VPORT`]; `send` returns
//! every frame one input frame produced, with the metadata registers at the
//! end of its walk and the sampled flag of sampler copies.

use crate::dr::meter::{Color, MeterMode, MeterParams};
use crate::dr::modify::{encode_list, ModifyField, ModifyOp};
use crate::dr::{
    ActionId, ActionSpec, CounterValue, DomainId, DomainType, DrBackend, Errno, FlowMeterAttr,
    FlowSamplerAttr, RuleId, SyncFlags, TableId,
};
use crate::prm::PrmField;
use crate::sim::{DropCause, Egress, OutFrame, Output, SimBackend};
use crate::Vport;
use megaflow::frame::{FrameSpec, L4};

pub use support::*;

/// A backend the suite can also send frames through.
pub trait Device: DrBackend {
    /// Puts `frame` into the eSwitch at `ingress` at time `now_ns` (from
    /// the start of the case) and returns every frame that leaves
    /// (forwarded, dropped, to the manager, sampled copies), in the order
    /// the device emits them.
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame>;

    /// Puts every `(now_ns, frame)` into the eSwitch at `ingress`, paced
    /// by the times, and returns every frame that left for a vport or the
    /// manager, in order. For rates and ratios, where which input made
    /// which output does not matter and a device on a wire cannot wait
    /// for each frame's fate. The registers and the sampled flag are only
    /// meaningful where [`Device::send`]'s are per frame: on the sim.
    fn send_many(&self, d: DomainId, ingress: Vport, frames: &[(u64, &[u8])]) -> Vec<OutFrame> {
        frames
            .iter()
            .flat_map(|(t, f)| self.send(d, *t, ingress, f))
            .filter(|o| !matches!(o.egress, Egress::Drop(_)))
            .collect()
    }

    /// The uplink and the PF, where the device can send from them and see
    /// what leaves on them; a device reached through VF netdevs cannot.
    fn uplink_and_pf(&self) -> Vec<Vport> {
        vec![Vport::UPLINK, Vport::PF]
    }

    /// The most frames a second the device can be fed in bulk (`None`: no
    /// limit the suite's rates reach); the sampler case paces at it.
    fn max_frame_rate(&self) -> Option<u64> {
        None
    }

    /// The most frames a second that can be sent at a pace steady enough
    /// for a meter (a stall of a few milliseconds turns into a burst); the
    /// meter case offers 2×CIR and leaves out the CIRs above it.
    fn steady_frame_rate(&self) -> Option<u64> {
        None
    }

    /// Called before each case: a device that paces frames by their times
    /// starts a new clock.
    fn begin_case(&self) {}

    /// Where the device's own view differs from the model it is held to
    /// (a backend with a model reads its device's dump); empty for a
    /// device that is its own model, as the sim is.
    fn model_differences(&self) -> Vec<String> {
        Vec::new()
    }

    /// Frames disturbed on the way so far, not by the eSwitch: lost
    /// (receive rings that overflowed on a busy machine) or sent well
    /// after their time (a meter sees a burst). A case that fails while
    /// frames were disturbed says nothing about the device: hw-check runs
    /// it again.
    fn disturbed_frames(&self) -> u64 {
        0
    }

    /// The vport of the suite's VF `n` (cases use 0..=15). A device with
    /// fewer ports panics with [`NeedsPorts`], which skips the case.
    fn vf(&self, n: u16) -> Vport {
        support::vf(n)
    }

    /// The vport most cases send from; distinct from every [`Device::vf`].
    fn ingress(&self) -> Vport {
        support::ingress()
    }
}

/// The sim is a device: frames go through [`SimBackend::process`].
impl Device for SimBackend {
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame> {
        let mut out = Output::new();
        self.process(d, now_ns, ingress, frame, &mut out);
        out.frames().to_vec()
    }
}

/// The panic payload of a device asked for a port it does not have: the
/// runner reports the case as skipped, with this reason.
#[derive(Debug)]
pub struct NeedsPorts(pub String);

// ---------------------------------------------------------------------------
// Helpers.

/// A vport number the eSwitch does not have.
pub const NO_SUCH_VPORT: Vport = Vport(0x7000);

/// An FDB domain whose root sends everything to a table at level 1.
struct Pipe {
    d: DomainId,
    root: TableId,
    t1: TableId,
}

fn pipe<D: Device>(dev: &D) -> Pipe {
    let d = domain(dev, DomainType::Fdb);
    let root = table(dev, d, 0);
    let t1 = table(dev, d, 1);
    let to_t1 = action(dev, d, ActionSpec::DestTable(t1));
    let m = matcher(dev, root, 0, &buf());
    rule(dev, m, &buf(), &[to_t1]);
    Pipe { d, root, t1 }
}

/// Sends a frame that must leave exactly once.
#[track_caller]
fn one<D: Device>(dev: &D, d: DomainId, from: Vport, frame: &[u8]) -> OutFrame {
    let mut out = dev.send(d, 0, from, frame);
    assert_eq!(out.len(), 1, "one frame in, one out: {out:?}");
    out.pop().expect("one frame")
}

/// Where a frame from the default ingress goes.
#[track_caller]
fn egress<D: Device>(dev: &D, d: DomainId, frame: &[u8]) -> Egress {
    one(dev, d, dev.ingress(), frame).egress
}

fn manager<D: Device>(dev: &D) -> Egress {
    Egress::Manager {
        ingress: dev.ingress(),
    }
}

mod actions;
mod ct;
mod errors;
mod reformat;
mod restore;
mod run;
pub mod support;
mod tracked;

pub use actions::*;
pub use ct::*;
pub use errors::*;
pub use reformat::*;
pub use restore::*;
pub use run::*;
pub use tracked::Tracked;
