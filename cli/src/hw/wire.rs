//! Traffic for the conformance suite on an eSwitch behind netdevs: frames
//! enter at a VF's netdev (so the eSwitch sees them from that VF's vport)
//! and are seen where they leave, through AF_PACKET sockets: at a VF's
//! netdev (forwarded to its vport) or at the ingress VF's representor (a
//! miss, sent to the eSwitch manager). A frame seen nowhere was dropped.
//!
//! The device's backend has a *model* (the sim in the same state, as
//! [`mlx5::Mlx5Backend`] keeps): each frame also goes through the model,
//! and where what left the wire is what the model says leaves (vports and
//! bytes), the model's frames (with their registers and sampled flags,
//! which no wire shows) are the answer; where they differ, what the wire
//! showed is, and the difference is noted for the report.
//!
//! Where the backend opened its slow-path queue (`hw-check --slow-path
//! verbs`), frames to the manager come from the queue instead, each with
//! the restore tag and reg_b of its completion, and are held to the
//! model's like the rest.
//!
//! The netdevs must carry no traffic of their own while the check runs:
//! IPv6 (neighbour discovery, MLD) is turned off on them and restored
//! after, and frames to IPv6 or link-local multicast MACs are ignored.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use megaflow::port::{PacketBatch, Port};
use megaflow::Timestamp;
use netdev::{wait_readable, AfPacketPort};
use offload::conformance::{Device, NeedsPorts};
use offload::dr::{DomainId, DrBackend};
use offload::sim::{Egress, OutFrame, Output, SimBackend};
use offload::Vport;

/// A backend with a model in its state.
pub trait Modelled: DrBackend {
    fn model(&self) -> &SimBackend;

    /// Frames the backend's own side lost so far (a NIC stand-in's
    /// receive rings); a real NIC loses none the wire does not show.
    fn disturbed_frames(&self) -> u64 {
        0
    }

    /// Where the device's own dump differs from the model (none: a
    /// backend whose device is the model).
    fn differences(&self) -> Vec<String> {
        Vec::new()
    }

    /// Frames the backend's slow-path queue received since the last call
    /// (none where misses reach the representor netdevs): what went to
    /// the manager, with the restore tag and reg_b of each completion.
    fn slow_path_frames(&self, _into: &mut Vec<OutFrame>) {}
}

impl Modelled for mlx5::Mlx5Backend {
    fn model(&self) -> &SimBackend {
        mlx5::Mlx5Backend::model(self)
    }

    fn differences(&self) -> Vec<String> {
        match mlx5::Mlx5Backend::differences(self) {
            Ok(d) => d,
            Err(e) => vec![format!("the device's dump could not be read: {e}")],
        }
    }

    fn slow_path_frames(&self, into: &mut Vec<OutFrame>) {
        let r = self.poll_slow_path(usize::MAX, |a| {
            // A source the check has no port for shows as the uplink's:
            // a frame the model never sends there, so it is noted.
            let ingress = self.vport_of_metadata(a.reg_b).unwrap_or(Vport::UPLINK);
            into.push(OutFrame {
                packet: 0,
                egress: Egress::Manager { ingress },
                bytes: a.bytes.to_vec(),
                regs: [0; 8],
                sampled: false,
                tag: a.tag,
                reg_b: a.reg_b,
            });
        });
        if let Err(e) = r {
            tracing::warn!(%e, "hw-check: the slow-path queue");
        }
    }
}

/// One VF the check sends from and sees: its vport, the VF's netdev and
/// its representor's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WirePort {
    pub vport: Vport,
    pub vf: String,
    pub rep: String,
}

/// How long to wait for frames.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// After the frames the model expects have arrived, for any extra.
    pub settle: Duration,
    /// For frames the model expects that have not arrived.
    pub timeout: Duration,
    /// The most frames a second this host can send in bulk, and the most
    /// it can pace steadily (`None`: the suite's highest, 80,000 frames/s,
    /// is fine).
    pub max_frame_rate: Option<u64>,
    pub steady_frame_rate: Option<u64>,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            settle: Duration::from_millis(1),
            timeout: Duration::from_millis(100),
            max_frame_rate: None,
            steady_frame_rate: None,
        }
    }
}

