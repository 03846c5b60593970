#[stemmon::monitor_main(output = "a.json", output = "b.json")]
fn main() {}
