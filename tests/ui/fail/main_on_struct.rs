#[stemmon::monitor_main]
struct Main;

fn main() {
    let _ = Main;
}
