#[stemmon::monitor_main(colour = "red")]
fn main() {}
