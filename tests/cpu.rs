//! CPU and I/O per stage for the whole tree (the book's `cpu-io.md`), against the kernel's own
//! figures: `getrusage` of this process and of its reaped children, real threads, real
//! child processes, a real disk.
#![cfg(target_os = "linux")]

use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};
use stemmon::report::{CpuIo, StageReport};
use stemmon::{Monitor, Report};
use stemmon_suite::{cannot_run, serial, wait_for_samples, MIB};

fn start() -> Monitor {
    Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(50))
        .start()
        .unwrap()
}

fn stage<'a>(report: &'a Report, path: &str) -> &'a StageReport {
    report
        .stage(path)
        .unwrap_or_else(|| panic!("no stage {path} in {:?}", report.stages))
}

/// User plus system seconds of the process's own threads (`RUSAGE_SELF`) or of the
/// children it reaped (`RUSAGE_CHILDREN`).
fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes and outlives the call; `who` is valid.
    assert_eq!(unsafe { libc::getrusage(who, &mut usage) }, 0);
    let time = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The calling thread's CPU clock, in seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: an all-zero timespec is a valid value of this plain C struct.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `now` is valid for writes and outlives the call; the clock id is valid.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(read, 0);
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// Spins until this thread has had `seconds` of CPU (not of wall time: on a loaded
/// machine it takes longer, never less), within a generous wall deadline.
fn spin_cpu(seconds: f64) {
    let start = thread_cpu_seconds();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut x = 1u64;
    while thread_cpu_seconds() - start < seconds {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        assert!(Instant::now() < deadline, "no CPU for this thread in 60 s");
    }
}

fn cpu(io: &CpuIo) -> f64 {
    io.cpu_user_seconds.expect("user CPU read") + io.cpu_system_seconds.expect("system CPU read")
}

#[test]
fn two_busy_threads_read_two_cpu_seconds_and_their_cores() {
    let _serial = serial();
    let monitor = start();
    let (truth_before, wall_before) = (rusage_seconds(libc::RUSAGE_SELF), Instant::now());
    {
        let _busy = stemmon::stage("busy");
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let _spin = stemmon::stage("spin");
                    spin_cpu(1.0);
                });
            }
        });
    }
    let truth = rusage_seconds(libc::RUSAGE_SELF) - truth_before;
    let truth_wall = wall_before.elapsed().as_secs_f64();
    let report = monitor.finish();
    let busy = stage(&report, "busy");
    let seconds = cpu(&busy.cpu_io);
    println!(
        "busy: {:?}; getrusage {truth} s over {truth_wall} s",
        busy.cpu_io
    );
    // The stage reads what the kernel counted for the process while it was open
    // (the sampler's own few milliseconds included in both).
    assert!(
        (seconds - truth).abs() <= 0.05 * truth + 0.02,
        "stage {seconds} s, getrusage {truth} s"
    );
    assert!((1.7..=2.3).contains(&seconds), "{seconds} CPU seconds");
    let cores = busy.cpu_io.cpu_cores.unwrap();
    let truth_cores = truth / truth_wall;
    assert!(
        (cores - truth_cores).abs() <= 0.1 * truth_cores,
        "stage {cores} cores, getrusage over the wall time {truth_cores}"
    );
    if truth_cores >= 1.65 {
        assert!((1.6..=2.2).contains(&cores), "{cores} cores");
    } else {
        // The two threads could not have two cores (other load on the machine): the
        // stage's figure is checked against the kernel's above, not against the range.
        cannot_run(
            "two_busy_threads cores range",
            &format!("the machine gave the two threads only {truth_cores:.2} cores"),
        );
    }
    // The threads that ran `spin` had 1 s each, whatever else ran meanwhile.
    let spin = stage(&report, "busy/spin");
    let own = spin.cpu_io.cpu_thread_seconds.expect("thread CPU read");
    assert!((1.9..=2.2).contains(&own), "spin's own threads: {own} s");
    // The calls on main only waited for them.
    let waited = busy.cpu_io.cpu_thread_seconds.unwrap();
    assert!(waited < 0.1, "busy's own thread: {waited} s");
    // Two concurrent calls each count the whole tree's growth: about 2 × 2 s over 2 × 1 s.
    assert!(cpu(&spin.cpu_io) >= 1.5 * seconds, "{:?}", spin.cpu_io);

    // The timeline's cores, integrated over time, are the run's CPU. A point's cores
    // cover the time since the last point that had some (a shorter interval is
    // carried into the next point).
    let points: Vec<_> = report
        .timeline
        .iter()
        .filter(|p| p.cpu_cores.is_some())
        .collect();
    assert!(points.len() >= 5, "{:?}", report.timeline);
    let mut since = report.timeline[0].end_seconds;
    let mut integrated = 0.0;
    for point in &report.timeline[1..] {
        if let Some(cores) = point.cpu_cores {
            integrated += cores * (point.end_seconds - since);
            since = point.end_seconds;
        }
    }
    println!(
        "spin: {:?}; timeline integrated {integrated} s",
        spin.cpu_io
    );
    assert!(
        (integrated - seconds).abs() <= 0.15 * seconds,
        "timeline {integrated} CPU seconds, stage {seconds}"
    );
    assert!(report.cpu_io.cpu_cores.unwrap() > 0.0);
    assert!(cpu(&report.cpu_io) >= seconds * 0.95);
}

