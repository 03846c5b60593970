//! The tree's peak RSS: the kernel's high-water marks, read with `getrusage` where the
//! test has its process to itself, or with `wait4` from the parent of a re-run.

use std::io::{self, Read};
use std::process::{Command, Stdio};

/// The largest peak RSS of this process and of the children it reaped, in bytes.
#[cfg(unix)]
pub(crate) fn own_peak() -> Option<u64> {
    crate::sys::own_peak()
}

#[cfg(not(unix))]
pub(crate) fn own_peak() -> Option<u64> {
    None
}

/// How a re-run ended.
pub(crate) struct Rerun {
    /// Whether the test passed in the child.
    pub(crate) passed: bool,
    /// The child's peak RSS and its reaped descendants', from `wait4`.
    pub(crate) peak: Option<u64>,
    /// What the child printed on stderr, then stdout.
    pub(crate) output: String,
}

/// Runs the test `name` again in a child process of this test binary (`NAME --exact
/// --nocapture`, with the marker) and reaps it with `wait4`.
#[cfg(unix)]
pub(crate) fn rerun(name: &str) -> io::Result<Rerun> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(crate::env::TEST_CHILD, name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let (exited_zero, peak) = crate::sys::reap_with_peak(child.id())?;
    let stdout = out.join().unwrap_or_default();
    // A filter that matched nothing passes too: the test must have run.
    let ran = stdout.contains(&format!("test {name} ... "));
    let passed = ran && exited_zero;
    let mut output = format!("{}{stdout}", err.join().unwrap_or_default());
    if !ran {
        output =
            format!("max_rss: the re-run of the test in a child ran no test {name:?}: {output}");
    }
    Ok(Rerun {
        passed,
        peak: Some(peak),
        output,
    })
}

#[cfg(not(unix))]
pub(crate) fn rerun(_name: &str) -> io::Result<Rerun> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "re-runs need unix",
    ))
}

/// The message the test panicked with in the child's output, else the whole output.
pub(crate) fn child_panic(output: &str) -> String {
    let Some(at) = output.find("panicked at ") else {
        return output.trim().to_owned();
    };
    let after = &output[at..];
    let message: Vec<&str> = after
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with("note: ") && !line.starts_with("stack backtrace:"))
        .collect();
    message.join("\n").trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panic_message_is_taken_from_the_child_output() {
        let output =
            "\nrunning 1 test\n\nthread 'a' panicked at tests/x.rs:3:1:\nmax_heap: 2.0 MiB \
                      held, limit 1.0 MiB\n\nstage  calls\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            child_panic(output),
            "max_heap: 2.0 MiB held, limit 1.0 MiB\n\nstage  calls"
        );
    }

    #[test]
    fn own_peak_is_at_least_what_this_process_touched() {
        let block = vec![1u8; 32 << 20];
        std::hint::black_box(&block);
        assert!(own_peak().unwrap() >= 32 << 20);
    }
}
