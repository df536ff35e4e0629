use std::io::{Cursor, Read};
use std::path::PathBuf;
use std::process::Command;

use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

use super::*;
use crate::port::{PacketBatch, PacketMeta, PcapReader, Port};
use crate::PortNo;

/// Distinct frames of lengths that exercise every padding amount.
fn frames() -> Vec<Vec<u8>> {
    [60usize, 61, 62, 63, 64, 1514, 9000]
        .iter()
        .enumerate()
        .map(|(i, &len)| (0..len).map(|b| (b as u8) ^ (i as u8 * 17)).collect())
        .collect()
}

fn read_all<R: Read + Send>(r: &mut PcapReader<R>) -> (Vec<(Vec<u8>, PacketMeta)>, PortError) {
    let mut batch = PacketBatch::new();
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        match r.recv_batch(&mut batch) {
            Ok(_) => out.extend(batch.iter().map(|p| (p.data.to_vec(), p.meta))),
            Err(e) => return (out, e),
        }
    }
    panic!("reader never stopped");
}

/// (interface, timestamp, frame) of the packets the tests write.
fn packets() -> Vec<(u32, Timestamp, Vec<u8>)> {
    let base = 1_700_000_000 * 1_000_000_000u64;
    frames()
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let ts = base + i as u64 * 1_234_567_891 + 7;
            ((i % 3) as u32, Timestamp(ts), f)
        })
        .collect()
}

fn write_mem(names: &[&str], pkts: &[(u32, Timestamp, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new(), "mem.pcapng", names).unwrap();
    for (i, ts, f) in pkts {
        w.write(*i, *ts, f).unwrap();
    }
    assert_eq!(w.packets(), pkts.len() as u64);
    assert_eq!(w.interfaces(), names.len() as u32);
    w.into_inner().unwrap()
}

#[test]
fn round_trip_through_pcap_reader() {
    let pkts = packets();
    let bytes = write_mem(&["vm1", "vm2", "vm3"], &pkts);
    assert_eq!(bytes.len() % 4, 0);
    let mut r = PcapReader::from_reader("r", "mem.pcapng", Cursor::new(bytes)).unwrap();
    assert_eq!(r.format(), crate::port::CaptureFormat::PcapNg);
    let (got, end) = read_all(&mut r);
    assert!(end.is_eof(), "{end}");
    assert_eq!(got.len(), pkts.len());
    for ((data, meta), (iface, ts, f)) in got.iter().zip(&pkts) {
        assert_eq!(data, f);
        assert_eq!(meta.ts, *ts);
        assert_eq!(meta.in_port, Some(PortNo(*iface)));
    }
}

#[test]
fn blocks_as_pcap_file_parses_them() {
    let pkts = packets();
    let names = ["vm1", "a-much-longer-interface-name", "x"];
    let bytes = write_mem(&names, &pkts);
    let mut r = PcapNgReader::new(Cursor::new(bytes)).unwrap();
    let mut idbs = Vec::new();
    let mut epbs = 0;
    while let Some(b) = r.next_block() {
        match b.unwrap() {
            Block::InterfaceDescription(idb) => {
                assert_eq!(idb.linktype, DataLink::ETHERNET);
                assert_eq!(idb.snaplen, MAX_FRAME_LEN as u32);
                let mut name = None;
                let mut resol = None;
                for o in &idb.options {
                    match o {
                        InterfaceDescriptionOption::IfName(n) => name = Some(n.to_string()),
                        InterfaceDescriptionOption::IfTsResol(v) => resol = Some(*v),
                        _ => {}
                    }
                }
                assert_eq!(resol, Some(9));
                idbs.push(name.unwrap());
            }
            Block::EnhancedPacket(epb) => {
                let (iface, ts, f) = &pkts[epbs];
                assert_eq!(epb.interface_id, *iface);
                assert_eq!(epb.timestamp.as_nanos(), u128::from(ts.0));
                assert_eq!(epb.original_len as usize, f.len());
                assert_eq!(&epb.data[..], &f[..]);
                epbs += 1;
            }
            _ => {}
        }
    }
    assert_eq!(idbs, names);
    assert_eq!(epbs, pkts.len());
    assert_eq!(r.section().major_version, 1);
}

#[test]
fn oversized_frames_are_truncated_with_original_length() {
    let big = vec![0xabu8; MAX_FRAME_LEN + 10];
    let mut w = PcapNgWriter::new(Vec::new(), "m", &["p"]).unwrap();
    w.write(0, Timestamp(5), &big).unwrap();
    let bytes = w.into_inner().unwrap();
    let mut r = PcapNgReader::new(Cursor::new(bytes)).unwrap();
    let mut seen = false;
    while let Some(b) = r.next_block() {
        if let Block::EnhancedPacket(epb) = b.unwrap() {
            assert_eq!(epb.original_len as usize, big.len());
            assert_eq!(epb.data.len(), MAX_FRAME_LEN);
            seen = true;
        }
    }
    assert!(seen);
}

#[test]
fn unknown_interface_is_refused_and_writer_goes_on() {
    let mut w = PcapNgWriter::new(Vec::new(), "m.pcapng", &["a", "b"]).unwrap();
    let e = w.write(2, Timestamp(1), &[0; 60]).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("interface 2") && msg.contains("m.pcapng"),
        "{msg}"
    );
    w.write(1, Timestamp(1), &[0; 60]).unwrap();
    assert_eq!(w.packets(), 1);
    let bytes = w.into_inner().unwrap();
    let mut r = PcapReader::from_reader("r", "m", Cursor::new(bytes)).unwrap();
    let (got, _) = read_all(&mut r);
    assert_eq!(got.len(), 1);
}

