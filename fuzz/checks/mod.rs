//! The property each fuzz target checks, one module per target, as a
//! plain function: the fuzz targets (`fuzz/fuzz_targets/`) and the
//! seed replay in `cargo test` (`cli/tests/fuzz_seeds.rs`) run the same
//! code.

#![allow(dead_code)]

pub mod config_parse;
pub mod conntrack;
pub mod control_request;
pub mod dr_dump;
pub mod extract;
pub mod flow_file;
pub mod flow_text;
pub mod meter_parse;
pub mod netlink_host;
pub mod netlink_link;
pub mod openflow_channel;
pub mod openflow_parse;
pub mod ovsdb_message;
pub mod pcap_read;
pub mod prm_decode;
pub mod tunnel_decap;
