//! Meters: the OpenFlow meter table, in the datapaths at once and in the
//! device at the offload thread's next step (whoever changes a meter never
//! calls the device).

use std::collections::BTreeMap;

use megaflow::offload::{FlowOffload, NotOffloaded};
use megaflow::{DpAction, DpCommand, MeterId, Timestamp};

use super::{Datapaths, Pipeline};
use parking_lot::RwLockReadGuard;

use crate::meter::{MeterSpec, MeterTable};

/// Meter changes on their way to the device, and what it refused. The
/// software meters change at once (the shared [`MeterTable`]); the device
/// learns of a change at the offload thread's next step, so whoever
/// changes a meter never calls the device.
#[derive(Default)]
pub(super) struct MeterSync {
    /// Changes the device has not been told of yet, oldest first.
    pending: Vec<(MeterId, Option<MeterSpec>)>,
    /// Meters the device refused, and why.
    refused: BTreeMap<MeterId, NotOffloaded>,
}

impl MeterSync {
    /// What the device said to meter `id`'s change.
    fn answered(&mut self, id: MeterId, r: Result<(), NotOffloaded>) {
        match r {
            Ok(()) => {
                self.refused.remove(&id);
            }
            Err(e) => {
                self.refused.insert(id, e);
            }
        }
    }
}

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// The meters (read-locked: handlers charge them meanwhile).
    pub fn meters(&self) -> RwLockReadGuard<'_, MeterTable> {
        self.shared.meters.read()
    }

    /// Why the hardware refused a meter, if it did.
    pub fn meter_error(&self, id: MeterId) -> Option<&NotOffloaded> {
        self.meter_sync.refused.get(&id)
    }

    /// Adds or changes a meter: in software at once, in hardware at the
    /// offload thread's next step (offloaded flows that use it move to the
    /// new band, hitless).
    pub fn set_meter(&mut self, spec: MeterSpec) {
        let shared = self.shared.meters.write().set(spec);
        self.dps.send(None, &DpCommand::SetMeter(shared));
        self.meter_sync.pending.push((spec.id, Some(spec)));
    }

    /// Deletes a meter; flows naming it drop from now on (in software at
    /// once, in hardware once the offload thread has refreshed their
    /// rules).
    pub fn remove_meter(&mut self, id: MeterId) -> Option<MeterSpec> {
        let spec = self.shared.meters.write().remove(id)?;
        self.dps.send(None, &DpCommand::DeleteMeter(id));
        self.meter_sync.pending.push((id, None));
        Some(spec)
    }

    /// The offload thread's side of meter changes: the device's meters,
    /// then the offloaded flows that use them.
    pub(super) fn apply_meter_changes(&mut self) {
        for (id, spec) in std::mem::take(&mut self.meter_sync.pending) {
            match spec {
                Some(spec) => {
                    let r = self.offload.set_meter(id, Some(spec.band()));
                    self.meter_sync.answered(id, r);
                    self.refresh_meter_users(id, Timestamp::NEVER);
                }
                None => {
                    self.refresh_meter_users(id, Timestamp::NEVER);
                    // A meter gone from the device is no longer refused,
                    // whatever the device said.
                    let _ = self.offload.set_meter(id, None);
                    self.meter_sync.answered(id, Ok(()));
                }
            }
        }
    }

    /// Re-installs the offloaded flows whose actions name meter `id`.
    fn refresh_meter_users(&mut self, id: MeterId, now: Timestamp) {
        let users: Vec<u32> = self
            .reg
            .iter()
            .filter_map(|(i, _, d)| d.actions.contains(&DpAction::Meter(id)).then_some(i))
            .collect();
        for idx in users {
            if self.meta(idx).is_some_and(|m| m.hw.is_some()) {
                self.rehome(idx, now);
            } else if let Some(m) = self.meta_mut(idx) {
                m.eligible = true;
            }
        }
    }
}
