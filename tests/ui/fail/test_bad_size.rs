#[stemmon::test(max_heap = "64 mebibytes")]
fn holds_little() {}

fn main() {}
