#[stemmon::test(max_heap = "64 MiB")]
async fn holds_little() {}

fn main() {}
