#[stemmon::monitor_main(sample_interval = None)]
fn main() {}
