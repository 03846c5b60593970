#[stemmon::monitor_main(sample_interval = "0.5")]
fn main() {}
