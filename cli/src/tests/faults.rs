use std::time::Duration;

use offload::dr::Errno;
use offload::sim::{Fault, Op};

use crate::config::Config;

use super::FaultPlan;

fn plan(toml: &str) -> anyhow::Result<FaultPlan> {
    let cfg = Config::parse(toml)?;
    FaultPlan::parse(&cfg.backend.fault)
}

#[test]
fn entries_become_faults_and_delays() {
    let p = plan(
        r#"
[[backend.fault]]
op = "rule_create"
errno = "ENOSPC"
after = 100

[[backend.fault]]
op = "rule_create"
errno = "5"
fraction = 0.25
times = 10
from_ms = 1000
until_ms = 3000

[[backend.fault]]
op = "counter_bulk_query"
latency_ms = 7
"#,
    )
    .expect("plan");
    assert_eq!(
        p.faults[0],
        Fault {
            times: u64::MAX,
            ..Fault::nth(Op::RuleCreate, 101, Errno::ENOSPC)
        }
    );
    let f = p.faults[1];
    assert_eq!((f.errno, f.times, f.per_million), (Errno::EIO, 10, 250_000));
    assert_eq!(
        (f.from, f.until),
        (Duration::from_secs(1), Some(Duration::from_secs(3)))
    );
    assert_eq!(p.delays.len(), 1);
    assert_eq!(p.delays[0].op, Op::CounterQuery);
    assert_eq!(p.delays[0].latency, Duration::from_millis(7));
}

#[test]
fn bad_entries_are_named() {
    let cases = [
        (
            "op = \"rule_creat\"\nerrno = \"EIO\"",
            "backend.fault[1]: op = \"rule_creat\": expected one of",
        ),
        (
            "op = \"rule_create\"\nerrno = \"EWHAT\"",
            "errno = \"EWHAT\": expected one of EIO",
        ),
        ("op = \"rule_create\"", "neither errno nor latency_ms"),
        (
            "op = \"rule_create\"\nerrno = \"EIO\"\nfraction = 1.5",
            "fraction = 1.5",
        ),
        (
            "op = \"rule_create\"\nerrno = \"EIO\"\ntimes = 0",
            "times = 0",
        ),
        (
            "op = \"rule_create\"\nerrno = \"EIO\"\nfrom_ms = 5\nuntil_ms = 5",
            "until_ms = 5",
        ),
        (
            "op = \"rule_create\"\nlatency_ms = 1\ntimes = 3",
            "need an errno",
        ),
        (
            "op = \"rule_create\"\nerrno = \"EIO\"\nwhen = 3",
            "unknown field `when`",
        ),
    ];
    for (entry, want) in cases {
        let e = plan(&format!("[[backend.fault]]\n{entry}\n")).expect_err(entry);
        assert!(format!("{e:#}").contains(want), "{entry}: {e:#}");
    }
    let e = Config::parse(
        "[backend]\nkind = \"mlx5\"\n[[backend.fault]]\nop = \"rule_create\"\nerrno = \"EIO\"\n",
    )
    .expect_err("mlx5 with faults");
    assert!(e.to_string().contains("for the sim backend"), "{e}");
}
