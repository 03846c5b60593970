#[stemmon::monitor_main(sample_interval = 0)]
fn main() {}
