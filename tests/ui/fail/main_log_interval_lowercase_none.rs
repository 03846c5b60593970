#[stemmon::monitor_main(log_interval = none)]
fn main() {}
