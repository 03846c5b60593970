#[stemmon::monitor_main(max_samples = 1.5)]
fn main() {}
