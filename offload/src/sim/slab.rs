//! A slab of objects addressed by (index, generation) handles, so a handle
//! to a destroyed object is detected instead of reaching its successor.

/// Objects in slots; a freed slot's generation is bumped.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Stores `value`; returns (index, generation).
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            if let Some(slot) = self.slots.get_mut(i as usize) {
                slot.value = Some(value);
                return (i, slot.generation);
            }
        }
        let i = self.slots.len() as u32;
        self.slots.push(Slot {
            generation: 1,
            value: Some(value),
        });
        (i, 1)
    }

    /// The object of a live handle.
    #[inline]
    pub(crate) fn get(&self, index: u32, generation: u32) -> Option<&T> {
        self.slots
            .get(index as usize)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.value.as_ref())
    }

    /// The object of a live handle, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        self.slots
            .get_mut(index as usize)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.value.as_mut())
    }

    /// The object in a slot, whatever its generation (for internal links
    /// that are kept consistent by reference counts).
    #[inline]
    pub(crate) fn at(&self, index: u32) -> Option<&T> {
        self.slots
            .get(index as usize)
            .and_then(|s| s.value.as_ref())
    }

    /// The object in a slot, mutably.
    #[inline]
    pub(crate) fn at_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots
            .get_mut(index as usize)
            .and_then(|s| s.value.as_mut())
    }

    /// Removes a live handle's object.
    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self
            .slots
            .get_mut(index as usize)
            .filter(|s| s.generation == generation)?;
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Live objects with their (index, generation), in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (i as u32, s.generation, v)))
    }

    /// Live objects.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
