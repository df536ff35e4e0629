//! Flow counters: bulks, the counter of each flow, and the poll that reads
//! them a bulk at a time.

use megaflow::offload::{HwId, HwStats, NotOffloaded};

use crate::dr::{ActionId, ActionSpec, CounterBulkId, CounterValue, DrBackend};

use super::{backend, OffloadManager};

pub(super) struct Bulk {
    pub(super) id: CounterBulkId,
    /// Offset → the flow counting there.
    owner: Vec<Option<HwId>>,
    /// Offset → the counter's value when its flow got it (device counters
    /// are not reset; a reused counter starts where the last flow left it).
    base: Vec<CounterValue>,
    /// Offsets given back, with the flow whose final value the next query
    /// reports (none for a failed install's), then records as the base.
    releasing: Vec<(u32, Option<HwId>)>,
}

fn delta(v: CounterValue, base: CounterValue) -> HwStats {
    HwStats {
        packets: v.packets.wrapping_sub(base.packets),
        bytes: v.bytes.wrapping_sub(base.bytes),
    }
}

impl<B: DrBackend> OffloadManager<B> {
    /// A counter action for a new flow.
    pub(super) fn counter(&mut self, id: HwId) -> Result<(ActionId, (usize, u32)), NotOffloaded> {
        if self.free_counters.is_empty() {
            let log = self.config.bulk_log;
            let bulk = self
                .backend
                .counter_bulk_alloc(log)
                .map_err(backend("counter_bulk_alloc"))?;
            let n = 1u32 << log;
            let bi = self.bulks.len();
            self.bulks.push(Bulk {
                id: bulk,
                owner: vec![None; n as usize],
                base: vec![CounterValue::default(); n as usize],
                releasing: Vec::new(),
            });
            self.free_counters.extend((0..n).rev().map(|o| (bi, o)));
        }
        let Some((bi, offset)) = self.free_counters.pop() else {
            return Err(NotOffloaded::TableFull);
        };
        let Some(bulk) = self.bulks.get_mut(bi) else {
            return Err(NotOffloaded::TableFull);
        };
        let a = match self.backend.action_create(
            self.domain,
            ActionSpec::FlowCounter {
                bulk: bulk.id,
                offset,
            },
        ) {
            Ok(a) => a,
            Err(e) => {
                self.free_counters.push((bi, offset));
                return Err(backend("action_create")(e));
            }
        };
        if let Some(o) = bulk.owner.get_mut(offset as usize) {
            *o = Some(id);
        }
        Ok((a, (bi, offset)))
    }

    /// Stops reporting a counter whose flow is removed but whose rule is
    /// still in the device; it stays out of use until released.
    pub(super) fn hide_counter(&mut self, (bi, offset): (usize, u32)) {
        if let Some(o) = self
            .bulks
            .get_mut(bi)
            .and_then(|b| b.owner.get_mut(offset as usize))
        {
            *o = None;
        }
    }

    /// Gives a counter back: it is reused after the next query has read
    /// its final value, which that poll reports under `report`.
    pub(super) fn release_counter(
        &mut self,
        counter: ActionId,
        (bi, offset): (usize, u32),
        report: Option<HwId>,
    ) {
        let _ = self.backend.action_destroy(counter);
        self.hide_counter((bi, offset));
        if let Some(b) = self.bulks.get_mut(bi) {
            b.releasing.push((offset, report));
        }
    }

    /// [`FlowOffload::poll`](megaflow::offload::FlowOffload::poll): every
    /// bulk in turn ([`poll_bulk`](Self::poll_bulk)).
    pub(super) fn poll_counters(
        &mut self,
        out: &mut Vec<(HwId, HwStats)>,
    ) -> Result<(), NotOffloaded> {
        let mut next = 0;
        while !self.poll_counters_some(&mut next, usize::MAX, out)? {}
        Ok(())
    }

    /// [`FlowOffload::poll_some`](megaflow::offload::FlowOffload::poll_some):
    /// the bulks from `*next` on until `max` counters are reported (zombies
    /// reaped first, at the first bulk).
    pub(super) fn poll_counters_some(
        &mut self,
        next: &mut usize,
        max: usize,
        out: &mut Vec<(HwId, HwStats)>,
    ) -> Result<bool, NotOffloaded> {
        if *next == 0 && !self.zombies.is_empty() {
            let _ = self.reap();
        }
        let mut reported = 0;
        while *next < self.bulks.len() && reported < max {
            let before = out.len();
            self.poll_bulk(*next, out)?;
            reported += (out.len() - before).max(1);
            *next += 1;
        }
        let done = *next >= self.bulks.len();
        if done {
            *next = 0;
        }
        Ok(done)
    }

    /// One bulk: queried, then its live flows' counts, and once each the
    /// final counts of its flows removed since its last query. A failed
    /// query reports nothing and releases nothing (the final values of
    /// removed flows wait for a query that succeeds).
    fn poll_bulk(&mut self, bi: usize, out: &mut Vec<(HwId, HwStats)>) -> Result<(), NotOffloaded> {
        self.queries.resize_with(self.bulks.len(), Vec::new);
        let (Some(bulk), Some(q)) = (self.bulks.get_mut(bi), self.queries.get_mut(bi)) else {
            return Ok(());
        };
        self.backend
            .counter_bulk_query(bulk.id, q)
            .map_err(backend("counter_bulk_query"))?;
        for ((owner, v), base) in bulk.owner.iter().zip(q.iter()).zip(&bulk.base) {
            if let Some(id) = owner {
                out.push((*id, delta(*v, *base)));
            }
        }
        for (offset, report) in bulk.releasing.drain(..) {
            if let (Some(b), Some(v)) = (bulk.base.get_mut(offset as usize), q.get(offset as usize))
            {
                if let Some(id) = report {
                    out.push((id, delta(*v, *b)));
                }
                *b = *v;
            }
            self.free_counters.push((bi, offset));
        }
        Ok(())
    }
}
