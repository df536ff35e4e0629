"""Runs os-ken with the L2 learning app listening on 127.0.0.1:PORT.

    python run.py PORT
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
    cfg.CONF(
        args=[f"--ofp-tcp-listen-port={port}", "--ofp-listen-host=127.0.0.1"],
        project="os_ken",
    )
    mgr = app_manager.AppManager.get_instance()
    mgr.load_apps(["l2_switch", "os_ken.controller.ofp_handler"])
    services = mgr.instantiate_apps(**mgr.create_contexts())
    print("listening", flush=True)
    hub.joinall(services)


if __name__ == "__main__":
    main()
