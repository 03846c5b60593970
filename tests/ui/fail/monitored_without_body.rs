trait Model {
    #[stemmon::monitored]
    fn fit(&self);
}

fn main() {}
