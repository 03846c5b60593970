#[stemmon::monitored("fit", "train")]
fn fit() {}

fn main() {
    fit();
}
