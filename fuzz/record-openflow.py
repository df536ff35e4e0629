"""Records OpenFlow sessions between real clients and eswitchd: a relay on
a Unix socket that writes each direction of each connection to a file.

    python3 fuzz/record-openflow.py LISTEN_SOCK SWITCH_SOCK OUT_DIR

Point a client at unix:LISTEN_SOCK (for example `ovs-ofctl -O OpenFlow13
dump-flows unix:LISTEN_SOCK`); the relay passes its bytes to eswitchd's
punix listener at SWITCH_SOCK and back, and writes OUT_DIR/c2s-N-TAG.bin
(what the client sent) and OUT_DIR/s2c-N-TAG.bin (what the switch answered),
TAG from the RECORD_TAG file in OUT_DIR if there is one. Stops on SIGTERM.
fuzz/seed.py cuts these into the corpora of openflow_parse and
openflow_channel; fuzz/seeds/openflow/ holds a recorded set.
"""

import os
import selectors
import socket
import sys


def main():
    listen, switch, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    if os.path.exists(listen):
        os.unlink(listen)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    srv.listen(8)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, None)
    n = 0
    while True:
        for key, _ in sel.select():
            if key.data is None:
                client, _ = srv.accept()
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                upstream.connect(switch)
                n += 1
                tag = "session"
                tag_file = os.path.join(out, "RECORD_TAG")
                if os.path.exists(tag_file):
                    tag = open(tag_file).read().strip() or tag
                c2s = open(os.path.join(out, f"c2s-{n:02}-{tag}.bin"), "wb")
                s2c = open(os.path.join(out, f"s2c-{n:02}-{tag}.bin"), "wb")
                sel.register(client, selectors.EVENT_READ, (upstream, c2s))
                sel.register(upstream, selectors.EVENT_READ, (client, s2c))
                continue
            src = key.fileobj
            dst, log = key.data
            data = src.recv(65536)
            if not data:
                for s in (src, dst):
                    try:
                        sel.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                log.close()
                continue
            log.write(data)
            log.flush()
            dst.sendall(data)


if __name__ == "__main__":
    main()