/// A frame sent this long after its time counts as disturbed.
const LATE: Duration = Duration::from_millis(2);

/// How close to a frame's time pacing stops sleeping and spins.
const SPIN: Duration = Duration::from_millis(1);

struct Sockets {
    /// Per port: the VF's socket, then the representor's.
    ports: Vec<(AfPacketPort, AfPacketPort)>,
    batch: PacketBatch,
    /// The clock of frame times: the instant time 0 is, the last time.
    epoch: Instant,
    last_ns: u64,
    /// Frames sent more than [`LATE`] after their time.
    late: u64,
}

impl Sockets {
    /// Frames the receive rings had no room for, so far.
    fn rx_dropped(&self) -> u64 {
        self.ports
            .iter()
            .map(|(a, b)| a.stats().rx_dropped + b.stats().rx_dropped)
            .sum()
    }

    fn fds(&self) -> Vec<i32> {
        self.ports
            .iter()
            .flat_map(|(a, b)| [a.poll_fd(), b.poll_fd()])
            .flatten()
            .collect()
    }
}

/// The suite's [`Device`] on `B` with traffic through [`WirePort`]s: the
/// first port is the ingress, the others the suite's VFs 0, 1, ….
pub struct WireDevice<B> {
    backend: B,
    ports: Vec<WirePort>,
    timing: Timing,
    sockets: Mutex<Sockets>,
    notes: Mutex<Vec<String>>,
    /// `disable_ipv6` of each netdev before the check, to restore.
    ipv6: Vec<(String, String)>,
}

offload::delegate_backend!(WireDevice<B: Modelled>, backend);

/// Errors opening the wire: which netdev and why.
pub type WireError = netdev::NetdevError;

