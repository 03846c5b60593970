//! A heap limit in a test binary without `stemmon::Alloc` fails the test with the two
//! lines that install it: never a silent pass. `max_rss` alone needs no allocator.

use std::process::Command;

#[stemmon::test(max_heap = "64 MiB")]
#[ignore = "fails on purpose: run by a_heap_limit_without_the_allocator_says_how_to_install_it"]
fn limited_without_the_allocator() {
    assert_eq!(vec![0u8; 16].len(), 16);
}

#[stemmon::test(max_rss = "1 GiB")]
fn max_rss_needs_no_allocator() {
    assert_eq!(vec![0u8; 16].len(), 16);
}

#[test]
fn a_heap_limit_without_the_allocator_says_how_to_install_it() {
    let name = "limited_without_the_allocator";
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{text}");
    let message = text
        .split_once(&format!("thread '{name}' "))
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map(|(_, message)| message)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        message.starts_with(
            "max_heap: no heap figures: stemmon::Alloc is not the global allocator; install it \
             in the test's crate:\n    #[global_allocator]\n    \
             static ALLOC: stemmon::Alloc = stemmon::Alloc::system();\n"
        ),
        "{message}"
    );
}
