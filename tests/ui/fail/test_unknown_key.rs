#[stemmon::test(max_heep = "64 MiB")]
fn holds_little() {}

fn main() {}
