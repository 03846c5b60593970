#[stemmon::monitored(42)]
fn fit() {}

fn main() {
    fit();
}
