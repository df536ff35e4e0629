use super::*;

/// A dump as rdma-core 44's dr_dbg.c writes one: an FDB domain with its
/// root table (jump rule) and a level-1 table with one offloaded rule
/// (counter, modify-header, vport), plus records this parser skips.
const DUMP: &str = "\
3000,0x1a2b02,2,01,1,44.0,mlx5_0,0,1,1,0,2
3001,0x1a2b02,icmp_dw0,0x4
3002,0x1a2b02,4,22.36.1010,...
3004,0x1a2b02,0x1,0x80000000,0x80000010,0x2,1,1
3005,0x55aa00,0x1a2b02,0x41b,0x1d
3100,0x55aa10,0x1a2b02,4,0
3200,0x55ab10,0x55aa10,0
3300,0x55ac10,0x55ab10
3405,0x55ad10,0x55ac10,0x1c,0x55aa20
3100,0x55aa20,0x1a2b02,4,1
3101,0x55aa20,0x80000100
3102,0x55aa20,0x80000200
3200,0x55ab20,0x55aa20,1
3205,0x55ab20,ffffffffffff,,,,,,
3202,0x55ab20,0x55ae00,2,0x80000300,0x80000400,4
3204,0x55ab20,0,1,0x4,0
3300,0x55ac20,0x55ab20
3303,0x55ac20,0x80000500,0aff00
3406,0x55ad20,0x55ac20,0x801
3402,0x55ad30,0x55ac20,0x12,0,0x0,0x0,0x0
3408,0x55ad40,0x55ac20,0x2
3420,0x55ad50,0x55ac20
";

#[test]
fn a_dump_gives_domains_tables_matchers_rules_and_actions() {
    let d = parse(DUMP).expect("parses");
    assert_eq!(
        d.domains,
        [DevDomain {
            id: 0x1a2b02,
            kind: 2
        }]
    );
    let levels: Vec<u32> = d.tables.iter().map(|t| t.level).collect();
    assert_eq!(levels, [0, 1]);
    assert!(
        d.tables.iter().all(|t| t.domain == 0x1a2b02 && t.kind == 4),
        "FS_FT_FDB"
    );
    assert_eq!(
        d.matchers_of(0x55aa20)
            .map(|m| m.priority)
            .collect::<Vec<_>>(),
        [1]
    );
    let root: Vec<&DevRule> = d.rules_of(0x55ab10).collect();
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].actions, [DevAction::Table(0x1c)]);
    let rule = d.rules_of(0x55ab20).next().expect("the offloaded rule");
    assert_eq!(
        rule.actions,
        [
            DevAction::Counter(0x801),
            DevAction::ModifyHeader,
            DevAction::Vport(2),
            DevAction::Other(3420),
        ]
    );
    let names: Vec<&str> = rule.actions.iter().map(|a| a.name()).collect();
    assert_eq!(
        names,
        ["flow_counter", "modify_header", "dest_vport", "unknown"]
    );
}

#[test]
fn an_empty_domain_is_its_domain_record_alone() {
    let d = parse("3000,0x1a2b02,2,01,1,44.0,mlx5_0,0,1,1,0,2\n").expect("parses");
    assert_eq!(d.domains.len(), 1);
    assert!(d.tables.is_empty() && d.matchers.is_empty() && d.rules.is_empty());
}

#[test]
fn bad_lines_are_errors_that_name_the_line() {
    for (text, line, want) in [
        ("x,1\n", 1, "record type"),
        ("3000,0x1\n", 1, "field 2 (domain type)"),
        ("3000,0x1,2\n3100,0x2,0x1,2,zz\n", 2, "field 4 (level)"),
        (
            "3000,0x1,2\n3100,0x2,0x1,2,0\n3200,0x3,0x2,0\n3406,0x9,0x4,0x1\n",
            4,
            "not the one before",
        ),
        (
            "3300,0x4,0x3\n3406,0x9,0x4,0x100000000\n",
            2,
            "does not fit 32 bits",
        ),
        ("3300,0x4,0x3\n3408,0x9,0x4\n", 2, "field 3 (vport)"),
    ] {
        let e = parse(text).expect_err(text);
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().contains(want), "{text:?}: {e}");
    }
}