#[test]
fn no_interfaces_no_packets_is_a_valid_file() {
    let bytes = write_mem(&[], &[]);
    let mut r = PcapReader::from_reader("r", "m", Cursor::new(bytes)).unwrap();
    let (got, end) = read_all(&mut r);
    assert!(got.is_empty());
    assert!(end.is_eof());
}

/// A writer whose writes fail after `ok` bytes.
struct Failing {
    ok: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.ok);
        self.ok -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_errors_stop_the_writer() {
    assert!(matches!(
        PcapNgWriter::new(Failing { ok: 10 }, "f", &["a"]),
        Err(PortError::Io { .. })
    ));
    let header = file_header(&["a"]).len();
    let mut w = PcapNgWriter::new(Failing { ok: header + 40 }, "f.pcapng", &["a"]).unwrap();
    let e = w.write(0, Timestamp(1), &[0; 100]).unwrap_err();
    assert!(e.to_string().contains("disk full"), "{e}");
    // Later calls keep failing, even ones that would fit.
    assert!(w.write(0, Timestamp(1), &[]).is_err());
    assert!(w.flush().is_err());
    assert_eq!(w.packets(), 0);
}

#[test]
fn create_names_the_file_in_errors() {
    let e = PcapNgWriter::create("/nonexistent-dir/x.pcapng", &["a"]).unwrap_err();
    assert!(e.to_string().contains("/nonexistent-dir/x.pcapng"), "{e}");
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("eswitch-pcapng-{}-{name}", std::process::id()))
}

/// Writes `packets()` to a file for an outside tool; removed on drop.
struct ToolFile(PathBuf);

impl ToolFile {
    fn new(name: &str) -> ToolFile {
        let path = temp_path(name);
        let mut w = PcapNgWriter::create(&path, &["vm1", "vm2", "vm3"]).unwrap();
        for (i, ts, f) in &packets() {
            w.write(*i, *ts, f).unwrap();
        }
        w.flush().unwrap();
        ToolFile(path)
    }
}

impl Drop for ToolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The standard output of `tool args... FILE` (TZ=UTC); panics with its
/// standard error when it fails.
fn read_with(tool: &std::path::Path, args: &[&str], file: &ToolFile) -> String {
    let out = Command::new(tool)
        .env("TZ", "UTC")
        .args(args)
        .arg(&file.0)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} failed: {stderr}", tool.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// tcpdump reads the file: one line per packet, with its time of day (in
/// microseconds) and length.
#[test]
fn tcpdump_reads_the_file() {
    let Some(tcpdump) = prereq::tool("tcpdump_reads_the_file", "tcpdump") else {
        return;
    };
    let file = ToolFile::new("tcpdump.pcapng");
    let pkts = packets();
    let stdout = read_with(&tcpdump, &["-nn", "-r"], &file);
    // One line per packet (tcpdump adds indented hex dumps of unknown
    // ethertypes).
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(char::is_whitespace))
        .collect();
    assert_eq!(lines.len(), pkts.len(), "tcpdump output:\n{stdout}");
    for (line, (_, ts, f)) in lines.iter().zip(&pkts) {
        assert!(line.starts_with(&time_of_day(*ts)), "{line}");
        assert!(line.ends_with(&format!("length {}: ", f.len())), "{line}");
    }
}

/// Wireshark's reader (tshark) reads the file: each packet's interface,
/// length and timestamp to the nanosecond.
#[test]
fn tshark_reads_interfaces_lengths_and_nanosecond_times() {
    let test = "tshark_reads_interfaces_lengths_and_nanosecond_times";
    let Some(tshark) = prereq::tool(test, "tshark") else {
        return;
    };
    let file = ToolFile::new("tshark.pcapng");
    let fields = [
        "-T",
        "fields",
        "-e",
        "frame.interface_id",
        "-e",
        "frame.len",
        "-e",
        "frame.time_epoch",
        "-r",
    ];
    let stdout = read_with(&tshark, &fields, &file);
    let want: Vec<String> = packets()
        .iter()
        .map(|(i, ts, f)| {
            let (s, ns) = (ts.0 / 1_000_000_000, ts.0 % 1_000_000_000);
            format!("{i}\t{}\t{s}.{ns:09}", f.len())
        })
        .collect();
    let got: Vec<&str> = stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(got, want, "tshark output:\n{stdout}");
}

/// "HH:MM:SS.uuuuuu" (UTC) of a timestamp, as tcpdump prints it with TZ=UTC.
fn time_of_day(ts: Timestamp) -> String {
    let secs = ts.0 / 1_000_000_000;
    let micros = (ts.0 % 1_000_000_000) / 1000;
    let day = secs % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{micros:06}",
        day / 3600,
        day / 60 % 60,
        day % 60
    )
}
