//! The sampler's clocks: deadlines on a fixed grid, `start + k × every`.
//!
//! A deadline computed as "now + every" after each tick drifts by the time the tick took
//! and by how late the thread woke: at a 0.25 s log interval that gave 10 or 11 lines in
//! 4 s instead of 16, and with 1 s samples and 1 s log lines, a line every 2 s. On a
//! grid, a late tick does not move the next one; ticks missed during a stall are
//! skipped, not caught up in a burst. Arithmetic is checked: an interval too long for
//! the clock (`Duration::MAX`) means "never", not a panic.

use std::time::{Duration, Instant};

/// Deadlines at `start + k × every`, k = 1, 2, ...
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grid {
    start: Instant,
    every: Duration,
    /// The next deadline; `None` once it is beyond what an `Instant` holds.
    next: Option<Instant>,
}

impl Grid {
    /// The grid from `start`; the first deadline is `start + every`. A zero interval is
    /// taken as one nanosecond.
    pub(crate) fn new(start: Instant, every: Duration) -> Grid {
        let every = every.max(Duration::from_nanos(1));
        Grid {
            start,
            every,
            next: start.checked_add(every),
        }
    }

    /// The next deadline, or `None` for never.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.next
    }

    /// Whether the next deadline has come at `now`; if it has, moves on to the first grid
    /// point after `now`, skipping the ones a stall missed.
    pub(crate) fn due(&mut self, now: Instant) -> bool {
        match self.next {
            Some(next) if now >= next => {
                self.next = next_after(self.start, self.every, now);
                true
            }
            _ => false,
        }
    }
}

/// The first `start + k × every` strictly after `now` (k ≥ 1), or `None` if it is beyond
/// the clock's range. `every` must not be zero.
pub(crate) fn next_after(start: Instant, every: Duration, now: Instant) -> Option<Instant> {
    let every_nanos = every.as_nanos();
    let ticks = now.saturating_duration_since(start).as_nanos() / every_nanos + 1;
    let offset = ticks.checked_mul(every_nanos)?;
    let seconds = u64::try_from(offset / 1_000_000_000).ok()?;
    let nanos = (offset % 1_000_000_000) as u32;
    start.checked_add(Duration::new(seconds, nanos))
}

/// The earlier of two optional deadlines (`None` is never).
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ticks_stay_on_the_grid_however_late_they_run() {
        let t0 = Instant::now();
        let mut grid = Grid::new(t0, 250 * MS);
        assert_eq!(grid.next(), Some(t0 + 250 * MS));
        assert!(!grid.due(t0 + 249 * MS));
        // Woken 30 ms late: the next deadline is still 500 ms, not 530 ms.
        assert!(grid.due(t0 + 280 * MS));
        assert_eq!(grid.next(), Some(t0 + 500 * MS));
        assert!(grid.due(t0 + 500 * MS));
        assert_eq!(grid.next(), Some(t0 + 750 * MS));
    }

    #[test]
    fn four_seconds_at_a_quarter_second_are_sixteen_ticks() {
        // A thread that wakes 3 ms late at every deadline and works 2 ms after it.
        let t0 = Instant::now();
        let mut grid = Grid::new(t0, 250 * MS);
        let mut ticks = 0;
        while let Some(at) = grid.next().filter(|at| *at <= t0 + 4000 * MS) {
            assert!(grid.due(at + 3 * MS));
            ticks += 1;
            assert!(!grid.due(at + 5 * MS));
        }
        assert_eq!(ticks, 16);
    }

    #[test]
    fn a_stall_skips_the_missed_ticks_instead_of_bursting() {
        let t0 = Instant::now();
        let mut grid = Grid::new(t0, 100 * MS);
        assert!(grid.due(t0 + 1050 * MS));
        assert_eq!(grid.next(), Some(t0 + 1100 * MS));
        assert!(!grid.due(t0 + 1060 * MS));
    }

    #[test]
    fn equal_intervals_tick_together() {
        // 1 s samples and 1 s log lines: both due at 1, 2, 3 s, never every other second.
        let t0 = Instant::now();
        let (mut samples, mut logs) = (Grid::new(t0, 1000 * MS), Grid::new(t0, 1000 * MS));
        for second in 1..=5u64 {
            let at = earliest(samples.next(), logs.next()).unwrap();
            assert_eq!(at, t0 + Duration::from_secs(second));
            let now = at + 7 * MS;
            assert!(samples.due(now) && logs.due(now), "second {second}");
        }
    }

    #[test]
    fn an_interval_beyond_the_clock_is_never_not_a_panic() {
        let t0 = Instant::now();
        let mut grid = Grid::new(t0, Duration::MAX);
        assert_eq!(grid.next(), None);
        assert!(!grid.due(t0 + Duration::from_secs(1)));
        assert_eq!(
            next_after(t0, Duration::from_secs(u64::MAX / 2), t0 + MS),
            None
        );
        let zero = Grid::new(t0, Duration::ZERO);
        assert_eq!(zero.next(), Some(t0 + Duration::from_nanos(1)));
        assert_eq!(earliest(None, None), None);
        assert_eq!(earliest(Some(t0), None), Some(t0));
    }
}
