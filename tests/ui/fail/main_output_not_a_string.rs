#[stemmon::monitor_main(output = 42)]
fn main() {}
