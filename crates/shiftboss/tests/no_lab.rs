//! The product binary carries no lab: the chaos harness and the benchmark drivers are
//! `shiftboss-lab`'s (issue 24, item 2).

mod common;

#[test]
fn shiftboss_help_offers_no_chaos_and_no_bench() {
    let out = common::bin().arg("--help").output().expect("the binary runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("demo") && help.contains("serve"), "{help}");
    for lab in ["chaos", "bench"] {
        assert!(!help.contains(lab), "`shiftboss --help` mentions {lab}:\n{help}");
        let o = common::bin().arg(lab).output().expect("the binary runs");
        assert!(!o.status.success(), "`shiftboss {lab}` ran");
    }
}