#[test]
fn a_sleeping_stage_reads_almost_no_cores() {
    let _serial = serial();
    let monitor = start();
    {
        let _sleep = stemmon::stage("sleep");
        std::thread::sleep(Duration::from_millis(400));
    }
    let report = monitor.finish();
    let sleep = stage(&report, "sleep");
    println!("sleep: {:?}", sleep.cpu_io);
    let cores = sleep.cpu_io.cpu_cores.expect("cores read");
    assert!(cores < 0.05, "{cores} cores: {:?}", sleep.cpu_io);
    assert!(sleep.cpu_io.cpu_thread_seconds.unwrap() < 0.01);
}

/// `sh -c` that busies itself for a few hundred milliseconds of CPU and exits `code`.
fn busy_child(code: i32) -> Command {
    let mut command = Command::new("sh");
    command.args([
        "-c",
        &format!("i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; exit {code}"),
    ]);
    command
}

#[test]
fn a_stage_reads_its_cpu_bound_children_as_the_kernel_counted_them() {
    let _serial = serial();
    let monitor = start();
    let before = rusage_seconds(libc::RUSAGE_CHILDREN);
    {
        let _children = stemmon::stage("children");
        let mut children: Vec<_> = (0..3).map(|i| busy_child(i).spawn().unwrap()).collect();
        // Samples read them live, then they are reaped: counted once.
        wait_for_samples(&monitor, 2);
        for child in &mut children {
            child.wait().unwrap();
        }
    }
    let grown = rusage_seconds(libc::RUSAGE_CHILDREN) - before;
    let report = monitor.finish();
    let seconds = cpu(&stage(&report, "children").cpu_io);
    println!("children: {seconds} s; RUSAGE_CHILDREN grew {grown} s");
    assert!(grown > 0.2, "the children ran only {grown} s");
    // The process's own CPU (the sampler, the waits) is in the stage too: a few ms.
    assert!(
        (seconds - grown).abs() <= 0.1 * grown,
        "stage {seconds} s, RUSAGE_CHILDREN grew {grown} s"
    );
}

/// An all-zero `rusage`, for wait4 to fill.
fn zeroed_rusage() -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    unsafe { std::mem::zeroed() }
}

/// Whether this process's child `pid` has exited and waits to be reaped.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let close = stat.rfind(')')?;
            stat[close + 1..]
                .split_whitespace()
                .next()
                .map(|s| s == "Z")
        })
        .unwrap_or(false)
}

