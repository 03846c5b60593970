//! Output on a shared machine (the book's `security.md`, 0.3), against a real second local user. In a
//! sticky, world-writable directory (mode 1777, as `/tmp`), uid 65534 (`nobody`) plants a
//! link at the report's name to a precious file of root's, a FIFO at another report's
//! name, a link at the Prometheus textfile's name, and links at every temporary name an
//! older stemmon would have picked for the next few hundred pids. Root's monitors (the
//! report and the textfile) and the `stemmon` command's `-o` then write there: each
//! planted name must become root's regular file, and nothing else may change. Root only: as another user the test cannot plant files of a second user.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use stemmon_suite::{cannot_run, read_report, serial, temp_dir};

/// The second user: `nobody`, present on every Linux system, owner of nothing here.
const ATTACKER: u32 = 65534;

/// The kernel's own protections for sticky directories. With them on, the kernel refuses
/// root to follow another user's link there (and to open another user's FIFO with
/// `O_CREAT`), which would hide a writer that follows; the test turns them off while it
/// runs (and restores them after, see [`Sysctls`]) so that only stemmon stands guard.
const SYSCTLS: [&str; 3] = [
    "/proc/sys/fs/protected_symlinks",
    "/proc/sys/fs/protected_fifos",
    "/proc/sys/fs/protected_regular",
];

/// Restores the sysctls it changed, when dropped (also when the test fails).
struct Sysctls(Vec<(&'static str, String)>);

impl Sysctls {
    /// Reads each, sets it to 0; the values found, or why one could not be turned off.
    fn off() -> Result<(Sysctls, String), String> {
        let mut saved = Sysctls(Vec::new());
        let mut found = Vec::new();
        for path in SYSCTLS {
            let Ok(value) = std::fs::read_to_string(path) else {
                found.push(format!("{path}: absent"));
                continue;
            };
            let value = value.trim().to_owned();
            found.push(format!("{}={value}", path.trim_start_matches("/proc/sys/")));
            if value != "0" {
                std::fs::write(path, "0").map_err(|e| {
                    format!("{path} is {value} and cannot be set to 0 ({e}): it would hide a writer that follows links")
                })?;
                saved.0.push((path, value));
            }
        }
        Ok((saved, found.join(", ")))
    }
}

impl Drop for Sysctls {
    fn drop(&mut self) {
        for (path, value) in &self.0 {
            let _ = std::fs::write(path, value);
        }
    }
}

fn is_root() -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// What a test may see of one directory entry: enough to tell any change.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    uid: u32,
    ino: u64,
    mtime_ns: i128,
    /// A link's target, or a regular file's bytes.
    content: Vec<u8>,
}

fn entry(path: &Path) -> Entry {
    let meta = std::fs::symlink_metadata(path).unwrap();
    let kind = meta.file_type();
    let (kind, content) = if kind.is_symlink() {
        let target = std::fs::read_link(path).unwrap();
        ("link", target.as_os_str().as_bytes().to_vec())
    } else if kind.is_file() {
        ("file", std::fs::read(path).unwrap())
    } else if kind.is_fifo() {
        ("fifo", Vec::new())
    } else if kind.is_dir() {
        ("dir", Vec::new())
    } else {
        ("other", Vec::new())
    };
    Entry {
        kind,
        uid: meta.uid(),
        ino: meta.ino(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        content,
    }
}

fn snapshot(dir: &Path) -> BTreeMap<String, Entry> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                entry(&e.path()),
            )
        })
        .collect()
}

