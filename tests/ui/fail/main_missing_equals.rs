#[stemmon::monitor_main(output "report.json")]
fn main() {}
