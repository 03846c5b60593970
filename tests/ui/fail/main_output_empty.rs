#[stemmon::monitor_main(output = "")]
fn main() {}
