# Convenience targets; the README's commands are the reference.
LAB_VMS ?= 3

.PHONY: lab lab-stop bench-veth

lab:
	cargo build --release -p cli --bin eswitchd --bin eswitchctl
	integration/scripts/lab.sh start --vms $(LAB_VMS)

lab-stop:
	integration/scripts/lab.sh stop

bench-veth:
	integration/scripts/bench-veth.sh