#[test]
fn processes_lists_the_children_with_their_argv_cpu_and_exit_codes() {
    let _serial = serial();
    let monitor = start();
    let child = busy_child(3).spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !is_zombie(pid) {
        assert!(Instant::now() < deadline, "the child never exited");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A sample finds it exited and not reaped yet: its exit code, through waitid(WNOWAIT).
    wait_for_samples(&monitor, 2);
    // Reaped with wait4: the kernel's own account of the child, its ground truth.
    let (mut status, mut usage) = (0, zeroed_rusage());
    // SAFETY: `status` and `usage` are valid for writes and outlive the call; `pid` is
    // this process's child, exited and not reaped yet.
    let reaped = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid as libc::pid_t);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 3);
    drop(child);
    let time = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let truth_cpu = time(usage.ru_utime) + time(usage.ru_stime);
    let truth_peak = usage.ru_maxrss as u64 * 1024;
    let report = monitor.finish();
    let listed = report
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("{pid} not in {:#?}", report.processes));
    assert!(
        listed
            .command
            .starts_with("sh -c i=0; while [ $i -lt 400000 ]"),
        "{listed:?}"
    );
    assert_eq!(listed.ppid, std::process::id());
    assert_eq!(listed.exit_code, Some(3));
    println!("{listed:?}");
    // Its CPU as its zombie's stat gave it (10 ms ticks), against wait4's rusage.
    let cpu = listed.cpu_seconds.expect("its CPU");
    assert!(
        (cpu - truth_cpu).abs() <= 0.03 + 0.05 * truth_cpu && cpu > 0.1,
        "{listed:?}, wait4 says {truth_cpu} s"
    );
    // Its peak, seen live or from its own mark, never above the kernel's maxrss.
    let peak = listed.peak_rss_bytes.expect("its peak");
    assert!(
        peak > 0 && peak <= truth_peak,
        "{listed:?}, wait4 says maxrss {truth_peak} bytes"
    );
    assert!(listed.first_seconds <= listed.last_seconds);
    // This process is listed too, with its own command.
    let me = report
        .processes
        .iter()
        .find(|p| p.pid == std::process::id())
        .expect("the monitored process");
    assert!(me.peak_rss_bytes.unwrap() > 0 && me.exit_code.is_none());
    assert!(report.processes.len() <= 50);
}

/// A directory on a filesystem with a disk behind it (not tmpfs or ramfs), if any.
fn disk_dir() -> Option<std::path::PathBuf> {
    const TMPFS: i64 = 0x0102_1994;
    const RAMFS: i64 = 0x8584_58f6;
    let candidates = [
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        std::env::temp_dir(),
    ];
    candidates.into_iter().find(|dir| {
        let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
            return false;
        };
        // SAFETY: an all-zero statfs is a valid value of this plain C struct.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is NUL-terminated and `fs` valid for writes; both outlive the call.
        let ok = unsafe { libc::statfs(path.as_ptr(), &mut fs) } == 0;
        #[allow(clippy::unnecessary_cast)] // f_type's type differs by architecture
        let kind = fs.f_type as i64;
        ok && kind != TMPFS && kind != RAMFS
    })
}

#[test]
fn a_stage_that_writes_64_mib_and_syncs_reads_its_writes() {
    let _serial = serial();
    let Some(dir) = disk_dir() else {
        cannot_run(
            "a_stage_that_writes_64_mib_and_syncs_reads_its_writes",
            "no directory on a disk-backed filesystem (only tmpfs)",
        );
        return;
    };
    // A directory of this test's own, so another user of a shared temp dir cannot point
    // the 64 MiB at a file of theirs.
    let own = stemmon_suite::temp_dir_in(&dir, "cpu-disk");
    let path = own.join("written");
    let monitor = start();
    let truth_before = proc_self_io();
    {
        let _disk = stemmon::stage("disk");
        let mut file = std::fs::File::create_new(&path).unwrap();
        let block = vec![0x5au8; MIB as usize];
        for _ in 0..64 {
            file.write_all(&block).unwrap();
        }
        file.sync_all().unwrap();
    }
    let truth = proc_self_io().1 - truth_before.1;
    let report = monitor.finish();
    drop(own);
    assert_eq!(report.io_missing, None);
    let written = stage(&report, "disk")
        .cpu_io
        .io_write_bytes
        .expect("I/O read");
    println!(
        "disk: {:?}; /proc/self/io wrote {truth} bytes",
        stage(&report, "disk").cpu_io
    );
    assert!(written >= 60 * MIB, "{written} bytes written");
    assert!(
        written.abs_diff(truth) <= truth / 20 + MIB,
        "{written} bytes, the kernel counted {truth}"
    );
    assert!(report.cpu_io.io_write_bytes.unwrap() >= written);
}