impl<B: Modelled> WireDevice<B> {
    /// Opens a socket on every VF netdev and representor of `ports`.
    pub fn new(backend: B, ports: Vec<WirePort>, timing: Timing) -> Result<Self, WireError> {
        let mut ipv6 = Vec::new();
        for p in &ports {
            for n in [&p.vf, &p.rep] {
                let path = format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6");
                if let Ok(old) = std::fs::read_to_string(&path) {
                    if std::fs::write(&path, "1").is_ok() {
                        ipv6.push((path, old));
                    }
                }
            }
        }
        let socks = ports
            .iter()
            .map(|p| {
                Ok((
                    AfPacketPort::open_default(&p.vf)?,
                    AfPacketPort::open_default(&p.rep)?,
                ))
            })
            .collect::<Result<Vec<_>, WireError>>();
        let dev = WireDevice {
            backend,
            ports,
            timing,
            sockets: Mutex::new(Sockets {
                ports: Vec::new(),
                batch: PacketBatch::new(),
                epoch: Instant::now(),
                last_ns: 0,
                late: 0,
            }),
            notes: Mutex::new(Vec::new()),
            ipv6,
        };
        // On error `dev` drops here and restores IPv6.
        dev.lock().ports = socks?;
        Ok(dev)
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The differences between the wire and the model noted so far.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn lock(&self) -> MutexGuard<'_, Sockets> {
        self.sockets.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn port_of(&self, v: Vport) -> usize {
        match self.ports.iter().position(|p| p.vport == v) {
            Some(i) => i,
            None => std::panic::panic_any(NeedsPorts(format!(
                "needs to send from vport {}, which is not one of the check's ports",
                v.0
            ))),
        }
    }

    /// Waits until frame time `now_ns` is due (a time not after the last
    /// one starts a new clock).
    fn pace(s: &mut Sockets, now_ns: u64) {
        if now_ns <= s.last_ns {
            s.epoch = Instant::now() - Duration::from_nanos(now_ns);
        }
        s.last_ns = now_ns;
        let due = s.epoch + Duration::from_nanos(now_ns);
        // Sleep to within a millisecond, then spin: a sleep overshoots by
        // tens of microseconds, more than the gap between frames at rate.
        let now = Instant::now();
        if now > due + LATE {
            s.late += 1;
        }
        if due > now + SPIN {
            std::thread::sleep(due - now - SPIN);
        }
        while Instant::now() < due {
            std::hint::spin_loop();
        }
    }

    /// Everything waiting on the sockets now, as frames that left.
    fn drain(&self, s: &mut Sockets, into: &mut Vec<OutFrame>) {
        let Sockets { ports, batch, .. } = s;
        for (i, (vf, rep)) in ports.iter_mut().enumerate() {
            let vport = self.ports[i].vport;
            for (sock, egress) in [
                (vf, Egress::Vport(vport)),
                (rep, Egress::Manager { ingress: vport }),
            ] {
                while sock.recv_batch(batch).unwrap_or(0) > 0 {
                    for p in batch.iter().filter(|p| !is_noise(p.data)) {
                        into.push(OutFrame {
                            packet: 0,
                            egress,
                            bytes: p.data.to_vec(),
                            regs: [0; 8],
                            sampled: false,
                            tag: 0,
                            reg_b: 0,
                        });
                    }
                }
            }
        }
        let mut queue = Vec::new();
        self.backend.slow_path_frames(&mut queue);
        into.extend(queue.into_iter().filter(|o| !is_noise(&o.bytes)));
    }

    /// Sends `frame` from port `from` and collects what leaves until
    /// `expect` frames have arrived and the settle time passed, or the
    /// timeout.
    fn exchange(&self, s: &mut Sockets, from: usize, frame: &[u8], expect: usize) -> Vec<OutFrame> {
        let mut got = Vec::new();
        self.drain(s, &mut Vec::new());
        let sent = s.ports[from].0.send_batch(&[frame], Timestamp::NEVER);
        if !matches!(sent, Ok(1)) {
            self.note(format!(
                "sending on {} failed: {sent:?}",
                self.ports[from].vf
            ));
            return got;
        }
        let start = Instant::now();
        let mut complete_at = None;
        let fds = s.fds();
        loop {
            self.drain(s, &mut got);
            let now = Instant::now();
            if got.len() >= expect && complete_at.is_none() {
                complete_at = Some(now);
            }
            let deadline = match complete_at {
                Some(t) => t + self.timing.settle,
                None => start + self.timing.timeout,
            };
            if now >= deadline {
                return got;
            }
            wait_readable(&fds, self.wait_slice(deadline - now));
        }
    }

    /// How long to sleep on the sockets for at most `left`: a slow-path
    /// queue has no descriptor to wake on, so it is polled every
    /// millisecond.
    fn wait_slice(&self, left: Duration) -> Duration {
        if self.backend.restore_path().is_ok() {
            left.min(Duration::from_millis(1))
        } else {
            left
        }
    }

    fn note(&self, n: String) {
        tracing::warn!(note = %n, "the wire and the model differ");
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).push(n);
    }
}

impl<B> Drop for WireDevice<B> {
    fn drop(&mut self) {
        for (path, old) in &self.ipv6 {
            let _ = std::fs::write(path, old);
        }
    }
}

/// Frames a host's own stack sends on an idle netdev: to IPv6 multicast
/// (33:33:…) or link-local multicast (01:80:c2:…) MACs.
fn is_noise(frame: &[u8]) -> bool {
    frame.starts_with(&[0x33, 0x33]) || frame.starts_with(&[0x01, 0x80, 0xc2])
}

/// The frames that leave a vport or the manager, in a canonical order; a
/// frame to the manager with its restore tag, which only what software
/// received can show (the model's is not taken on trust). Its reg_b is the
/// device's own vport metadata, which the model does not know: the cases
/// compare reg_b between frames of one device.
fn visible(frames: &[OutFrame]) -> Vec<(String, &[u8])> {
    let mut v: Vec<(String, &[u8])> = frames
        .iter()
        .filter(|o| !matches!(o.egress, Egress::Drop(_)))
        .map(|o| {
            let at = match o.egress {
                Egress::Manager { .. } => format!("{:?} tag {:#x}", o.egress, o.tag),
                _ => format!("{:?}", o.egress),
            };
            (at, o.bytes.as_slice())
        })
        .collect();
    v.sort();
    v
}

