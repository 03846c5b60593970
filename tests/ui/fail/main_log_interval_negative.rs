#[stemmon::monitor_main(log_interval = -5)]
fn main() {}
