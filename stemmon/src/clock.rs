//! The clock that times every stage call, one for the process: the CPU's time-stamp
//! counter (through quanta, calibrated against the monotonic clock) where the kernel
//! trusts it, `clock_gettime(CLOCK_MONOTONIC)` everywhere else. Either way a call's
//! time is exact: the TSC is taken only while it ticks at one rate on every CPU.
//! The hot path keeps raw readings (ticks) and converts only differences.

use std::sync::OnceLock;

/// A source of raw readings and the conversion of their differences to nanoseconds.
#[derive(Clone, Debug)]
pub(crate) enum Clock {
    /// The TSC read inline (`rdtsc`), converted with quanta's calibration: quanta's
    /// clock, found to read the TSC itself.
    #[cfg(target_arch = "x86_64")]
    Tsc(quanta::Clock),
    /// quanta's clock as it is: the TSC where the CPU has an invariant one (quanta checks
    /// `cpuid`) and, on x86_64, something else read it; or, in tests, a mock moved by hand.
    Quanta(quanta::Clock),
    /// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds (the vDSO's, no system call).
    Monotonic,
}

impl Clock {
    /// The clock for this machine: the TSC if the kernel trusts it, else monotonic.
    fn for_this_machine() -> Clock {
        if !crate::sys::tsc_trusted() {
            return Clock::Monotonic;
        }
        let clock = quanta::Clock::new();
        #[cfg(target_arch = "x86_64")]
        if reads_the_tsc(&clock) {
            return Clock::Tsc(clock);
        }
        Clock::Quanta(clock)
    }

    /// A reading now, in ticks.
    #[inline(always)]
    pub(crate) fn raw(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Clock::Tsc(_) => tsc(),
            Clock::Quanta(clock) => clock.raw(),
            Clock::Monotonic => monotonic_nanos(),
        }
    }

    /// The nanoseconds from reading `start` to reading `end` (0 if `end` is earlier).
    #[inline]
    pub(crate) fn delta_as_nanos(&self, start: u64, end: u64) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Clock::Tsc(clock) => clock.delta_as_nanos(start, end),
            Clock::Quanta(clock) => clock.delta_as_nanos(start, end),
            Clock::Monotonic => end.saturating_sub(start),
        }
    }

    /// Whether readings come from the TSC (not a mock, not the monotonic clock).
    #[cfg(test)]
    pub(crate) fn is_tsc(&self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Clock::Tsc(_) => true,
            Clock::Quanta(_) | Clock::Monotonic => false,
        }
    }
}

/// The time-stamp counter now.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86_64 (every such CPU has it); it reads a
    // register and touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether `clock` reads the TSC (quanta's counter mode, the only one whose readings
/// it scales): one of its readings lies between two of the TSC's, taken around it. A
/// monotonic reading (nanoseconds, where quanta found no invariant TSC) or a mock
/// would fall there only by a coincidence of a few hundred ticks in 2^64, and is tried
/// three times.
#[cfg(target_arch = "x86_64")]
fn reads_the_tsc(clock: &quanta::Clock) -> bool {
    (0..3).all(|_| {
        let before = tsc();
        let read = clock.raw();
        let after = tsc();
        before <= read && read <= after
    })
}

/// `CLOCK_MONOTONIC` in nanoseconds; `std::time::Instant` reads the same clock, but
/// keeps its value opaque.
#[inline]
fn monotonic_nanos() -> u64 {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        (now.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(now.tv_nsec as u64)
    }
    #[cfg(not(unix))]
    {
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// The process's call clock, chosen (and calibrated) at the first use.
pub(crate) fn shared() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(Clock::for_this_machine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tsc_is_taken_exactly_where_the_kernel_trusts_it() {
        // quanta takes it only where `cpuid` says it is invariant too.
        #[cfg(target_arch = "x86_64")]
        let quanta_reads_it = reads_the_tsc(&quanta::Clock::new());
        #[cfg(not(target_arch = "x86_64"))]
        let quanta_reads_it = false;
        assert_eq!(
            shared().is_tsc(),
            crate::sys::tsc_trusted() && quanta_reads_it
        );
        // A mock is never taken for the TSC.
        #[cfg(target_arch = "x86_64")]
        assert!(!reads_the_tsc(&quanta::Clock::mock().0));
    }

    #[test]
    fn both_clocks_move_forward_and_convert_their_differences() {
        for clock in [
            Clock::Monotonic,
            Clock::Quanta(quanta::Clock::new()),
            shared().clone(),
        ] {
            let started = clock.raw();
            let since = std::time::Instant::now();
            while since.elapsed() < std::time::Duration::from_millis(5) {
                std::hint::spin_loop();
            }
            let nanos = clock.delta_as_nanos(started, clock.raw());
            let elapsed = since.elapsed().as_nanos() as u64;
            // Within the 5 ms spun and what the Instant saw after it (generous: a loaded
            // machine may stop this thread between the two reads).
            assert!(
                nanos >= 4_000_000 && nanos <= elapsed + 1_000_000,
                "{nanos} ns of {elapsed}"
            );
            assert_eq!(clock.delta_as_nanos(started + 10, started), 0);
        }
    }
}
