//! sFlow datagrams as a decoder reads them: the structure word by word,
//! and Wireshark's own sFlow dissector (`tshark`, when installed) on a
//! capture of them.

use megaflow::frame::{FrameSpec, L4};

use super::*;

pub(crate) fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A flow sample of `frame` (its first `header_bytes`).
fn flow_sample(
    frame: &[u8],
    header_bytes: usize,
    source: u32,
    rate: u32,
    pool: u32,
    drops: u32,
    output: u32,
) -> FlowSample {
    FlowSample {
        source,
        rate,
        pool,
        drops,
        input: source,
        output,
        frame_length: frame.len() as u32,
        header: frame[..frame.len().min(header_bytes)].to_vec(),
    }
}

fn sampled_frame() -> Vec<u8> {
    FrameSpec::ipv4(0xc612_0001, 0xc612_0002, L4::udp(4000, 5000)).build()
}

fn datagram() -> Vec<u8> {
    let mut a = Agent::new(Ipv4Addr::new(198, 18, 0, 254), 7);
    let f = sampled_frame();
    a.datagram(
        1234,
        &[
            Sample::Flow(flow_sample(&f, 128, 11, 1000, 123_000, 2, 12)),
            Sample::Counters(IfCounters {
                index: 11,
                speed: 25_000_000_000,
                admin_up: true,
                oper_up: true,
                in_octets: 9_000,
                in_packets: 150,
                in_discards: 1,
                out_octets: 6_000,
                out_packets: 100,
                out_discards: 0,
            }),
        ],
    )
}

#[test]
fn a_datagram_is_laid_out_as_the_spec_says() {
    let d = datagram();
    assert_eq!(word(&d, 0), 5, "version");
    assert_eq!(word(&d, 4), 1, "IPv4 agent");
    assert_eq!(&d[8..12], &[198, 18, 0, 254]);
    assert_eq!((word(&d, 12), word(&d, 16), word(&d, 20)), (7, 1, 1234));
    assert_eq!(word(&d, 24), 2, "two samples");
    // The flow sample: format 1, its length covering the rest of it.
    let at = 28;
    assert_eq!(word(&d, at), 1);
    let len = word(&d, at + 4) as usize;
    let f = &d[at + 8..at + 8 + len];
    assert_eq!(word(f, 0), 1, "sequence");
    assert_eq!(word(f, 4), 11, "source: ifIndex 11");
    assert_eq!((word(f, 8), word(f, 12), word(f, 16)), (1000, 123_000, 2));
    assert_eq!((word(f, 20), word(f, 24), word(f, 28)), (11, 12, 1));
    // Its raw packet header record.
    assert_eq!(word(f, 32), 1);
    let rlen = word(f, 36) as usize;
    assert_eq!(rlen, f.len() - 40);
    let frame = sampled_frame();
    assert_eq!(word(f, 40), 1, "Ethernet");
    assert_eq!(word(f, 44) as usize, frame.len());
    assert_eq!(word(f, 52) as usize, frame.len().min(128));
    assert_eq!(&f[56..56 + frame.len()], &frame[..]);
    assert_eq!(rlen % 4, 0, "padded to 4");
    // The counter sample: format 2, one 88-byte generic interface record.
    let c = &d[at + 8 + len..];
    assert_eq!(word(c, 0), 2);
    assert_eq!(word(c, 4) as usize, c.len() - 8);
    assert_eq!((word(c, 16), word(c, 20), word(c, 24)), (1, 1, 88));
    assert_eq!(word(c, 28), 11, "ifIndex");
    assert_eq!(word(c, 48), 3, "admin and oper up");
}

#[test]
fn sequence_numbers_count_per_datagram_and_per_source() {
    let mut a = Agent::new(Ipv4Addr::LOCALHOST, 0);
    let f = sampled_frame();
    let s = |src| Sample::Flow(flow_sample(&f, 64, src, 10, 10, 0, UNKNOWN_IF));
    let d1 = a.datagram(1, &[s(1), s(2)]);
    let d2 = a.datagram(2, &[s(1)]);
    assert_eq!((word(&d1, 16), word(&d2, 16)), (1, 2));
    // The second sample of source 1 is its second.
    assert_eq!(word(&d2, 28 + 8), 2);
    let first_of_2 = 28 + 8 + word(&d1, 28 + 4) as usize;
    assert_eq!(word(&d1, first_of_2 + 8), 1);
}

/// An Ethernet/IPv4/UDP frame to port 6343 carrying `payload`.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let total = 20 + 8 + payload.len();
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0,
        0,
        64,
        17,
        0,
        0,
    ];
    ip.extend_from_slice(&[198, 18, 0, 254, 198, 18, 0, 1]);
    let sum = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum::<u32>();
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    let ulen = (8 + payload.len()) as u16;
    f.extend_from_slice(&[0x18, 0xc7, 0x18, 0xc7]);
    f.extend_from_slice(&ulen.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// What Wireshark's sFlow dissector (`tshark -V`) prints of `datagrams`,
/// each as a UDP frame to port 6343 in a classic pcap.
pub(crate) fn tshark_decode(tshark: &std::path::Path, datagrams: &[Vec<u8>]) -> String {
    let mut pcap = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        if v == 0x0004_0002 {
            pcap.extend_from_slice(&2u16.to_le_bytes());
            pcap.extend_from_slice(&4u16.to_le_bytes());
        } else {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
    }
    for (i, d) in datagrams.iter().enumerate() {
        let frame = udp_frame(d);
        for v in [1 + i as u32, 0, frame.len() as u32, frame.len() as u32] {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
        pcap.extend_from_slice(&frame);
    }
    let path = std::env::temp_dir().join(format!(
        "esw-sflow-{}-{:?}.pcap",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, &pcap).expect("write");
    let out = std::process::Command::new(tshark)
        .args(["-n", "-V", "-r"])
        .arg(&path)
        .output()
        .expect("tshark");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn wireshark_decodes_the_datagram() {
    const T: &str = "wireshark_decodes_the_datagram";
    let Some(tshark) = prereq::tool(T, "tshark") else {
        return;
    };
    let text = tshark_decode(&tshark, &[datagram()]);
    for want in [
        "InMon sFlow",
        "Datagram version: 5",
        "Agent address: 198.18.0.254",
        "Sub-agent ID: 7",
        "NumSamples: 2",
        "Sampling rate: 1 out of 1000 packets",
        "Sample pool: 123000 total packets",
        "Input interface (ifIndex): 11",
        "Output interface value: 12",
        "Header protocol: Ethernet",
        "Source Address: 198.18.0.1",
        "Destination Port: 5000",
        "Interface index: 11",
        "IfOperStatus: Up",
        "Input Octets: 9000",
        "Output Packets: 100",
    ] {
        assert!(text.contains(want), "no \"{want}\" in:\n{text}");
    }
    assert!(!text.contains("Malformed"), "{text}");
}

#[test]
fn encoded_len_is_what_a_sample_takes_in_a_datagram() {
    let f = sampled_frame();
    for cut in [14, 41, 42, 43, 44, 128] {
        let flow = Sample::Flow(flow_sample(&f, cut, 3, 100, 1, 0, 4));
        let counters = Sample::Counters(IfCounters::default());
        let samples = [flow.clone(), counters.clone(), flow];
        let d = Agent::new(Ipv4Addr::LOCALHOST, 0).datagram(0, &samples);
        let want: usize = samples.iter().map(encoded_len).sum();
        assert_eq!(d.len(), DATAGRAM_HEADER_LEN + want, "header cut at {cut}");
    }
}
