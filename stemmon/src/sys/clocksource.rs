//! Whether the CPU's time-stamp counter may time stage calls: the kernel's own verdict.
//!
//! Linux keeps the TSC as its clock source only while it finds it invariant and in step
//! across CPUs; once it marks the TSC unstable it switches to another (`hpet`,
//! `acpi_pm`) and says so in `current_clocksource`. Where that file cannot be read, the
//! CPU's flags stand in: `constant_tsc` (it ticks at one rate whatever the frequency)
//! and `nonstop_tsc` (it does not stop in deep sleep states).

/// The kernel's clock source now, and the flags of the first CPU in `/proc/cpuinfo`.
#[cfg(target_os = "linux")]
pub(crate) fn tsc_trusted() -> bool {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    let cpuinfo = || std::fs::read_to_string("/proc/cpuinfo").ok();
    trusted(source.ok().as_deref(), cpuinfo)
}

/// Elsewhere the TSC is never taken: the monotonic clock times every call.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tsc_trusted() -> bool {
    false
}

/// The verdict from the clock source's name, if read, else from the CPU flags
/// (`cpuinfo`, read only if needed).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn trusted(source: Option<&str>, cpuinfo: impl FnOnce() -> Option<String>) -> bool {
    if let Some(source) = source {
        return source.trim() == "tsc";
    }
    let Some(cpuinfo) = cpuinfo() else {
        return false;
    };
    let Some(flags) = cpuinfo
        .lines()
        .find(|line| line.starts_with("flags"))
        .and_then(|line| line.split_once(':'))
    else {
        return false;
    };
    let has = |flag: &str| flags.1.split_whitespace().any(|f| f == flag);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(test)]
mod tests {
    use super::trusted;

    #[test]
    fn the_kernels_clock_source_decides_and_the_flags_stand_in_where_it_is_unread() {
        let unread = || -> Option<String> { panic!("the flags are not read") };
        assert!(trusted(Some("tsc\n"), unread));
        assert!(!trusted(Some("hpet\n"), unread));
        assert!(!trusted(Some("kvm-clock\n"), unread));
        let flags = |line: &'static str| move || Some(format!("processor\t: 0\n{line}\n"));
        assert!(trusted(
            None,
            flags("flags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp")
        ));
        assert!(!trusted(None, flags("flags\t\t: fpu tsc constant_tsc")));
        assert!(!trusted(None, flags("flags\t\t: fpu nonstop_tsc")));
        assert!(!trusted(None, || None));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machines_verdict_is_what_its_files_say() {
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        );
        if let Ok(source) = source {
            assert_eq!(super::tsc_trusted(), source.trim() == "tsc");
        }
    }
}
