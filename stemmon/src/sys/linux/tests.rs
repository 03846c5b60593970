//! The Linux reader's tests: real processes, real `/proc`.

use super::procfs::parse_status;
use super::*;
use std::fs;
use std::sync::{Mutex, PoisonError};

/// Tests that read or reset this process's own mark, or reap a child, must not
/// interleave.
static SELF_MARK: Mutex<()> = Mutex::new(());

pub(crate) fn self_mark() -> std::sync::MutexGuard<'static, ()> {
    SELF_MARK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// VmRSS of this process from a fresh `open` + `read` of its status file.
fn fresh_vm_rss() -> u64 {
    let text = fs::read("/proc/self/status").unwrap();
    parse_status(&text).rss.unwrap()
}

const MIB: u64 = 1 << 20;

/// At least `mib` MiB, and more than any child of this process reaped so far held: the
/// kernel's maximum over reaped children (`RUSAGE_CHILDREN`) grows only past it, and
/// the tests of one binary share it.
pub(crate) fn past_reaped_maximum(mib: u64) -> u64 {
    let kib = reaped::rusage(libc::RUSAGE_CHILDREN).ru_maxrss;
    mib.max(u64::try_from(kib).unwrap_or(0) / 1024 + 16)
}

/// A python3 child that touches `mib` MiB and exits.
pub(crate) fn python_holding(mib: u64) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command.args([
        "-c",
        &format!("b = bytearray({mib} << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"),
    ]);
    command
}

fn touched(mib: u64) -> Vec<u8> {
    let mut block = vec![0u8; (mib * MIB) as usize];
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(block)
}

#[test]
fn self_status_matches_a_fresh_read_and_its_mark_resets() {
    let _mark = self_mark();
    let ledger = Ledger::new();
    let mut shared = ledger.shared();
    let own = shared.own().unwrap();
    own.read_status(true).unwrap();
    let block = touched(64);
    let held = own.read_status(false).unwrap();
    let fresh = fresh_vm_rss();
    let rss = held.rss.unwrap();
    assert!(
        rss.abs_diff(fresh) < 4 * MIB,
        "the kept fd reads what a fresh open reads: {rss} vs {fresh}"
    );
    drop(block);
    let after = own.read_status(true).unwrap();
    let (rss_after, hwm) = (after.rss.unwrap(), after.hwm.unwrap());
    assert!(
        hwm + MIB >= rss && hwm >= rss_after + 40 * MIB,
        "the mark kept the freed 64 MiB: hwm {hwm}, rss then {rss}, now {rss_after}"
    );
    let next = own.read_status(true).unwrap().hwm.unwrap();
    assert!(
        next + 40 * MIB <= hwm,
        "the reset started a new interval: {next} after {hwm}"
    );
}

#[test]
fn a_descendants_mark_is_read_and_reset_at_each_sample() {
    let _mark = self_mark();
    // A child that touches 96 MiB, frees it, then waits: only its mark remembers.
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n\
             del b\nprint('freed', flush=True)\nimport sys; sys.stdin.read()",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    io::BufRead::read_line(
        &mut io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "freed");
    let mut reader = ProcReader::new(false);
    let first = reader.read_tree(std::process::id()).unwrap();
    let second = reader.read_tree(std::process::id()).unwrap();
    drop(child.stdin.take());
    child.wait().unwrap();
    let (rss, hwm) = (first.children_rss.unwrap(), first.children_hwm.unwrap());
    assert!(
        hwm >= rss + 90 * MIB,
        "the child's mark holds the freed 96 MiB: hwm {hwm}, rss {rss}"
    );
    let again = second.children_hwm.unwrap();
    assert!(
        again + 90 * MIB <= hwm,
        "reset after the first sample: {again} after {hwm}"
    );
    let bound = first.tree_rss_bound.unwrap();
    assert!(bound >= first.parent_hwm.unwrap() + hwm, "{first:?}");
}

