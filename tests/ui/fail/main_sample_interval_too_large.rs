#[stemmon::monitor_main(sample_interval = 1e19)]
fn main() {}
