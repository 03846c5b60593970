//! A crate with its own `mod core` and `mod std`, and a module without the prelude: the
//! expansions reach std as `::core` and the runtime as `::stemmon`, and name no prelude
//! item, so none of these can capture or break them.
#![deny(warnings)]
#![allow(dead_code)]

mod core {}
mod std {}

#[stemmon::monitored]
fn parse(text: &str) -> Result<u32, ::std::num::ParseIntError> {
    text.parse()
}

#[stemmon::monitored]
async fn later() -> Option<u8> {
    Some(1)
}

mod bare {
    #![no_implicit_prelude]

    #[::stemmon::monitored]
    pub fn half(x: u32) -> ::core::result::Result<u32, ::std::boxed::Box<u32>> {
        if x % 2 == 1 {
            return ::core::result::Result::Err(::std::boxed::Box::new(x));
        }
        ::core::result::Result::Ok(x / 2)
    }

    #[::stemmon::monitored]
    pub async fn later() -> ::core::option::Option<u8> {
        ::core::option::Option::Some(1)
    }
}

#[stemmon::monitor_main(sample_interval = 0.5, log_interval = None, max_samples = 2)]
fn main() -> Result<(), ::std::num::ParseIntError> {
    let _ = later();
    let _ = bare::later();
    assert_eq!(bare::half(4), Ok(2));
    parse("1").map(drop)
}