#[test]
fn a_reaped_childs_peak_shows_in_the_next_reading() {
    let _mark = self_mark();
    let mut reader = ProcReader::new(false);
    reader.read_tree(std::process::id()).unwrap();
    let mib = past_reaped_maximum(128);
    let status = python_holding(mib).status().expect("python3 runs");
    assert!(status.success());
    let reading = reader.read_tree(std::process::id()).unwrap();
    let peak = reading.reaped_child_peak.unwrap();
    assert!(peak >= mib * MIB, "reaped peak {peak}");
    assert!(reading.tree_rss_bound.unwrap() >= peak + reading.parent_hwm.unwrap());
    // Consumed: the next reading has no reaped child.
    let next = reader.read_tree(std::process::id()).unwrap();
    assert_eq!(next.reaped_child_peak, None);
}

/// Run by `samples_survive_a_low_descriptor_limit` in a child under `ulimit -n 36`.
#[test]
#[ignore = "a helper: runs in a child process under `ulimit -n 36`"]
fn fd_limit_probe() {
    if std::env::var_os("STEMMON_FD_PROBE").is_none() {
        return;
    }
    let (stop, parked) = std::sync::mpsc::channel::<()>();
    let parked = std::sync::Arc::new(Mutex::new(parked));
    let threads: Vec<_> = (0..31)
        .map(|_| {
            let parked = std::sync::Arc::clone(&parked);
            std::thread::spawn(move || {
                let _ = parked.lock().map(|rx| rx.recv());
            })
        })
        .collect();
    let mut kids = spawn_sleepers(3);
    let me = std::process::id();
    let mut reader = ProcReader::new(false);
    for _ in 0..3 {
        match reader.read_tree(me) {
            Ok(r) => println!(
                "sample count={} read={} complete={}",
                r.process_count, r.rss_processes, r.rss_complete
            ),
            Err(e) => println!("sample failed: {e}"),
        }
    }
    // With no descriptor left, the failure says so rather than "not found".
    let mut hog = Vec::new();
    while let Ok(file) = File::open("/dev/null") {
        hog.push(file);
    }
    let mut fresh = ProcReader::new(false).with_budget(0);
    match fresh.read_tree(me) {
        Ok(_) => println!("exhausted: read"),
        Err(e) => println!("exhausted: {e}"),
    }
    drop(hog);
    for kid in &mut kids {
        kid.kill().unwrap();
        kid.wait().unwrap();
    }
    drop(stop);
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn samples_survive_a_low_descriptor_limit() {
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 36 && exec \"$0\" \"$@\""])
        .arg(&exe)
        .args([
            "--exact",
            "sys::linux::tests::fd_limit_probe",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STEMMON_FD_PROBE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let samples: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("sample ").map(|at| &l[at..]))
        .collect();
    assert_eq!(
        samples,
        vec!["sample count=4 read=4 complete=true"; 3],
        "31 threads and 3 children under 36 descriptors:\n{stdout}"
    );
    let exhausted = stdout.lines().find(|l| l.starts_with("exhausted")).unwrap();
    assert!(
        exhausted.contains("Too many open files"),
        "the real error is kept: {exhausted}"
    );
}

fn spawn_sleepers(n: usize) -> Vec<std::process::Child> {
    (0..n)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .collect()
}

/// `pid`'s user plus system clock ticks, from a fresh read of its `stat`.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn a_processs_stat_and_io_are_read_again_only_once_old_enough() {
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let root = busy.id();
    let mut kept = ProcReader::new(false).with_usage_every(std::time::Duration::MAX);
    let mut fresh = ProcReader::new(false).with_usage_every(std::time::Duration::ZERO);
    let first_kept = kept.read_tree(root).unwrap().root_usage.cpu_micros();
    let first_fresh = fresh.read_tree(root).unwrap().root_usage.cpu_micros();
    // The kernel's counters move past both first readings.
    let start = cpu_ticks(root);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cpu_ticks(root) <= start {
        assert!(std::time::Instant::now() < deadline, "the loop never ran");
        std::thread::yield_now();
    }
    assert_eq!(
        kept.read_tree(root).unwrap().root_usage.cpu_micros(),
        first_kept,
        "read again before its time"
    );
    let again = fresh.read_tree(root).unwrap().root_usage.cpu_micros();
    assert!(again > first_fresh, "{again} after {first_fresh}");
    busy.kill().unwrap();
    busy.wait().unwrap();
}

