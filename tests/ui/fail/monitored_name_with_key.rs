#[stemmon::monitored(name = "fit")]
fn fit() {}

fn main() {
    fit();
}
