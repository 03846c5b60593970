#[stemmon::monitor_main]
const fn run() {}

fn main() {
    run();
}
