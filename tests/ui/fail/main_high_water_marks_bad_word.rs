#[stemmon::monitor_main(high_water_marks = "sometimes")]
fn main() {}
