//! The pcap files `PcapWriter` produces open in the real tools (tcpdump, and
//! tshark when installed), and files written by libpcap read back through
//! `PcapReader`. A test whose tool is missing is skipped through `prereq`
//! (`integration/scripts/test.sh` installs tcpdump and tshark).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use megaflow::port::{PacketBatch, PcapReader, PcapWriter, Port, PortError};
use megaflow::Timestamp;

/// An Ethernet/IPv4/UDP frame of `len` (>= 42) bytes from 02:00:00:00:00:01,
/// 10.0.0.1 port 1000 + `seq` to 02:00:00:00:00:02, 10.0.0.2 port 2000.
fn udp_frame(len: usize, seq: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let mut ip = [
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes());
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(1000 + seq).to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&((len - 34) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(len, 0xa5);
    f
}

const SIZES: [usize; 5] = [60, 1514, 128, 61, 999];
/// 2023-11-14T22:13:20Z plus 7 ns: a timestamp that needs nanoseconds.
const T0: u64 = 1_700_000_000_000_000_007;
const STEP: u64 = 1_000_001_001;

fn frames() -> Vec<Vec<u8>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &len)| udp_frame(len, i as u16))
        .collect()
}

/// A unique temporary file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str) -> Self {
        TempFile(std::env::temp_dir().join(format!(
            "megaflow-pcap-tools-{}-{test}.pcap",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `frames()` to `path`, packet i at T0 + i * STEP.
fn write_capture(path: &Path) {
    let mut w = PcapWriter::create(path).unwrap();
    for (i, f) in frames().iter().enumerate() {
        assert_eq!(
            w.send_batch(&[f], Timestamp(T0 + i as u64 * STEP)).unwrap(),
            1
        );
    }
    w.flush().unwrap();
}

fn run(tool: &Path, args: &[&str]) -> Output {
    let out = Command::new(tool).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}\n{}",
        tool.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn tcpdump_lists_written_packets() {
    let Some(tcpdump) = prereq::tool("tcpdump_lists_written_packets", "tcpdump") else {
        return;
    };
    let tmp = TempFile::new("tcpdump_lists");
    write_capture(&tmp.0);
    let file = tmp.0.to_str().unwrap();

    let out = run(&tcpdump, &["-r", file, "-nn", "-e"]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), SIZES.len(), "{lines:#?}");
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.contains("02:00:00:00:00:01 > 02:00:00:00:00:02"),
            "{line}"
        );
        assert!(line.contains(&format!("length {}", SIZES[i])), "{line}");
        assert!(
            line.contains(&format!("10.0.0.1.{} > 10.0.0.2.2000: UDP", 1000 + i)),
            "{line}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("EN10MB"), "link type: {stderr}");

    // Nanosecond timestamps survive: print them as epoch seconds.
    let out = run(
        &tcpdump,
        &["-r", file, "-nn", "-tt", "--time-stamp-precision=nano"],
    );
    let lines = stdout_lines(&out);
    for (i, line) in lines.iter().enumerate() {
        let ts = T0 + i as u64 * STEP;
        let want = format!("{}.{:09} ", ts / 1_000_000_000, ts % 1_000_000_000);
        assert!(line.starts_with(&want), "{line} should start with {want}");
    }
}

#[test]
fn tcpdump_output_reads_back() {
    let Some(tcpdump) = prereq::tool("tcpdump_output_reads_back", "tcpdump") else {
        return;
    };
    let ours = TempFile::new("readback_ours");
    let theirs = TempFile::new("readback_theirs");
    write_capture(&ours.0);

    // libpcap rewrites our file (microsecond timestamps), keeping two packets.
    run(
        &tcpdump,
        &[
            "-r",
            ours.0.to_str().unwrap(),
            "-w",
            theirs.0.to_str().unwrap(),
            "udp src port 1001 or udp src port 1003",
        ],
    );

    let mut r = PcapReader::open(&theirs.0).unwrap();
    let mut batch = PacketBatch::new();
    assert_eq!(r.recv_batch(&mut batch).unwrap(), 2);
    let frames = frames();
    for (p, i) in batch.iter().zip([1usize, 3]) {
        assert_eq!(p.data, &frames[i][..]);
        let ts = T0 + i as u64 * STEP;
        assert_eq!(
            p.meta.ts,
            Timestamp(ts - ts % 1000),
            "microsecond precision"
        );
        assert_eq!(p.meta.in_port, None);
    }
    assert!(matches!(
        r.recv_batch(&mut batch),
        Err(PortError::Eof { .. })
    ));
}

#[test]
fn tshark_lists_written_packets() {
    let Some(tshark) = prereq::tool("tshark_lists_written_packets", "tshark") else {
        return;
    };
    let tmp = TempFile::new("tshark_lists");
    write_capture(&tmp.0);
    let out = run(&tshark, &["-n", "-r", tmp.0.to_str().unwrap()]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), SIZES.len(), "{lines:#?}");
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.contains("10.0.0.1") && line.contains("10.0.0.2"),
            "{line}"
        );
        assert!(
            line.contains(&format!(" {} ", SIZES[i])),
            "frame length in {line}"
        );
    }
}
