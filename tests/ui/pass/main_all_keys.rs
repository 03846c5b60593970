//! Every key at once, integer seconds, a trailing comma, and a unit `main`.
#![deny(warnings)]

#[stemmon::monitor_main(
    output = "target/stemmon/ui-main-all-keys.json",
    sample_interval = 1,
    log_interval = 30,
    detailed_memory = true,
    max_samples = 10,
    high_water_marks = "keep"
)]
fn main() {
    let data = vec![1u8; 1 << 20];
    std::hint::black_box(&data);
}
