#[stemmon::monitored]
struct Model;

fn main() {
    let _ = Model;
}
