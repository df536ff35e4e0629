use clap::CommandFactory;

use super::*;

#[test]
fn the_command_line_definition_is_consistent() {
    Args::command().debug_assert();
}

#[test]
fn bad_arguments_name_what_is_wrong() {
    let e = Args::try_parse_from(["eswitchd", "replay", "--speed", "fast"])
        .expect_err("bad speed")
        .to_string();
    assert!(e.contains("bad speed \"fast\""), "{e}");
    let e = Args::try_parse_from(["eswitchd", "replay", "--demo", "--pcap", "x.pcap"])
        .expect_err("conflict")
        .to_string();
    assert!(e.contains("--pcap"), "{e}");
    let ok = Args::try_parse_from(["eswitchd", "replay", "--demo", "--speed", "2.5"]).expect("ok");
    let Command::Replay(r) = ok.command else {
        panic!("replay expected");
    };
    assert_eq!(r.speed, Speed::Times(2.5));
}