/// This process's `read_bytes` and `write_bytes` less `cancelled_write_bytes`, from the
/// kernel's `/proc/self/io`.
fn proc_self_io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap();
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("{name} in /proc/self/io"))
            .trim()
            .parse()
            .unwrap()
    };
    let written = field("write_bytes").saturating_sub(field("cancelled_write_bytes"));
    (field("read_bytes"), written)
}

/// This process's major page faults, from `getrusage(RUSAGE_SELF)`.
fn major_faults() -> u64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes and outlives the call.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    u64::try_from(usage.ru_majflt).unwrap()
}

#[test]
fn a_stage_that_reads_from_disk_reads_its_bytes_and_major_faults_as_the_kernel_counted() {
    use std::os::fd::AsRawFd;
    let test = "a_stage_that_reads_from_disk_reads_its_bytes_and_major_faults";
    let _serial = serial();
    let Some(dir) = disk_dir() else {
        cannot_run(
            test,
            "no directory on a disk-backed filesystem (only tmpfs)",
        );
        return;
    };
    let own = stemmon_suite::temp_dir_in(&dir, "cpu-read");
    // Two 16 MiB files on the disk, out of the page cache: one read, one mapped.
    const SIZE: usize = 16 << 20;
    let files: Vec<std::fs::File> = ["read", "mapped"]
        .iter()
        .map(|name| {
            let path = own.join(name);
            let mut file = std::fs::File::create_new(&path).unwrap();
            let block: Vec<u8> = (0..MIB as usize).map(|i| (i % 251) as u8).collect();
            for _ in 0..SIZE / MIB as usize {
                file.write_all(&block).unwrap();
            }
            file.sync_all().unwrap();
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: a valid descriptor; the advice only drops clean cached pages.
            let dropped =
                unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(dropped, 0, "posix_fadvise");
            file
        })
        .collect();
    let monitor = start();
    let (reads_before, faults_before) = (proc_self_io().0, major_faults());
    {
        let _read = stemmon::stage("read");
        let mut buffer = vec![0u8; SIZE];
        std::io::Read::read_exact(&mut &files[0], &mut buffer).unwrap();
        std::hint::black_box(&buffer);
        // SAFETY: a private read-only mapping of a file of SIZE bytes, unmapped below;
        // no other code sees the pointer.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                files[1].as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED, "mmap");
        // No read-ahead: each page touched is a fault that reads the disk.
        // SAFETY: `map` is the mapping just made, SIZE bytes long.
        assert_eq!(unsafe { libc::madvise(map, SIZE, libc::MADV_RANDOM) }, 0);
        let mut sum = 0u64;
        for offset in (0..SIZE).step_by(4096) {
            // SAFETY: `offset` is inside the mapping, which is readable.
            sum += u64::from(unsafe { std::ptr::read_volatile(map.cast::<u8>().add(offset)) });
        }
        std::hint::black_box(sum);
        // SAFETY: the mapping made above, no longer used.
        assert_eq!(unsafe { libc::munmap(map, SIZE) }, 0);
    }
    let truth_reads = proc_self_io().0 - reads_before;
    let truth_faults = major_faults() - faults_before;
    let report = monitor.finish();
    drop(files);
    drop(own);
    let io = &stage(&report, "read").cpu_io;
    println!("read: {io:?}; the kernel: {truth_reads} bytes read, {truth_faults} major faults");
    if truth_reads < SIZE as u64 {
        // The files were still cached: nothing to measure. Loud, and a failure under CI.
        cannot_run(
            test,
            &format!("the kernel read only {truth_reads} bytes: the page cache kept the files"),
        );
        return;
    }
    let read = io.io_read_bytes.expect("I/O read");
    assert!(
        read.abs_diff(truth_reads) <= truth_reads / 20 + MIB,
        "{read} bytes read, the kernel counted {truth_reads}"
    );
    let faults = io.major_faults.expect("faults read");
    assert!(
        truth_faults >= 1_000,
        "the kernel counted {truth_faults} major faults"
    );
    assert!(
        faults.abs_diff(truth_faults) <= truth_faults / 20 + 16,
        "{faults} major faults, the kernel counted {truth_faults}"
    );
}