impl<B: Modelled> Device for WireDevice<B> {
    fn send(&self, d: DomainId, now_ns: u64, ingress: Vport, frame: &[u8]) -> Vec<OutFrame> {
        let from = self.port_of(ingress);
        let mut out = Output::new();
        self.backend
            .model()
            .process(d, now_ns, ingress, frame, &mut out);
        let want = out.frames().to_vec();
        let expected = visible(&want);
        let mut s = self.lock();
        Self::pace(&mut s, now_ns);
        let got = self.exchange(&mut s, from, frame, expected.len());
        drop(s);
        if expected == visible(&got) {
            return want;
        }
        self.note(format!(
            "a frame from vport {}: the sim sends {:?}, the wire showed {:?}",
            ingress.0,
            want.iter().map(|o| o.egress).collect::<Vec<_>>(),
            got.iter().map(|o| o.egress).collect::<Vec<_>>()
        ));
        got
    }

    fn send_many(&self, d: DomainId, ingress: Vport, frames: &[(u64, &[u8])]) -> Vec<OutFrame> {
        /// Frames sent between two reads of the receive rings.
        const DRAIN_EVERY: usize = 128;
        const DRAIN_AFTER: Duration = Duration::from_millis(2);
        let from = self.port_of(ingress);
        let mut s = self.lock();
        self.drain(&mut s, &mut Vec::new());
        let dropped = s.rx_dropped();
        let mut drained = Instant::now();
        let mut got = Vec::new();
        let mut failed = 0usize;
        for (i, (t, f)) in frames.iter().enumerate() {
            Self::pace(&mut s, *t);
            if !matches!(s.ports[from].0.send_batch(&[f], Timestamp::NEVER), Ok(1)) {
                failed += 1;
            }
            // A ring block is handed over when full or after a
            // millisecond, so a slow stream fills one block per frame:
            // read often enough in time as well as in frames.
            if i % DRAIN_EVERY == DRAIN_EVERY - 1 || drained.elapsed() >= DRAIN_AFTER {
                self.drain(&mut s, &mut got);
                drained = Instant::now();
            }
        }
        if failed > 0 {
            self.note(format!(
                "{failed} of {} sends on {} failed",
                frames.len(),
                self.ports[from].vf
            ));
        }
        // Until the wire has been quiet for the timeout.
        let fds = s.fds();
        loop {
            let before = got.len();
            let quiet = Instant::now() + self.timing.timeout;
            while got.len() == before && Instant::now() < quiet {
                wait_readable(
                    &fds,
                    self.wait_slice(quiet.saturating_duration_since(Instant::now())),
                );
                self.drain(&mut s, &mut got);
            }
            self.drain(&mut s, &mut got);
            if got.len() == before {
                break;
            }
        }
        let dropped = s.rx_dropped() - dropped;
        if dropped > 0 {
            self.note(format!(
                "the receive rings had no room for {dropped} frames"
            ));
        }
        drop(s);
        // The model counts what the device counted (at the frames' times).
        let mut out = Output::new();
        for (t, f) in frames {
            self.backend.model().process(d, *t, ingress, f, &mut out);
            out.clear();
        }
        got
    }

    /// Not from the host: a frame sent on the uplink representor leaves on
    /// the wire, and nothing here sees the far end.
    fn uplink_and_pf(&self) -> Vec<Vport> {
        Vec::new()
    }

    fn max_frame_rate(&self) -> Option<u64> {
        self.timing.max_frame_rate
    }

    fn steady_frame_rate(&self) -> Option<u64> {
        self.timing.steady_frame_rate
    }

    fn disturbed_frames(&self) -> u64 {
        let s = self.lock();
        s.rx_dropped() + s.late + self.backend.disturbed_frames()
    }

    fn model_differences(&self) -> Vec<String> {
        self.backend.differences()
    }

    fn begin_case(&self) {
        let mut s = self.lock();
        s.epoch = Instant::now();
        s.last_ns = 0;
    }

    fn vf(&self, n: u16) -> Vport {
        match self.ports.get(usize::from(n) + 1) {
            Some(p) => p.vport,
            None => std::panic::panic_any(NeedsPorts(format!(
                "needs VF {n}: the check has {} ports besides the ingress",
                self.ports.len().saturating_sub(1)
            ))),
        }
    }

    fn ingress(&self) -> Vport {
        self.ports[0].vport
    }
}
