//! The benchmark commands' output parses with perftest's column headers. Shapes only: no
//! timing is asserted (performance never fails a test).

mod common;

use common::run;

const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
const BW_HEADER: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
const BW_HEADER_G: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";

/// The numeric rows after `header`, each split into fields.
fn rows(stdout: &str, header: &str) -> Vec<Vec<f64>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == header)
        .unwrap_or_else(|| panic!("no header line {header:?} in:\n{stdout}"));
    lines[at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("----"))
        .map(|l| {
            l.split_whitespace()
                .map(|f| {
                    f.parse::<f64>()
                        .unwrap_or_else(|_| panic!("non-numeric field {f:?} in {l:?}"))
                })
                .collect()
        })
        .collect()
}

/// Each of `tests` run with `-n 50` prints one row under `header`: `fields` numbers, the first
/// two the default message size `size` and the 50 iterations.
fn one_row_each(tests: [&str; 3], header: &str, fields: usize, size: f64) {
    for test in tests {
        let (ok, out, err) = run(&[test, "-n", "50"]);
        assert!(ok, "{test}: {err}");
        let r = rows(&out, header);
        assert_eq!(r.len(), 1, "{test}");
        assert_eq!(r[0].len(), fields, "{test}: {:?}", r[0]);
        assert_eq!((r[0][0], r[0][1]), (size, 50.0), "{test}");
    }
}

#[test]
fn latency_tests_print_perftest_rows() {
    one_row_each(["send_lat", "write_lat", "read_lat"], LAT_HEADER, 9, 2.0);
}

#[test]
fn bandwidth_tests_print_perftest_rows() {
    one_row_each(["send_bw", "write_bw", "read_bw"], BW_HEADER, 5, 65536.0);
    let (ok, out, err) = run(&["write_bw", "-n", "20", "--report_gbits", "-N"]);
    assert!(ok, "{err}");
    assert_eq!(rows(&out, BW_HEADER_G)[0][2], 0.0, "-N prints no peak");
}

#[test]
fn other_transports_and_events_run() {
    for args in [
        &["send_lat", "-n", "20", "-c", "UD"][..],
        &["send_bw", "-n", "100", "-c", "UC", "-s", "512"],
        &["send_lat", "-n", "20", "-e"],
        &["read_lat", "-n", "20", "-e"],
        &["send_bw", "-n", "100", "-c", "UD", "-s", "256", "-e"],
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        assert!(
            out.lines().any(|l| l == LAT_HEADER || l == BW_HEADER),
            "{args:?}:\n{out}"
        );
    }
}

/// `(bytes, iterations)` of the rows after the first column header line.
fn sizes_and_iterations(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(" #bytes"))
        .skip(1)
        .take_while(|l| !l.starts_with("----"))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .take(2)
                .map(|f| f.parse().unwrap_or_else(|_| panic!("{l:?}")))
                .collect();
            (f[0], f[1])
        })
        .collect()
}

#[test]
fn all_sizes_sweep_runs_the_n_iterations_for_every_size_as_perftest_does() {
    // Debian's ib_write_bw -a -n 20 (perftest 4.5), captured on the soft HCAs through the
    // libibverbs over WinVerbs: every size from 2 to 8 MiB runs 20 iterations.
    let real = sizes_and_iterations(include_str!("data/ib_write_bw-a-n20.txt"));
    assert_eq!(real.len(), 23);
    let (ok, out, err) = run(&["write_bw", "-a", "-n", "20"]);
    assert!(ok, "{err}");
    assert_eq!(rows(&out, BW_HEADER).len(), 23);
    assert_eq!(sizes_and_iterations(&out), real);
    let (ok, out, err) = run(&["send_lat", "-a", "-n", "10"]);
    assert!(ok, "{err}");
    let lat = rows(&out, LAT_HEADER);
    assert_eq!(lat.len(), 23);
    assert!(lat.iter().all(|r| r[1] == 10.0), "{lat:?}");
}

