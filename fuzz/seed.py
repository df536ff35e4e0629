"""Seeds the fuzz corpora from real inputs.

    python3 fuzz/seed.py CORPUS_DIR

Writes CORPUS_DIR/<target>/<name> files:
  extract, pcap_read   frames and the capture file of examples/demo.pcapng
                       (pcapng as is, and the same frames as classic pcap);
  openflow_parse,      the OpenFlow messages of fuzz/seeds/openflow/*.bin,
  openflow_channel     sessions ovs-ofctl had with eswitchd (recorded by
                       fuzz/record-openflow.py), one message per file, and
                       each client's whole stream with a cut selector byte;
  flow_text, flow_file the flow lines of examples/ and the README;
  meter_parse          the README's add-meter lines;
  config_parse         examples/eswitch.toml and the README's TOML blocks;
  control_request      the requests eswitchctl sends;
  dr_dump              fuzz/seeds/dr_dump/*: mlx5dv_dump_dr_domain output;
  tunnel_decap         fuzz/seeds/tunnel_decap/*: VXLAN and Geneve packets;
  conntrack            fuzz/seeds/conntrack/*: TCP, UDP and ICMP error
                       frames, nat() and flush-conntrack arguments;
  ovsdb_message        fuzz/seeds/ovsdb_message/*: what Debian's
                       ovsdb-server sent a client that monitored the
                       Open_vSwitch tables and took the ovs_vswitchd lock
                       while ovs-vsctl added a bridge and a Geneve port,
                       and its answer to a bad transaction;
  netlink_link         RTM_NEWLINK messages the kernel sends for this
                       machine's links (a live dump, when netlink is there);
  netlink_host         those and the machine's addresses, routes and
                       neighbours (live dumps);
  any target           fuzz/seeds/regressions/<target>/*: inputs that once
                       failed.
"""

