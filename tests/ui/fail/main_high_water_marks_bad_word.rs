#[stemmon::monitor_main(high_water_marks = "yes")]
fn main() {}
