# Convenience targets; the README's commands are the reference.
LAB_VMS ?= 3

.PHONY: test lab lab-stop bench-veth

# Every test, installing what they need first (see the script).
test:
	integration/scripts/test.sh

lab:
	cargo build --release -p cli --bin eswitchd --bin eswitchctl
	integration/scripts/lab.sh start --vms $(LAB_VMS)

lab-stop:
	integration/scripts/lab.sh stop

bench-veth:
	integration/scripts/bench-veth.sh
