//! Fuzz target for the OpenFlow connection state machine: byte streams as
//! a controller (or an attacker) would send them, in arbitrary cuts, never
//! panic it; whatever it answers is well-formed OpenFlow 1.3.
//!
//! Input: byte 0 chooses the cut size (1..=64); the rest is the stream,
//! sent after a valid HELLO half of the time (byte 0's top bit) so the
//! open state is reached.

use std::time::{Duration, Instant};

use megaflow::Timestamp;
use ofproto::channel::{Connection, OfSwitch, Roles};
use ofproto::Bridge;
use openflow::{bitmap_of, parse, Desc, Features, Framer, Message, OfpError, Port};

struct Sw {
    roles: Roles,
    bridge: Bridge,
}

impl OfSwitch for Sw {
    fn features(&self) -> Features {
        Features::default()
    }
    fn desc(&self) -> Desc {
        Desc::default()
    }
    fn ports(&self) -> Vec<Port> {
        Vec::new()
    }
    fn roles(&mut self) -> &mut Roles {
        &mut self.roles
    }
    type BridgeRef<'a> = &'a mut Bridge;
    fn bridge(&mut self) -> &mut Bridge {
        &mut self.bridge
    }
    type BridgeView<'a> = &'a Bridge;
    fn bridge_view(&mut self) -> &Bridge {
        &self.bridge
    }
    fn now(&self) -> Timestamp {
        Timestamp(1)
    }
    fn tables_synced(&self) -> u64 {
        u64::MAX
    }
    fn request_sync(&mut self) {}
    fn packet_out(&mut self, _: u32, _: &[ofproto::OfAction], _: &[u8]) -> Result<(), OfpError> {
        Ok(())
    }

    fn resume(
        &mut self,
        _: u32,
        _: u32,
        _: &[(megaflow::Field, u128, u128)],
        _: &[u8],
    ) -> Result<(), OfpError> {
        Ok(())
    }
}

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let [sel, rest @ ..] = data else {
        return;
    };
    let mut sw = Sw {
        roles: Roles::default(),
        bridge: Bridge::new(),
    };
    let now = Instant::now();
    let mut c = Connection::new(1, now, Duration::from_secs(5));
    let mut stream = Vec::new();
    if sel & 0x80 != 0 {
        // 1.3, or (bit 6) 1.5.
        let hello = Message::Hello {
            bitmap: Some(bitmap_of(if sel & 0x40 != 0 { 6 } else { 4 })),
        };
        stream.extend_from_slice(&hello.to_bytes(1).expect("hello"));
    }
    stream.extend_from_slice(rest);
    let cut = usize::from(sel & 0x3f) + 1;
    let mut out = Vec::new();
    for chunk in stream.chunks(cut) {
        c.receive(chunk, &mut sw, now);
        out.extend_from_slice(&c.take_output());
    }
    let mut f = Framer::new();
    f.push(&out);
    while let Some(m) = f.next_message().expect("the switch frames what it sends") {
        parse(&m).expect("the switch sends valid OpenFlow of the version agreed");
    }
}