import json
import os
import re
import socket
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def put(corpus, target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pcapng_frames(data):
    """The packets of a pcapng file (Enhanced and Simple Packet Blocks)."""
    frames, off = [], 0
    endian = "<"
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from(endian + "II", data, off)
        if btype == 0x0A0D0D0A:
            magic = data[off + 8 : off + 12]
            endian = "<" if magic == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack_from(endian + "I", data, off + 4)[0]
        if blen < 12 or off + blen > len(data):
            break
        if btype == 6:
            caplen = struct.unpack_from(endian + "I", data, off + 20)[0]
            frames.append(data[off + 28 : off + 28 + caplen])
        elif btype == 3:
            frames.append(data[off + 12 : off + blen - 4])
        off += blen
    return frames


def pcap_of(frames):
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", i, 0, len(f), len(f)) + f
    return out


def of_messages(stream):
    msgs, off = [], 0
    while off + 8 <= len(stream):
        n = struct.unpack_from(">H", stream, off + 2)[0]
        if n < 8 or off + n > len(stream):
            break
        msgs.append(stream[off : off + n])
        off += n
    return msgs


def netlink_links():
    """RTM_NEWLINK messages of a live link dump."""
    # nlmsghdr + ifinfomsg: RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP.
    return netlink_dump(18, 16, struct.pack("=BxHiII", 0, 0, 0, 0, 0))


def netlink_host():
    """RTM_NEWADDR, RTM_NEWROUTE and RTM_NEWNEIGH messages of live dumps
    (what the tunnel ports' host state reads)."""
    return (
        netlink_dump(22, 20, struct.pack("=BBBBI", 0, 0, 0, 0, 0))  # ifaddrmsg
        + netlink_dump(26, 24, struct.pack("=BBBBBBBBI", 0, 0, 0, 0, 0, 0, 0, 0, 0))  # rtmsg
        + netlink_dump(30, 28, struct.pack("=BxxxiHBB", 0, 0, 0, 0, 0))  # ndmsg
    )


def netlink_dump(get, new, body):
    """The messages of type `new` a dump request of type `get` returns."""
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    except OSError:
        return []
    with s:
        s.settimeout(2)
        req = struct.pack("=IHHII", 16 + len(body), get, 0x301, 1, 0) + body
        s.send(req)
        msgs = []
        while True:
            try:
                data = s.recv(65536)
            except OSError:
                break
            off, done = 0, False
            while off + 16 <= len(data):
                n, ty = struct.unpack_from("=IH", data, off)
                if n < 16:
                    break
                if ty == 3:  # NLMSG_DONE
                    done = True
                    break
                if ty == new:
                    msgs.append(data[off : off + n])
                off += (n + 3) & ~3
            if done:
                break
        return msgs


def main():
    corpus = sys.argv[1]
    demo = open(os.path.join(ROOT, "examples/demo.pcapng"), "rb").read()
    frames = pcapng_frames(demo)
    put(corpus, "pcap_read", "demo.pcapng", demo)
    put(corpus, "pcap_read", "demo.pcap", pcap_of(frames))
    for i, f in enumerate(frames[:64]):
        put(corpus, "extract", f"demo-{i}", struct.pack("<I", 1 + i % 4) + f)

    seeds = os.path.join(ROOT, "fuzz/seeds/openflow")
    n_of = 0
    for name in sorted(os.listdir(seeds)) if os.path.isdir(seeds) else []:
        stream = open(os.path.join(seeds, name), "rb").read()
        for i, m in enumerate(of_messages(stream)):
            put(corpus, "openflow_parse", f"{name}-{i}", m)
            n_of += 1
        if name.startswith("c2s"):
            for cut in (0, 7, 63):
                put(corpus, "openflow_channel", f"{name}-cut{cut}", bytes([cut]) + stream)

    readme = open(os.path.join(ROOT, "README.md")).read()
    flows = open(os.path.join(ROOT, "examples/flows.txt")).read()
    put(corpus, "flow_file", "examples-flows", flows)
    lines = [l for l in flows.splitlines() if l.strip() and not l.startswith("#")]
    lines += re.findall(r"add-flow [^ ]+ '([^']+)'", readme)
    for i, l in enumerate(lines):
        put(corpus, "flow_text", f"flow-{i}", l)
    meters = re.findall(r"add-meter [^ ]+ '([^']+)'", readme)
    meters += ["meter=1,kbps,band=type=drop,rate=1000", "meter=2,pktps,burst,stats,band=type=drop,rate=10,burst_size=5"]
    for i, m in enumerate(meters):
        put(corpus, "meter_parse", f"meter-{i}", m)
    put(corpus, "config_parse", "example", open(os.path.join(ROOT, "examples/eswitch.toml")).read())
    for i, block in enumerate(re.findall(r"```toml\n(.*?)```", readme, re.S)):
        put(corpus, "config_parse", f"readme-{i}", block)
    requests = [
        {"cmd": "show"},
        {"cmd": "stats"},
        {"cmd": "dump-flows"},
        {"cmd": "dump-rules"},
        {"cmd": "dump-of"},
        {"cmd": "add-flow", "flow": "priority=5,ip,actions=drop"},
        {"cmd": "del-flows", "match": "udp"},
        {"cmd": "trace", "flow": "in_port=1,udp,tp_dst=53"},
        {"cmd": "add-port", "name": "vm9", "ofport": 9, "vport": "vf8"},
        {"cmd": "del-port", "name": "vm9"},
    ]
    for i, r in enumerate(requests):
        put(corpus, "control_request", f"req-{i}", json.dumps(r) + "\n")
    # Committed seeds of their own: device dumps as rdma-core writes them,
    # tunnel packets (fuzz/seeds/<target>/).
    for target in ("dr_dump", "tunnel_decap", "conntrack", "ovsdb_message"):
        d = os.path.join(ROOT, "fuzz/seeds", target)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            put(corpus, target, name, open(os.path.join(d, name), "rb").read())
    # Inputs that once failed, kept so every run tries them again.
    reg = os.path.join(ROOT, "fuzz/seeds/regressions")
    for target in sorted(os.listdir(reg)) if os.path.isdir(reg) else []:
        for name in sorted(os.listdir(os.path.join(reg, target))):
            put(corpus, target, f"regression-{name}", open(os.path.join(reg, target, name), "rb").read())
    links = netlink_links()
    for i, m in enumerate(links):
        put(corpus, "netlink_link", f"link-{i}", m)
    host = netlink_host()
    for i, m in enumerate(links + host):
        put(corpus, "netlink_host", f"host-{i}", m)
    print(
        f"seed: {len(frames)} frames, {n_of} OpenFlow messages, {len(lines)} flows, "
        f"{len(meters)} meters, {len(links)} netlink links, {len(host)} host messages"
    )


if __name__ == "__main__":
    main()
