//! Attribute macros of stemmon. Use them through the `stemmon` crate.
use proc_macro::TokenStream;

/// Placeholder until the attributes land.
#[proc_macro_attribute]
pub fn monitored(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Placeholder until the attributes land.
#[proc_macro_attribute]
pub fn monitor_main(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
