#[stemmon::monitor_main(detailed_memory = "yes")]
fn main() {}
