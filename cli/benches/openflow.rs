//! The OpenFlow channel's speed: `cargo bench -p cli --bench openflow`.
//!
//! A live daemon on memory ports with an OpenFlow listener on TCP
//! (127.0.0.1), and a native client on one connection:
//!
//! - `openflow.flow_mod_rate`: 100,000 distinct flow adds, then a BARRIER;
//!   adds per second until the barrier's reply (every flow in the tables,
//!   the megaflows revalidated);
//! - `openflow.dump_flows_100k_ms`: a FLOW multipart request over those
//!   100,000 flows, until the last reply part;
//! - `openflow.packet_in_rate`: packet-ins per second delivered for
//!   table-miss traffic (the miss entry sends to the controller, no rate
//!   limit), with the drops of the bounded queues.
//!
//! Set `OPENFLOW_FLOWS` to change the size.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli::config::{Config, OpenflowConfig};
use cli::live::openflow::OfServer;
use cli::live::{Daemon, LiveLimits, OpenedPort, PortFactory};
use cli::switch::FlowFile;
use megaflow::frame::{FrameSpec, L4};
use megaflow::port::{MemoryHandle, MemoryPort, PacketMeta};
use offload::representor::{PortEvent, Representor};
use offload::Vport;
use openflow::flow::{command, NO_BUFFER};
use openflow::{Framer, Message, MpReply, MpRequest};

struct Mem {
    ports: Mutex<HashMap<String, OpenedPort>>,
}

impl PortFactory for Mem {
    fn open(&self, name: &str) -> anyhow::Result<OpenedPort> {
        self.ports
            .lock()
            .expect("lock")
            .remove(name)
            .ok_or_else(|| anyhow::anyhow!("no port {name}"))
    }
}

fn factory() -> (Arc<Mem>, MemoryHandle) {
    let mut ports = HashMap::new();
    let mut vm1 = None;
    for n in ["vm1", "vm2"] {
        let rx = MemoryPort::with_capacity(format!("{n}-rx"), 65536);
        let tx = MemoryPort::with_capacity(format!("{n}-tx"), 65536);
        if n == "vm1" {
            vm1 = Some(rx.handle());
        }
        ports.insert(
            n.to_string(),
            OpenedPort {
                rx: Box::new(rx),
                tx: Box::new(tx),
                kind: "memory".into(),
            },
        );
    }
    (
        Arc::new(Mem {
            ports: Mutex::new(ports),
        }),
        vm1.expect("vm1"),
    )
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

struct Client {
    s: TcpStream,
    f: Framer,
    buf: Vec<u8>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let deadline = Instant::now() + Duration::from_secs(5);
        let s = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("connect: {e}"),
            }
        };
        s.set_nodelay(true).expect("nodelay");
        let mut c = Client {
            s,
            f: Framer::new(),
            buf: vec![0; 1 << 16],
        };
        let hello = Message::Hello {
            bitmap: Some(openflow::bitmap_of(4)),
        };
        c.s.write_all(&hello.to_bytes(0).expect("emit"))
            .expect("hello");
        assert!(matches!(c.next(), Message::Hello { .. }));
        c
    }

    fn next(&mut self) -> Message {
        loop {
            if let Some(m) = self.f.next_message().expect("framing") {
                return openflow::parse(&m).expect("parse").1;
            }
            let n = self.s.read(&mut self.buf).expect("read");
            assert!(n > 0, "closed");
            self.f.push(&self.buf[..n]);
        }
    }
}

fn flow_add(i: u32) -> Vec<u8> {
    use openflow::oxm::ofb;
    let m = openflow::OxmMatch {
        fields: vec![
            openflow::Oxm::basic(ofb::ETH_TYPE, &0x0800u16.to_be_bytes()),
            openflow::Oxm::basic(ofb::IPV4_DST, &(0x0a00_0000 | i).to_be_bytes()),
        ],
    };
    Message::FlowMod(openflow::FlowMod {
        cookie: u64::from(i),
        cookie_mask: 0,
        table_id: 0,
        command: command::ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 100,
        buffer_id: NO_BUFFER,
        out_port: 0xffff_ffff,
        out_group: 0xffff_ffff,
        flags: 0,
        importance: 0,
        matched: m,
        instructions: vec![openflow::Instruction::ApplyActions(vec![
            openflow::Action::Output {
                port: 2,
                max_len: 0,
            },
        ])],
    })
    .to_bytes(i)
    .expect("emit")
}

fn rep(ifindex: u32, name: &str, vf: u16) -> Representor {
    Representor::emulated(ifindex, name, Vport::vf(vf))
}

