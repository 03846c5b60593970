//! A body that opens with inner attributes (`#![allow(..)]`) keeps them, for every
//! shape; they still apply to the whole body, so `deny(warnings)` stays quiet.
#![deny(warnings)]

use std::num::ParseIntError;
use stemmon::monitored;

#[monitored]
fn typed(text: &str) -> Result<u32, ParseIntError> {
    #![allow(unused_variables)]
    let unused = 1;
    text.parse()
}

#[monitored]
fn scoped() {
    #![allow(unused_variables, clippy::let_unit_value)]
    let unused = ();
}

#[monitored]
#[track_caller]
fn inline_body() -> u32 {
    #![allow(unused_mut)]
    let mut kept = 3;
    kept
}

#[monitored]
async fn later() -> Result<u8, ParseIntError> {
    #![allow(unused_variables)]
    let unused = 1;
    "7".parse()
}

struct Model;

impl Model {
    #[monitored]
    fn fit(&self) -> u8 {
        #![allow(unused_variables)]
        let unused = 1;
        2
    }
}

#[stemmon::monitor_main(log_interval = None)]
fn main() {
    #![allow(unused_variables)]
    let unused = 1;
    assert_eq!(typed("4"), Ok(4));
    scoped();
    assert_eq!(inline_body(), 3);
    assert_eq!(Model.fit(), 2);
    let future = later();
    drop(future);
}
