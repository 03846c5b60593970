//! `stemmon-hold <MiB> [<grandchildren> <grandchild MiB>]`: a process that holds a known
//! amount of touched memory, starts its own children holding theirs, prints `ready`
//! once all of them hold their memory, and exits when its standard input closes.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are whole numbers"))
        .collect();
    let mib = args.first().copied().unwrap_or(0);
    let grandchildren = args.get(1).copied().unwrap_or(0);
    let grandchild_mib = args.get(2).copied().unwrap_or(0);
    let held = stemmon_suite::touched_mib(mib);
    let mut children: Vec<_> = (0..grandchildren)
        .map(|_| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .arg(grandchild_mib.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a grandchild");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "ready");
            child
        })
        .collect();
    println!("ready");
    std::io::stdout().flush().unwrap();
    // Hold until the parent closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    for child in &mut children {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    std::hint::black_box(&held);
}
