#[stemmon::monitor_main]
fn run(args: Vec<String>) {
    drop(args);
}

fn main() {
    run(Vec::new());
}
