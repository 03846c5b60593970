#[stemmon::monitored("")]
fn fit() {}

fn main() {
    fit();
}
