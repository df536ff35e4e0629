"""Runs os-ken with the L2 learning app listening on 127.0.0.1:PORT.

    python run.py PORT                     # plain TCP
    python run.py PORT KEY CERT CACERT     # TLS: switches must present a
                                           # certificate CACERT signed
"""

import os
import sys

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg  # noqa: E402
from os_ken.base import app_manager  # noqa: E402


def main():
    port = sys.argv[1]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if len(sys.argv) == 5:
        key, cert, cacert = sys.argv[2:5]
        args = [
            f"--ofp-ssl-listen-port={port}",
            f"--ctl-privkey={key}",
            f"--ctl-cert={cert}",
            f"--ca-certs={cacert}",
        ]
    else:
        args = [f"--ofp-tcp-listen-port={port}"]
    cfg.CONF(args=args + ["--ofp-listen-host=127.0.0.1"], project="os_ken")
    mgr = app_manager.AppManager.get_instance()
    mgr.load_apps(["l2_switch", "os_ken.controller.ofp_handler"])
    services = mgr.instantiate_apps(**mgr.create_contexts())
    print("listening", flush=True)
    hub.joinall(services)


if __name__ == "__main__":
    main()
