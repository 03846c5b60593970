//! Every `async fn` shape `#[monitored]` accepts, driven on a current-thread runtime
//! under a monitor.
#![deny(warnings)]

use std::error::Error;
use std::fmt::Debug;
use stemmon::monitored;

#[monitored]
async fn unit() {
    tokio::task::yield_now().await
}

#[monitored("question mark")]
async fn question_mark(text: &str) -> Result<u32, Box<dyn Error>> {
    tokio::task::yield_now().await;
    if text.is_empty() {
        return Err("empty".into());
    }
    Ok(text.parse::<u32>()?)
}

#[monitored]
async fn impl_return(n: u32) -> impl Debug {
    tokio::task::yield_now().await;
    n
}

#[monitored]
async fn generic<T>(value: T) -> Vec<T>
where
    T: Clone + Send,
{
    tokio::task::yield_now().await;
    vec![value.clone(), value]
}

#[monitored]
async fn impl_arg(values: impl IntoIterator<Item = u32>) -> u32 {
    values.into_iter().sum()
}

#[monitored]
async fn never() -> ! {
    tokio::task::yield_now().await;
    panic!("never returns")
}

struct Store {
    items: Vec<String>,
}

impl Store {
    #[monitored]
    async fn first(&self) -> &str {
        tokio::task::yield_now().await;
        &self.items[0]
    }

    #[monitored]
    async fn push(&mut self, item: &str) -> &mut Vec<String> {
        tokio::task::yield_now().await;
        self.items.push(item.to_owned());
        &mut self.items
    }

    #[monitored]
    async fn into_items(self) -> Vec<String> {
        self.items
    }
}

trait Source {
    async fn read(&self, key: &str) -> Result<String, std::fmt::Error>;
}

impl Source for Store {
    #[monitored]
    async fn read(&self, key: &str) -> Result<String, std::fmt::Error> {
        tokio::task::yield_now().await;
        if key.is_empty() {
            return Err(std::fmt::Error);
        }
        Ok(format!("{key}={}", self.items.len()))
    }
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .unwrap();
    runtime.block_on(async {
        unit().await;
        assert!(question_mark("").await.is_err());
        assert!(question_mark("x").await.is_err());
        assert_eq!(question_mark("3").await.unwrap(), 3);
        assert_eq!(format!("{:?}", impl_return(2).await), "2");
        assert_eq!(assert_send(generic(1u8)).await, [1, 1]);
        assert_eq!(impl_arg([1, 2]).await, 3);
        let mut store = Store {
            items: vec!["a".into()],
        };
        assert_eq!(store.first().await, "a");
        assert_eq!(store.read("k").await.unwrap(), "k=1");
        assert!(store.read("").await.is_err());
        store.push("b").await.push("c".into());
        assert_eq!(assert_send(store.into_items()).await, ["a", "b", "c"]);
        // A `#[monitored]` future stays `Send` when its body is.
        drop(assert_send(never()));
    });
    let report = monitor.finish();
    let stage = report.stage("question mark").unwrap();
    assert_eq!((stage.calls, stage.errors), (3, 2));
    assert_eq!(stage.error.as_deref(), Some("Box<dyn Error>"));
    let read = report.stage("read").unwrap();
    assert_eq!((read.calls, read.errors), (2, 1));
    assert_eq!(read.error.as_deref(), Some("Error"));
    for path in [
        "unit",
        "impl_return",
        "generic",
        "impl_arg",
        "first",
        "push",
        "into_items",
    ] {
        assert_eq!(report.stage(path).unwrap().calls, 1, "{path}");
    }
}
