//! Fuzz target for the device dump parser (`mlx5::dr_dump::parse`, what
//! `mlx5dv_dump_dr_domain` writes): any text parses or fails with an
//! error naming a line inside it, without a panic; a dump that parses
//! parses the same with blank lines added, and every rule's actions came
//! from records that followed it.
//!
//! Input: arbitrary UTF-8, as a dump.

use mlx5::dr_dump::parse;

/// The check on one input: panics where the property fails.
pub fn check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match parse(s) {
        Ok(d) => {
            let spaced = format!("\n{}\n\n", s.replace('\n', "\n\n"));
            assert_eq!(parse(&spaced).as_ref(), Ok(&d), "{s:?}");
            let actions = s
                .lines()
                .filter(|l| {
                    l.split(',')
                        .next()
                        .and_then(|t| t.trim().parse::<u32>().ok())
                        .is_some_and(|t| (3400..3500).contains(&t))
                })
                .count();
            let parsed: usize = d.rules.iter().map(|r| r.actions.len()).sum();
            assert_eq!(parsed, actions, "{s:?}");
        }
        Err(e) => assert!(e.line >= 1 && e.line <= s.lines().count(), "{e}"),
    }
}