#[test]
fn children_walk_and_stat_scan_find_the_same_tree() {
    let _mark = self_mark();
    let mut kids = spawn_sleepers(3);
    let me = std::process::id();
    let mut walk = ProcReader::new(false);
    let mut scan = ProcReader::new(false).with_stat_scan();
    let a = walk.read_tree(me).unwrap();
    let b = scan.read_tree(me).unwrap();
    // Other tests of this binary may run their own children; ours are among them.
    assert!(a.process_count >= 4, "{a:?}");
    let mut found_walk = walk.pids();
    let mut found_scan = scan.pids();
    found_walk.sort_unstable();
    found_scan.sort_unstable();
    for kid in &kids {
        assert!(found_walk.contains(&kid.id()));
        assert!(found_scan.contains(&kid.id()));
    }
    assert!(b.rss_complete && a.rss_complete);
    for kid in &mut kids {
        kid.kill().unwrap();
        kid.wait().unwrap();
    }
}

#[test]
fn detailed_reading_has_uss_and_pss() {
    let _mark = self_mark();
    let mut reader = ProcReader::new(true);
    let reading = reader.read_tree(std::process::id()).unwrap();
    let (uss, pss, rss) = (
        reading.tree_uss.unwrap(),
        reading.tree_pss.unwrap(),
        reading.tree_rss.unwrap(),
    );
    assert!(
        uss > 0 && uss <= pss && pss <= rss,
        "uss {uss} pss {pss} rss {rss}"
    );
}

#[test]
fn a_missing_root_is_an_error() {
    let mut reader = ProcReader::new(false);
    assert!(reader.read_tree(u32::MAX - 1).is_err());
}

/// A `sh` root that starts one `sleep` and prints its pid, then at each line on its
/// stdin kills and reaps it and starts another: a tree whose changes the test drives.
struct Driven {
    root: std::process::Child,
    lines: io::Lines<io::BufReader<std::process::ChildStdout>>,
}

