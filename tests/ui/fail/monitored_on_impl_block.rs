struct Model;

#[stemmon::monitored]
impl Model {
    fn fit(&self) {}
}

fn main() {
    Model.fit();
}
