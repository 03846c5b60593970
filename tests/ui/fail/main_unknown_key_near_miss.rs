#[stemmon::monitor_main(sample_intervall = 0.5)]
fn main() {}