impl Driven {
    fn start() -> Driven {
        let mut root = std::process::Command::new("sh")
            .args([
                "-c",
                "while :; do sleep 600 & echo $!; read line || break; kill $!; wait $!; done; \
                 kill $!",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines = io::BufRead::lines(io::BufReader::new(root.stdout.take().unwrap()));
        Driven { root, lines }
    }

    /// The pid of the current `sleep`.
    fn next_child(&mut self) -> u32 {
        self.lines.next().unwrap().unwrap().trim().parse().unwrap()
    }

    /// Replaces the `sleep` with another; returns its pid.
    fn replace_child(&mut self) -> u32 {
        io::Write::write_all(self.root.stdin.as_mut().unwrap(), b"next\n").unwrap();
        self.next_child()
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        drop(self.root.stdin.take());
        let _ = self.root.wait();
    }
}

#[test]
fn the_kept_files_follow_a_child_that_exits_and_one_that_starts() {
    let mut tree = Driven::start();
    let first = tree.next_child();
    let root = tree.root.id();
    let mut reader = ProcReader::new(false);
    let before = reader.read_tree(root).unwrap();
    assert_eq!(reader.pids(), vec![root, first]);
    assert!(before.rss_complete);
    // status, clear_refs, stat, io and one thread's children, for each of the two
    // processes.
    let kept = reader.open_fds();
    assert_eq!(kept, 10);
    for _ in 0..3 {
        let second = tree.replace_child();
        let after = reader.read_tree(root).unwrap();
        assert_eq!(reader.pids(), vec![root, second], "{after:?}");
        assert!(after.rss_complete && after.rss_processes == 2);
        assert_eq!(after.descendants.len(), 1);
        assert_eq!(after.descendants[0].pid, second);
        assert!(after.children_rss.unwrap() > 0);
        // The gone child's files were closed and the new one's kept: no leak.
        assert_eq!(reader.open_fds(), kept);
    }
}

#[test]
fn past_the_descriptor_budget_files_are_opened_at_each_sample() {
    let mut tree = Driven::start();
    let first = tree.next_child();
    let root = tree.root.id();
    for budget in [0, 2, 4] {
        let mut reader = ProcReader::new(false).with_budget(budget);
        for _ in 0..3 {
            let reading = reader.read_tree(root).unwrap();
            assert_eq!(reader.pids(), vec![root, first]);
            assert!(reading.rss_complete && reading.rss_processes == 2);
            assert!(reading.children_hwm.unwrap() > 0);
            assert!(
                reader.open_fds() <= budget,
                "{} > {budget}",
                reader.open_fds()
            );
        }
    }
}

#[test]
fn an_exited_threads_kept_children_file_reads_empty() {
    // Why a swap of threads needs the periodic listing: the file of a thread that
    // ended is no error to read, only empty.
    let (opened, open_rx) = std::sync::mpsc::channel();
    let (finish, finish_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        opened.send(tid).unwrap();
        let _ = finish_rx.recv();
    });
    let tid = open_rx.recv().unwrap();
    let path = format!("/proc/self/task/{tid}/children");
    let file = File::open(path).unwrap();
    drop(finish);
    thread.join().unwrap();
    let mut buf = [0u8; 64];
    let read = std::os::unix::fs::FileExt::read_at(&file, &mut buf, 0);
    assert!(matches!(read, Ok(0)), "{read:?}");
}

#[test]
fn a_child_of_a_thread_that_replaced_another_is_found_within_the_cadence() {
    // Python: thread one waits; at a line it ends and thread two starts and spawns a
    // child, so `Threads:` is the same at both samples.
    let script = "\
import subprocess, sys, threading
one_done = threading.Event()
one = threading.Thread(target=one_done.wait)
one.start()
print('one', flush=True)
sys.stdin.readline()
one_done.set(); one.join()
box = {}; spawned = threading.Event(); two_done = threading.Event()
def two():
    box['p'] = subprocess.Popen(['sleep', '600']); spawned.set(); two_done.wait()
t = threading.Thread(target=two); t.start(); spawned.wait()
print(box['p'].pid, flush=True)
sys.stdin.readline()
box['p'].kill(); box['p'].wait(); two_done.set(); t.join()
";
    let mut python = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let root = python.id();
    let mut lines = io::BufRead::lines(io::BufReader::new(python.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "one");
    let mut reader = ProcReader::new(false);
    let threads = |reader: &ProcReader| reader.seen[0].status.unwrap().threads.unwrap();
    reader.read_tree(root).unwrap();
    let threads_before = threads(&reader);
    io::Write::write_all(python.stdin.as_mut().unwrap(), b"\n").unwrap();
    let child: u32 = lines.next().unwrap().unwrap().parse().unwrap();
    let mut found_at = None;
    for sample in 1..=tree::RELIST_EVERY {
        reader.read_tree(root).unwrap();
        if sample == 1 {
            assert_eq!(threads(&reader), threads_before, "the swap kept the count");
        }
        if reader.pids().contains(&child) {
            found_at = Some(sample);
            break;
        }
    }
    io::Write::write_all(python.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert!(python.wait().unwrap().success());
    assert!(
        found_at.is_some(),
        "the new thread's child is found within {} samples",
        tree::RELIST_EVERY
    );
}

#[test]
fn a_fresh_tree_reader_on_the_same_ledger_keeps_the_reaped_baseline() {
    let _mark = self_mark();
    let me = std::process::id();
    let ledger = Arc::new(Ledger::new());
    let mut sampler = ProcReader::on_ledger(Arc::clone(&ledger), false);
    sampler.read_tree(me).unwrap();
    // Another monitor's ledger: it counts the same reaping for itself.
    let mut other = ProcReader::new(false);
    other.read_tree(me).unwrap();
    let mib = past_reaped_maximum(128);
    let status = python_holding(mib).status().expect("python3 runs");
    assert!(status.success());
    // The last sample of a signal: a new reader, on the sampler's ledger.
    let mut last = ProcReader::on_ledger(Arc::clone(&ledger), false);
    let reading = last.read_tree(me).unwrap();
    let peak = reading.reaped_child_peak.expect("the reaping is kept");
    assert!(peak >= mib * MIB, "reaped peak {peak}");
    assert!(reading.tree_rss_bound.unwrap() >= peak);
    let theirs = other.read_tree(me).unwrap().reaped_child_peak;
    assert!(
        theirs >= Some(mib * MIB),
        "the other monitor's own: {theirs:?}"
    );
    // Counted once per ledger: the sampler's next sample has no reaped child.
    assert_eq!(sampler.read_tree(me).unwrap().reaped_child_peak, None);
}

#[test]
fn a_fresh_tree_reader_on_the_same_ledger_counts_a_grandchild_gone_since() {
    let _mark = self_mark();
    // A grandchild that holds 96 MiB until a line comes, then exits and is reaped by
    // its parent, which stays: only the last sample's marks know its peak.
    let mut parent = std::process::Command::new("sh")
        .args([
            "-c",
            "python3 -c \"import sys\nb = bytearray(96 << 20)\n\
             for i in range(0, len(b), 4096): b[i] = 1\nprint('held', flush=True)\n\
             sys.stdin.readline()\"; echo reaped; read line",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = io::BufRead::lines(io::BufReader::new(parent.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "held");
    let me = std::process::id();
    let ledger = Arc::new(Ledger::new());
    let mut sampler = ProcReader::on_ledger(Arc::clone(&ledger), false);
    let first = sampler.read_tree(me).unwrap();
    assert!(first.children_hwm.unwrap() >= 96 * MIB, "{first:?}");
    io::Write::write_all(parent.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "reaped");
    let mut last = ProcReader::on_ledger(Arc::clone(&ledger), false);
    let reading = last.read_tree(me).unwrap();
    drop(parent.stdin.take());
    parent.wait().unwrap();
    let peak = reading
        .reaped_child_peak
        .expect("the grandchild's exit is counted");
    assert!(peak >= 96 * MIB, "{reading:?}");
    assert!(reading.tree_rss_bound.unwrap() >= reading.parent_hwm.unwrap() + 96 * MIB);
}

#[test]
fn the_exited_set_is_emptied_by_every_sample_and_filled_only_with_marks() {
    let _mark = self_mark();
    let me = std::process::id();
    let mut exited = std::process::Command::new("true").spawn().unwrap();
    exited.wait().unwrap();
    let descendants = [Descendant {
        pid: exited.id(),
        rss: 1,
        peak: 1,
        ..Descendant::default()
    }];
    let ledger = Arc::new(Ledger::new());
    // Without marks the boundary does not count the exit: nothing is kept for it.
    let mut plain = ProcSelfReader::new(Arc::clone(&ledger), false, false);
    let live = crate::memory::SelfReader::live_children(&mut plain, &descendants, &mut Vec::new());
    assert_eq!((live.rss, live.exited_peak), (0, Some(1)));
    assert_eq!(ledger.shared().counted_len(), 0);
    let mut marked = ProcSelfReader::new(Arc::clone(&ledger), true, true);
    for _ in 0..3 {
        crate::memory::SelfReader::live_children(&mut marked, &descendants, &mut Vec::new());
    }
    assert_eq!(ledger.shared().counted_len(), 3);
    // A sample with marks off takes them too.
    let mut tree = ProcReader::on_ledger(Arc::clone(&ledger), false);
    tree.set_marks(false, false, me);
    tree.read_tree(me).unwrap();
    assert_eq!(ledger.shared().counted_len(), 0);
}

#[test]
#[ignore = "a measurement: cargo test --release -p stemmon --lib boundary_reading_cost \
            -- --ignored --nocapture"]
fn boundary_reading_cost() {
    use crate::memory::SelfReader;
    use crate::sys::live_children_rss;
    use std::hint::black_box;
    use std::time::Instant;
    let _mark = self_mark();
    let calls = 20_000u32;
    let ledger = Arc::new(Ledger::new());
    // Below the floor (the launcher's peak from before exec) `status` is read.
    let mut reader = ProcSelfReader::new(Arc::clone(&ledger), true, true);
    let started = Instant::now();
    for _ in 0..calls {
        black_box(reader.read());
    }
    let below = started.elapsed() / calls;
    let mut block = vec![0u8; (reader.floor() + (64 << 20)) as usize];
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    let started = Instant::now();
    for _ in 0..calls {
        black_box(reader.read());
    }
    let marks = started.elapsed() / calls;
    drop(black_box(block));
    let mut plain = ProcSelfReader::new(Arc::clone(&ledger), false, false);
    let started = Instant::now();
    for _ in 0..calls {
        black_box(plain.read());
    }
    let rss_only = started.elapsed() / calls;
    let statm = File::open("/proc/self/statm").unwrap();
    let mut buf = [0u8; 256];
    let started = Instant::now();
    for _ in 0..calls {
        black_box(std::os::unix::fs::FileExt::read_at(&statm, &mut buf, 0).unwrap());
    }
    let statm_cost = started.elapsed() / calls;
    let started = Instant::now();
    for _ in 0..calls {
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is valid for writes and outlives the call.
        black_box(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) });
    }
    let rusage_cost = started.elapsed() / calls;
    println!("statm pread: {statm_cost:?}; getrusage: {rusage_cost:?}");
    let mut kids = spawn_sleepers(10);
    let descendants: Vec<_> = kids
        .iter()
        .map(|k| Descendant {
            pid: k.id(),
            rss: 1,
            peak: 1,
            ..Descendant::default()
        })
        .collect();
    let mut gone = Vec::new();
    let started = Instant::now();
    for _ in 0..calls {
        black_box(live_children_rss(&descendants, &mut gone, |_| {}));
    }
    let check = started.elapsed() / calls;
    for kid in &mut kids {
        kid.kill().unwrap();
        kid.wait().unwrap();
    }
    println!(
        "boundary reading: {marks:?} with marks (statm, getrusage, clear_refs), {below:?} \
         below the exec floor (status), {rss_only:?} RSS only; exited-children check of \
         10 descendants: {check:?}"
    );
}

#[test]
fn an_exited_roots_final_interval_is_its_own_exact_peak_not_an_exited_childs() {
    let _mark = self_mark();
    // The root is a child of this process that peaks after the first sample and exits
    // before the next, as `stemmon run`'s command does in its last second.
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys; sys.stdin.read()\n\
             b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let root = child.id();
    let mut reader = ProcReader::new(false);
    let marks = reader.configure_marks(true, true, root);
    assert!(marks.parent);
    let first = reader.read_tree(root).unwrap();
    assert!(first.parent_hwm.unwrap() < 96 * MIB, "{first:?}");
    drop(child.stdin.take());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while reaped::zombie_peak(root).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the root never exited"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // A zombie: nothing resident, no VmHWM. Its exit record has its own final
    // interval; without records its rusage does, merged with the children it waited
    // for (the shim of a `python3` on PATH may have some), so it is its own only where
    // it reaped none. The root is the parent, never an exited child.
    let last = reader.read_tree(root).unwrap();
    assert_eq!(last.parent_rss, Some(0));
    // Only the shim's children, if any, exited: never the root's own figure.
    assert!(last.reaped_child_peak.unwrap_or(0) < 96 * MIB, "{last:?}");
    let root_line = last.root_process.as_ref().unwrap();
    let exited = root_line.exited_peak.expect("the zombie root's rusage");
    assert!(exited >= 96 * MIB, "{last:?}");
    assert!(last.tree_rss_bound.unwrap() >= 96 * MIB, "{last:?}");
    match last.parent_hwm {
        Some(own) => assert!((96 * MIB..160 * MIB).contains(&own), "{last:?}"),
        None => assert!(!marks.exit_records, "a record came: {last:?}"),
    }
    if marks.exit_records {
        assert!(last.parent_hwm.is_some(), "{last:?}");
    } else {
        crate::env::cannot_run(
            "exited root",
            "no exit records (taskstats needs CAP_NET_ADMIN)",
        );
    }
    assert!(root_line.peak < 96 * MIB, "its own readings: {root_line:?}");
    assert!(child.wait().unwrap().success());
}

/// The test-only knobs and views of a reader.
impl ProcReader {
    /// Reads a process's `stat` and `io` again once they are `every` old.
    pub(crate) fn with_usage_every(mut self, every: std::time::Duration) -> ProcReader {
        self.table.set_usage_every(every);
        self
    }

    /// Forces the `/proc/*/stat` parent scan, as on kernels without `children` files.
    pub(crate) fn with_stat_scan(mut self) -> ProcReader {
        self.table.force_stat_scan();
        self
    }

    /// Caps the descriptors kept open between samples.
    pub(crate) fn with_budget(mut self, budget: usize) -> ProcReader {
        self.table.set_budget(budget);
        self
    }

    /// The pids of the last sample, root first.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.seen.iter().map(|s| s.pid).collect()
    }

    /// The descriptors kept open now.
    pub(crate) fn open_fds(&self) -> usize {
        self.table.open_fds()
    }
}