/// Runs, as uid and gid 65534, a child that makes `links` (`(target, link)`) and the
/// FIFOs `fifos`. They are made between fork and exec, by the child itself.
fn plant_as_attacker(links: &[(PathBuf, PathBuf)], fifos: &[PathBuf]) {
    let links: Vec<(CString, CString)> = links
        .iter()
        .map(|(target, link)| (c_path(target), c_path(link)))
        .collect();
    let fifos: Vec<CString> = fifos.iter().map(|p| c_path(p)).collect();
    let mut command = Command::new("true");
    command.uid(ATTACKER).gid(ATTACKER);
    // SAFETY: the closure runs in the forked child, after the switch to uid 65534, and
    // calls only `symlink`, `mkfifo` and `errno` (async-signal-safe) on strings built in
    // the parent before the fork; it allocates nothing (an error is made from errno).
    unsafe {
        command.pre_exec(move || {
            for (target, link) in &links {
                if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for fifo in &fifos {
                if libc::mkfifo(fifo.as_ptr(), 0o666) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let status = command
        .status()
        .expect("uid 65534 plants its links and FIFO");
    assert!(status.success());
}

/// The names an older stemmon (or a careless writer) would pick for the temporary file
/// of `name` in a process `pid`.
fn guessable_temporaries(name: &str, pid: u32) -> Vec<String> {
    let mut names: Vec<String> = (0..4)
        .map(|n| format!(".{name}.stemmon-{pid}-{n}.tmp"))
        .collect();
    names.push(format!(".{name}.{pid}.tmp"));
    names
}

/// The textfile name a monitor with `label` gets: learnt from a run into `dir`.
fn textfile_name(dir: &Path, label: (&str, &str)) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let report = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .label(label.0, label.1)
        .prometheus_textfile(dir)
        .start()
        .unwrap()
        .finish();
    assert_eq!(report.export_error, None);
    let names: Vec<String> = snapshot(dir).into_keys().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names.into_iter().next().unwrap()
}

/// Reads whatever arrived in the FIFO `reader` holds open (without blocking).
fn drained(reader: &mut std::fs::File) -> usize {
    let mut total = 0;
    let mut buffer = [0u8; 65536];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return total,
            Err(e) => panic!("reading the FIFO: {e}"),
        }
    }
}

#[test]
fn links_and_a_fifo_another_user_planted_are_replaced_and_nothing_else_changes() {
    let test = "links_and_a_fifo_another_user_planted_are_replaced_and_nothing_else_changes";
    if !is_root() {
        cannot_run(
            test,
            "planting files of a second user (uid 65534) needs root; run the tests as root",
        );
        return;
    }
    let _serial = serial();
    let (_sysctls, found) = match Sysctls::off() {
        Ok(sysctls) => sysctls,
        Err(why) => {
            cannot_run(test, &why);
            return;
        }
    };
    let _ = writeln!(
        std::io::stderr(),
        "{test}: found {found}; all 0 while the test runs"
    );

    let dir = temp_dir("shared-machine");
    std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = dir.join("shared");
    let victims = dir.join("victims");
    for (path, mode) in [(&shared, 0o1777), (&victims, 0o755)] {
        std::fs::create_dir(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let precious = |name: &str| {
        let path = victims.join(name);
        std::fs::write(&path, format!("{name}: root's, not to be touched\n")).unwrap();
        path
    };
    let (for_report, for_temporaries, for_textfile, for_cli) = (
        precious("precious-report"),
        precious("precious-temporaries"),
        precious("precious-textfile"),
        precious("precious-cli"),
    );

    let label = ("case", "shared-machine");
    let textfile = textfile_name(&dir.join("dry-run"), label);
    let report = shared.join("report.json");
    let fifo = shared.join("fifo.json");
    // (b) The `stemmon` command's `-o`, for its own link and FIFO.
    let (cli_report, cli_fifo) = (shared.join("cli.json"), shared.join("cli-fifo.json"));

    // This process writes (its pid is the monitors'), and the next few hundred pids.
    let last_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .map(|text| text.trim().parse().unwrap())
        .unwrap_or(std::process::id());
    let pids = std::iter::once(std::process::id()).chain(last_pid + 1..last_pid + 301);
    let mut links = vec![
        (for_report.clone(), report.clone()),
        (for_textfile.clone(), shared.join(&textfile)),
        (for_cli.clone(), cli_report.clone()),
    ];
    for pid in pids {
        for name in [
            "report.json",
            "fifo.json",
            "cli.json",
            "cli-fifo.json",
            &textfile,
        ] {
            for guess in guessable_temporaries(name, pid) {
                links.push((for_temporaries.clone(), shared.join(guess)));
            }
        }
    }
    plant_as_attacker(&links, &[fifo.clone(), cli_fifo.clone()]);
    let planted = snapshot(&shared);
    assert_eq!(planted.len(), links.len() + 2);
    assert!(
        planted.values().all(|e| e.uid == ATTACKER),
        "planted by uid 65534"
    );
    let victims_before = snapshot(&victims);
    // Held open for reading from now on: whatever is written into the FIFO arrives here
    // (and a writer opening it finds a reader, so it would not fail at the open).
    let open_reader = |fifo: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
            .unwrap()
    };
    let mut reader = open_reader(&fifo);
    let mut cli_reader = open_reader(&cli_fifo);

    // (a) A monitor rewriting its report (at every log line) and (c) its textfile.
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .sample_interval(Duration::from_millis(10))
        .log_interval(Some(Duration::from_millis(30)))
        .label(label.0, label.1)
        .output(&report)
        .prometheus_textfile(&shared)
        .start()
        .unwrap();
    {
        let _stage = monitor.stage("work").unwrap();
        stemmon_suite::wait_for_samples(&monitor, 10);
    }
    let written = monitor.finish();
    assert_eq!(written.output_error, None);
    assert_eq!(written.export_error, None);
    // (a) again, into the planted FIFO.
    let into_fifo = stemmon::Monitor::builder()
        .current_thread_only()
        .sample_interval(Duration::from_millis(10))
        .log_interval(Some(Duration::from_millis(30)))
        .output(&fifo)
        .start()
        .unwrap();
    stemmon_suite::wait_for_samples(&into_fifo, 10);
    assert_eq!(into_fifo.finish().output_error, None);
    // (b) The command, if built beside this test (`cargo test` of the workspace builds
    // it; `cargo build -p stemmon-cli` otherwise).
    let cli = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("stemmon"))
        .filter(|cli| cli.is_file());
    let mut written_names = vec![report.clone(), fifo.clone(), shared.join(&textfile)];
    match &cli {
        Some(cli) => {
            for output in [&cli_report, &cli_fifo] {
                let run = Command::new(cli)
                    .args(["run", "--log-interval", "none", "-o"])
                    .arg(output)
                    .args(["--", "true"])
                    .output()
                    .unwrap();
                assert!(run.status.success(), "{run:?}");
                assert!(read_report(output).error.is_none());
            }
            written_names.extend([cli_report.clone(), cli_fifo.clone()]);
        }
        None => cannot_run(
            &format!("{test} (b), the stemmon command's -o"),
            "the stemmon binary is not built beside this test: cargo build -p stemmon-cli",
        ),
    }

    // Nothing arrived through the FIFO; the files it and the links pointed at are as
    // they were, content, inode and mtime.
    assert_eq!(drained(&mut reader), 0, "bytes were written into the FIFO");
    assert_eq!(
        drained(&mut cli_reader),
        0,
        "the command wrote into the FIFO"
    );
    assert_eq!(snapshot(&victims), victims_before, "a file outside changed");
    // Each name written is now root's regular file; every other planted name is the same
    // link, untouched, and nothing was added.
    let after = snapshot(&shared);
    for path in &written_names {
        let now = entry(path);
        assert_eq!((now.kind, now.uid), ("file", 0), "{}", path.display());
    }
    assert!(!read_report(&report).running);
    assert!(!read_report(&fifo).running);
    let text = std::fs::read_to_string(shared.join(&textfile)).unwrap();
    assert!(text.contains("stemmon_running{"), "{text}");
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        planted.keys().collect::<Vec<_>>(),
        "names added or removed"
    );
    for (name, before) in &planted {
        if written_names
            .iter()
            .any(|p| p.file_name().unwrap() == name.as_str())
        {
            continue;
        }
        assert_eq!(&after[name], before, "{name} changed");
    }
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {} links and 2 FIFOs planted by uid {ATTACKER}; {} names replaced, {} entries unchanged",
        links.len(),
        written_names.len(),
        after.len() - written_names.len()
    );
}