fn main() {
    let flows: u32 = std::env::var("OPENFLOW_FLOWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let cfg = Config::parse(
        "[offload]\nmode = \"off\"\n[limits]\nrevalidator_interval_ms = 500\nupcall_rate = 0\n\
         [[port]]\nname = \"vm1\"\nofport = 1\nvport = \"vf0\"\n\
         [[port]]\nname = \"vm2\"\nofport = 2\nvport = \"vf1\"\n",
    )
    .expect("config");
    let table = FlowFile::parse("priority=0,actions=controller").expect("flows");
    let (f, vm1) = factory();
    let mut d = Daemon::start(&cfg, &table, f, LiveLimits::from_config(&cfg)).expect("start");
    d.apply(&PortEvent::Added(rep(10, "vm1", 0)));
    d.apply(&PortEvent::Added(rep(11, "vm2", 1)));
    let port = free_port();
    let of_cfg = OpenflowConfig {
        listen: vec![format!("ptcp:{port}")],
        packet_in_rate: 0,
        ..OpenflowConfig::default()
    };
    let pins = d.take_packet_ins();
    let queue = std::sync::Arc::clone(&pins.1);
    let of = OfServer::start(&d.core(), d.clock(), &of_cfg, pins, d.tx_ports()).expect("openflow");
    let mut c = Client::connect(port);

    // Flow adds, ended by a barrier.
    let mut bytes = Vec::with_capacity(flows as usize * 96);
    for i in 0..flows {
        bytes.extend_from_slice(&flow_add(i));
    }
    bytes.extend_from_slice(&Message::BarrierRequest.to_bytes(u32::MAX).expect("emit"));
    let started = Instant::now();
    let mut w = c.s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || w.write_all(&bytes).expect("send"));
    loop {
        match c.next() {
            Message::BarrierReply => break,
            Message::Error { error, .. } => panic!("flow add refused: {error}"),
            _ => {}
        }
    }
    let secs = started.elapsed().as_secs_f64();
    writer.join().expect("writer");
    println!(
        "bench: openflow.flow_mod_rate {:.0} flows/s",
        f64::from(flows) / secs
    );

    // Dump them all.
    let req = Message::MultipartRequest {
        flags: 0,
        body: MpRequest::Flow(openflow::FlowStatsRequest {
            table_id: 0xff,
            out_port: 0xffff_ffff,
            out_group: 0xffff_ffff,
            cookie: 0,
            cookie_mask: 0,
            matched: openflow::OxmMatch::default(),
        }),
    };
    let started = Instant::now();
    c.s.write_all(&req.to_bytes(7).expect("emit"))
        .expect("send");
    let mut got = 0usize;
    let mut parts = 0;
    loop {
        if let Message::MultipartReply {
            flags,
            body: MpReply::Flow(v),
        } = c.next()
        {
            got += v.len();
            parts += 1;
            if flags & openflow::multipart::MORE == 0 {
                break;
            }
        }
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(got, flows as usize + 1, "every flow and the miss entry");
    eprintln!("dump: {got} flows in {parts} messages");
    println!("bench: openflow.dump_flows_100k_ms {ms:.1} ms");

    // Table-miss traffic to the controller.
    let total = 200_000u32;
    let frames: Vec<Vec<u8>> = (0..1024u16)
        .map(|i| FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(i, 9)).build())
        .collect();
    let mut s2 = c.s.try_clone().expect("clone");
    s2.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let counter = std::thread::spawn(move || {
        let mut f = Framer::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        let mut last = None;
        while let Ok(k) = s2.read(&mut buf) {
            if k == 0 {
                break;
            }
            f.push(&buf[..k]);
            while let Ok(Some(m)) = f.next_message() {
                if m[1] == openflow::MsgType::PacketIn as u8 {
                    n += 1;
                    last = Some(Instant::now());
                }
            }
        }
        (n, last)
    });
    drop(c);
    let started = Instant::now();
    let mut sent = 0u32;
    while sent < total {
        if vm1.inject(&frames[(sent % 1024) as usize], PacketMeta::default()) {
            sent += 1;
        } else {
            std::thread::yield_now();
        }
    }
    let inject_secs = started.elapsed().as_secs_f64();
    let (n, last) = counter.join().expect("counter");
    // From the first packet sent to the last packet-in received.
    let span = last.map_or(inject_secs, |t| t.duration_since(started).as_secs_f64());
    eprintln!(
        "packet-ins: {n} of {total} delivered in {span:.3} s; queue drops {}",
        queue.dropped.load(std::sync::atomic::Ordering::Relaxed)
    );
    println!(
        "bench: openflow.packet_in_rate {:.0} packet_ins/s",
        n as f64 / span
    );
    of.stop();
    d.stop().expect("stop");
}