#[test]
fn fast_sweep_scales_the_large_sizes_down_only_when_asked() {
    let (ok, out, err) = run(&["write_bw", "-a", "-n", "20", "--fast_sweep"]);
    assert!(ok, "{err}");
    let rows = sizes_and_iterations(&out);
    assert_eq!(rows.len(), 23);
    // At most 64 MiB per size: 8 MiB messages run 8 times.
    assert_eq!(rows.last(), Some(&(8 << 20, 8)));
    assert_eq!(rows.first(), Some(&(2, 20)));
    let (_, help, _) = run(&["write_bw", "--help"]);
    assert!(help.contains("--fast_sweep"), "{help}");
}

/// perftest's text (`force_dependecies` in `perftest_parameters.c`, upstream perftest, whose
/// header format these tools print; Debian's perftest 4.5 predates the line).
const PEAK_WARNING: &str = " WARNING: BW peak won't be measured in this run.";

#[test]
fn duration_bandwidth_runs_print_perftests_peak_warning_first() {
    let (ok, out, err) = run(&["write_bw", "-D", "1"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], [PEAK_WARNING, RULE], "{out}");
    assert_eq!(out.matches(PEAK_WARNING).count(), 1);
    // The peak column is then zero.
    assert_eq!(rows(&out, BW_HEADER)[0][2], 0.0);
    // perftest prints it in its duration-mode check, before refusing -a there.
    let (ok, out, err) = run(&["write_bw", "-D", "1", "-a"]);
    assert!(!ok);
    assert_eq!(out.lines().collect::<Vec<_>>(), [PEAK_WARNING, RULE]);
    assert!(err.contains("Duration mode currently doesn't support running on all sizes."));
    let (ok, out, _) = run(&["write_bw", "-D", "1", "-e"]);
    assert!(
        !ok && !out.contains("WARNING"),
        "-e is refused earlier on WRITE"
    );
    // perftest cancels the peak of a run beyond 20000 iterations too, and says so.
    let (ok, out, err) = run(&["send_bw", "-n", "20001", "-s", "64"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().next(), Some(PEAK_WARNING), "{out}");
    assert_eq!(rows(&out, BW_HEADER)[0][2], 0.0);
    for args in [
        &["write_bw", "-D", "1", "-N"][..],
        &["write_lat", "-D", "1"],
        &["write_bw", "-n", "20"],
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        assert!(!out.contains("WARNING"), "{args:?}:\n{out}");
    }
}

#[test]
fn json_has_the_same_numbers() {
    let (ok, out, err) = run(&["send_lat", "-n", "20", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["results"][0]["bytes"], 2);
    assert_eq!(v["results"][0]["iterations"], 20);
    assert!(v["results"][0]["t_typical"].is_number());
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for (args, want) in [
        (
            &["write_lat", "-c", "UD"][..],
            "UD connection only possible in SEND verb",
        ),
        (
            &["write_bw", "-e"],
            "Events feature not available on WRITE verb",
        ),
        (&["send_lat", "-s", "0"], "Size must be between"),
        (&["send_lat", "--device", "7"], "no device with index 7"),
        (&["send_bw", "--device", "0xdead"], "no device with GUID"),
        (&["send_lat", "--transport", "windows"], "windows transport"),
        (&["pingpong", "-s", "0"], "size must be at least 1 byte"),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The client's header block as perftest's `ctx_print_test_info` prints it (a build with the
/// ibv_wr API and thread domains but no relaxed-ordering support), line by line, with what
/// perftest prints before it while it parses the options.
fn header_lines(out: &str) -> Vec<&str> {
    let lines: Vec<&str> = out.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("----"))
        .expect("header start");
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("----"))
        .expect("header end")
        + start
        + 1;
    lines[..=end].to_vec()
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

#[test]
fn the_header_is_the_clients_as_perftest_prints_it() {
    let (ok, out, err) = run(&["send_lat", "-n", "20"]);
    assert!(ok, "{err}");
    let rule = RULE;
    assert_eq!(
        header_lines(&out),
        [
            // perftest turns dynamic CQE polling off for every latency test, and says so.
            "Disabling dynamic polling",
            rule,
            "                    Send Latency Test",
            " Dual-port       : OFF\t\tDevice         : softhca0",
            " Number of qps   : 1\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF",
            " PCIe relax order: Unsupported\t\tLock-free      : OFF",
            " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF",
            // The client prints its TX depth; the RX depth is the server's line.
            " TX depth        : 1",
            " Mtu             : 4096[B]",
            " Link type       : Ethernet",
            " GID index       : 0",
            " Max inline data : 236[B]",
            " rdma_cm QPs\t : OFF",
            " Data ex. method : Ethernet",
            rule,
        ]
    );
    // The address lines: BASIC_ADDR_FMT (a RoCE port's LID is 0) and, on Ethernet, the GID
    // line in PERF_GID_FMT (each byte in decimal, at least two digits).
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(" local address:"))
        .unwrap();
    for (line, side) in [(lines[at], "local"), (lines[at + 2], "remote")] {
        let rest = line
            .strip_prefix(&format!(" {side} address: LID 0000 QPN 0x"))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(rest.contains(" PSN 0x"), "{line}");
    }
    for gid in [lines[at + 1], lines[at + 3]] {
        let bytes = gid
            .strip_prefix(" GID: ")
            .unwrap_or_else(|| panic!("{gid}"));
        let fields: Vec<&str> = bytes.split(':').collect();
        assert_eq!(fields.len(), 16, "{gid}");
        assert!(
            fields
                .iter()
                .all(|f| f.len() >= 2 && f.parse::<u8>().is_ok()),
            "{gid}"
        );
    }
}

#[test]
fn bandwidth_headers_name_the_cqe_poll_batch_as_perftest_does() {
    // perftest polls a dynamic batch in bandwidth runs of 3000 iterations or more and a fixed
    // one (16, or --cqe_poll) otherwise, announcing `Disabling dynamic polling` for runs under
    // 3000 iterations even when an option already turned it off.
    for (args, notice, batch) in [
        (&["write_bw", "-n", "3000"][..], false, "Dynamic"),
        (&["write_bw", "-n", "2999"], true, "16"),
        (&["send_bw", "-n", "50"], true, "16"),
        (
            &["send_bw", "-n", "50", "--disable_dynamic_polling"],
            true,
            "16",
        ),
        (&["read_bw", "-n", "3000", "--cqe_poll", "32"], false, "32"),
        (
            &["write_bw", "-n", "3000", "--disable_dynamic_polling"],
            false,
            "16",
        ),
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        let header = header_lines(&out);
        assert_eq!(
            header[0] == "Disabling dynamic polling",
            notice,
            "{args:?}:\n{out}"
        );
        assert_eq!(header[usize::from(notice)], RULE, "{args:?}:\n{out}");
        let at = header
            .iter()
            .position(|l| l.starts_with(" CQ Moderation   : "))
            .unwrap_or_else(|| panic!("{args:?}:\n{out}"));
        assert_eq!(
            header[at + 1],
            format!(" CQE Poll Batch  : {batch}"),
            "{args:?}"
        );
        assert_eq!(rows(&out, BW_HEADER).len(), 1, "{args:?}");
    }
    let (ok, out, err) = run(&["write_bw", "-n", "3000"]);
    assert!(ok, "{err}");
    assert_eq!(
        header_lines(&out),
        [
            RULE,
            "                    RDMA_Write BW Test",
            " Dual-port       : OFF\t\tDevice         : softhca0",
            " Number of qps   : 1\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF",
            " PCIe relax order: Unsupported\t\tLock-free      : OFF",
            " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF",
            " TX depth        : 128",
            // 64 KiB messages: perftest turns CQ moderation off above 8 KiB.
            " CQ Moderation   : 1",
            " CQE Poll Batch  : Dynamic",
            " Mtu             : 4096[B]",
            " Link type       : Ethernet",
            " GID index       : 0",
            " Max inline data : 0[B]",
            " rdma_cm QPs\t : OFF",
            " Data ex. method : Ethernet",
            RULE,
        ]
    );
    let (ok, _, err) = run(&["send_bw", "--cqe_poll", "0"]);
    assert!(!ok && !err.contains("panicked"), "{err}");
}

#[test]
fn outstanding_reads_come_from_the_device() {
    // The soft HCA's max_qp_rd_atom (what `devinfo -v` shows) by default, as perftest's
    // ctx_set_out_reads; -o asks for fewer; more is capped with perftest's message.
    for (args, want, warned) in [
        (&["read_lat", "-n", "20"][..], 16, false),
        (&["read_bw", "-n", "50", "-o", "4"], 4, false),
        (&["read_lat", "-n", "20", "-o", "99"], 16, true),
    ] {
        let (ok, out, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        assert!(
            out.contains(&format!(" Outstand reads  : {want}\n")),
            "{args:?}:\n{out}"
        );
        assert!(
            out.contains(&format!(" OUT {want:#04x} RKey")),
            "{args:?}:\n{out}"
        );
        assert_eq!(
            err.contains("Number of outstanding reads is above max = 16"),
            warned,
            "{args:?}: {err}"
        );
    }
}

#[test]
fn ud_sizes_stop_at_the_mtu_the_header_prints() {
    let (ok, out, err) = run(&["send_bw", "-c", "UD", "-a", "-n", "20"]);
    assert!(ok, "{err}");
    assert!(out.contains(" Mtu             : 4096[B]\n"), "{out}");
    let sizes: Vec<u64> = rows(&out, BW_HEADER).iter().map(|r| r[0] as u64).collect();
    assert_eq!(sizes.last(), Some(&4096), "{sizes:?}");
    // A larger -s is cut to the MTU, as perftest does.
    let (ok, out, err) = run(&["send_lat", "-c", "UD", "-s", "8192", "-n", "20"]);
    assert!(ok, "{err}");
    assert_eq!(rows(&out, LAT_HEADER)[0][0], 4096.0);
}

#[test]
fn out_json_writes_perftests_schema() {
    let dir = std::env::temp_dir().join(format!("wvharness-out-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("report.json");
    let file_arg = file.to_str().unwrap();
    for (args, results) in [
        (
            &[
                "send_lat",
                "-n",
                "20",
                "--out_json",
                "--out_json_file",
                file_arg,
            ][..],
            &[
                "MsgSize",
                "n_iterations",
                "t_min",
                "t_max",
                "t_typical",
                "t_avg",
                "t_stdev",
                "percentile_99",
                "percentile_99.9",
            ][..],
        ),
        (
            &[
                "read_bw",
                "-n",
                "50",
                "--out_json",
                "--out_json_file",
                file_arg,
            ],
            &[
                "MsgSize",
                "n_iterations",
                "BW_peak",
                "BW_average",
                "MsgRate",
            ],
        ),
    ] {
        let (ok, _, err) = run(args);
        assert!(ok, "{args:?}: {err}");
        let text = std::fs::read_to_string(&file).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).expect("perftest's JSON");
        let info = v["test_info"].as_object().unwrap();
        // write_test_info_to_file's members, in its order (those that apply).
        let keys: Vec<&str> = info.keys().map(String::as_str).collect();
        let mut want = vec![
            "test",
            "Dual_port",
            "Device",
            "Number_of_qps",
            "Transport_type",
            "Connection_type",
            "Using_SRQ",
            "PCIe_relax_order",
            "ibv_wr_API",
            "TX_depth",
        ];
        if args[0].ends_with("_bw") {
            want.push("CQ_Moderation");
        }
        want.extend(["Mtu", "Link_type", "GID_index"]);
        want.push(if args[0].starts_with("read") {
            "Outstand_reads"
        } else {
            "Max_inline_data"
        });
        want.extend([
            "rdma_cm_QPs",
            "Use_ROCm_memory",
            "Use_MUSA_memory",
            "Data_ex_method",
        ]);
        let mut sorted_want = want.clone();
        sorted_want.sort_unstable();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        assert_eq!(sorted_keys, sorted_want, "{text}");
        // serde_json's map is sorted; the order is checked on the text.
        let positions: Vec<usize> = want
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert_eq!(
            info["test"],
            if args[0] == "send_lat" {
                "Send_Latency_Test"
            } else {
                "RDMA_Read_BW_Test"
            }
        );
        let r = v["results"].as_object().unwrap();
        let mut got: Vec<&str> = r.keys().map(String::as_str).collect();
        let mut want_r = results.to_vec();
        got.sort_unstable();
        want_r.sort_unstable();
        assert_eq!(got, want_r, "{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
