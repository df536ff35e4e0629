//! Meters: the OpenFlow meter table, in the datapaths at once and in the
//! device at the offload thread's next step (whoever changes a meter never
//! calls the device).

use megaflow::offload::{FlowOffload, NotOffloaded};
use megaflow::{DpAction, DpCommand, MeterId, Timestamp};

use super::{Datapaths, Pipeline};
use parking_lot::RwLockReadGuard;

use crate::meter::{MeterSpec, MeterTable};

impl<O: FlowOffload, D: Datapaths> Pipeline<O, D> {
    /// The meters (read-locked: handlers charge them meanwhile).
    pub fn meters(&self) -> RwLockReadGuard<'_, MeterTable> {
        self.shared.meters.read()
    }

    /// Why the hardware refused a meter, if it did.
    pub fn meter_error(&self, id: MeterId) -> Option<&NotOffloaded> {
        self.hw_meter_errors.get(&id)
    }

    /// Adds or changes a meter: in software at once, in hardware at the
    /// offload thread's next step (offloaded flows that use it move to the
    /// new band, hitless).
    pub fn set_meter(&mut self, spec: MeterSpec) {
        let shared = self.shared.meters.write().set(spec);
        self.dps.send(None, &DpCommand::SetMeter(shared));
        self.meter_changes.push((spec.id, Some(spec)));
    }

    /// Deletes a meter; flows naming it drop from now on (in software at
    /// once, in hardware once the offload thread has refreshed their
    /// rules).
    pub fn remove_meter(&mut self, id: MeterId) -> Option<MeterSpec> {
        let spec = self.shared.meters.write().remove(id)?;
        self.dps.send(None, &DpCommand::DeleteMeter(id));
        self.meter_changes.push((id, None));
        Some(spec)
    }

    /// The offload thread's side of meter changes: the device's meters,
    /// then the offloaded flows that use them.
    pub(super) fn apply_meter_changes(&mut self) {
        for (id, spec) in std::mem::take(&mut self.meter_changes) {
            match spec {
                Some(spec) => {
                    match self.offload.set_meter(id, Some(spec.band())) {
                        Ok(()) => {
                            self.hw_meter_errors.remove(&id);
                        }
                        Err(e) => {
                            self.hw_meter_errors.insert(id, e);
                        }
                    }
                    self.refresh_meter_users(id, Timestamp::NEVER);
                }
                None => {
                    self.refresh_meter_users(id, Timestamp::NEVER);
                    let _ = self.offload.set_meter(id, None);
                    self.hw_meter_errors.remove(&id);
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
