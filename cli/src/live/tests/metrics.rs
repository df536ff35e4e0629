//! The metrics endpoint on the live daemon (memory ports): the scrape's
//! text against the traffic sent, and `/metrics` over HTTP.

use std::io::{Read, Write};

use megaflow::port::PacketMeta;

use super::tests::{config, flows, frame, limits, rep, wait_for, MemFactory};
use super::*;

/// The value of the sample `name{labels}` in `text` (labels as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_scrape_counts_what_traffic_did_and_http_serves_it() {
    let (factory, h) = MemFactory::new(&["vm1", "vm2", "vm3"]);
    let mut d = Daemon::start(&config(), &flows(), factory, limits()).expect("start");
    for (i, n) in ["vm1", "vm2", "vm3"].iter().enumerate() {
        d.apply(&PortEvent::Added(rep(10 + i as u32, n, i as u16)));
    }
    let mut got = 0;
    for i in 0..20 {
        assert!(h["vm1"].rx.inject(&frame(1000), PacketMeta::default()));
        wait_for("vm1 → vm2", || {
            got += h["vm2"].received().len();
            got == i + 1
        });
    }
    let core = d.core();
    wait_for("the counters published and polled", || {
        let sw = lock(&core);
        let c = sw.counters();
        let dp: u64 = sw.datapath_counters().iter().map(|c| c.dp.packets).sum();
        c.rx.packets == 20
            && sw.port_summaries()[1].tx_hw_packets + sw.port_summaries()[1].tx_sw_packets == 20
            && dp == c.sw_handled
    });
    drop(core);
    let scrape = d.scrape_fn(None, "sim");
    let text = scrape().expect("scrape");
    let tx = |path: &str| {
        sample(
            &text,
            &format!(
                "eswitch_port_tx_packets_total{{port=\"vm2\",ofport=\"2\",type=\"representor\",path=\"{path}\"}}"
            ),
        )
        .unwrap_or_else(|| panic!("no vm2 {path} tx in:\n{text}"))
    };
    assert_eq!(tx("hardware") + tx("software"), 20.0, "{text}");
    // The datapath threads ran every packet software forwarded; the one
    // that missed went up as the one upcall.
    // Summed over the threads: the samples of `series` with `label`.
    let sum = |series: &str, label: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(series) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let packets = sum("eswitch_datapath_packets_total{thread=", "");
    assert_eq!(packets, tx("software"), "{text}");
    let lookups = |r: &str| {
        let label = format!("result=\"{r}\"");
        sum("eswitch_datapath_lookups_total{thread=", &label)
    };
    assert_eq!(lookups("miss"), 1.0, "{text}");
    assert_eq!(
        lookups("emc") + lookups("megaflow") + lookups("hinted"),
        tx("software") - 1.0,
        "{text}"
    );
    assert!(tx("hardware") >= 1.0, "the flow was offloaded: {text}");
    assert_eq!(
        sample(&text, "eswitch_megaflows{state=\"offloaded\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "eswitch_offloaded_rules"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "eswitch_upcalls_total"), Some(1.0), "{text}");
    assert!(
        text.contains(&format!(
            "eswitch_build_info{{version=\"{}\",backend=\"sim\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(
        text.contains("# TYPE eswitch_revalidator_pass_seconds histogram"),
        "{text}"
    );
    let passes = sample(&text, "eswitch_revalidator_pass_seconds_count").expect("passes");
    assert!(passes >= 1.0, "{text}");
    assert!(sample(&text, "eswitch_counter_poll_age_seconds").is_some_and(|a| a < 5.0));
    assert!(
        text.trim_end().ends_with("# EOF"),
        "OpenMetrics text ends with # EOF"
    );
    // Over HTTP, as Prometheus asks for it.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    l.set_nonblocking(true).expect("nonblocking");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).expect("listener");
            tokio::select! {
                _ = metrics::serve(l, scrape) => {}
                _ = stop_rx => {}
            }
        })
    });
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut r = String::new();
        s.read_to_string(&mut r).expect("read");
        r
    };
    let r = get("/metrics");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains(metrics::CONTENT_TYPE), "{r}");
    assert!(
        r.contains("eswitch_port_tx_packets_total{port=\"vm2\""),
        "{r}"
    );
    assert!(get("/nothing").starts_with("HTTP/1.1 404"));
    let _ = stop_tx.send(());
    server.join().expect("server");
    d.stop().expect("stop");
}
