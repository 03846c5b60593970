#[stemmon::test(max_allocations = "10000")]
fn allocates_little() {}

fn main() {}
