//! The fn item an attribute is on, with its inner attributes kept apart from the outer.
//!
//! syn puts the inner attributes of the body (`#![allow(..)]`) among the fn's
//! attributes; printed there they are an error ("an inner attribute is not permitted in
//! this context"). They go back at the top of the new body, as tracing-attributes does.

use crate::args::item_kind;
use syn::{AttrStyle, Attribute, Block, ItemFn, Signature, Visibility};

/// A non-`const` fn with a body.
pub(crate) struct Function {
    /// `#[..]` and doc comments on the fn, in order.
    pub(crate) outer: Vec<Attribute>,
    /// `#![..]` at the top of the body, in order.
    pub(crate) inner: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    pub(crate) block: Box<Block>,
}

impl Function {
    /// Whether an outer attribute is `#[name]` (by its last path segment).
    pub(crate) fn has_attribute(&self, name: &str) -> bool {
        self.outer.iter().any(|attr| attr.path().is_ident(name))
    }
}

impl From<ItemFn> for Function {
    fn from(function: ItemFn) -> Function {
        let (inner, outer) = function
            .attrs
            .into_iter()
            .partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
        Function {
            outer,
            inner,
            vis: function.vis,
            sig: function.sig,
            block: function.block,
        }
    }
}

/// The item as a non-`const` fn with a body, or an error that says what it is instead
/// (`why_not_const` explains the `const fn` case).
pub(crate) fn parse_fn(
    item: proc_macro2::TokenStream,
    attribute: &str,
    applies_to: &str,
    why_not_const: &str,
) -> syn::Result<Function> {
    if let Ok(function) = syn::parse2::<ItemFn>(item.clone()) {
        return match &function.sig.constness {
            Some(constness) => Err(syn::Error::new(
                constness.span,
                format!("`#[{attribute}]` cannot be used on a `const fn`: {why_not_const}"),
            )),
            None => Ok(function.into()),
        };
    }
    if let Ok(declaration) = syn::parse2::<syn::ForeignItemFn>(item.clone()) {
        return Err(syn::Error::new(
            declaration.semi_token.span,
            format!(
                "`#[{attribute}]` needs a fn with a body; on a trait method declaration, put \
                 it on the method in each impl instead"
            ),
        ));
    }
    let item: syn::Item = syn::parse2(item)?;
    let (span, kind) = item_kind(&item);
    Err(syn::Error::new(
        span,
        format!("`#[{attribute}]` applies to {applies_to}, not to {kind}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::{quote, ToTokens};

    #[test]
    fn inner_attributes_are_kept_apart_in_order() {
        let function = parse_fn(
            quote!(
                /// Docs.
                #[inline]
                fn f() {
                    #![allow(unused_variables)]
                    #![deny(unsafe_code)]
                    let x = 1;
                }
            ),
            "monitored",
            "a fn",
            "",
        )
        .unwrap_or_else(|_| panic!("a fn parses"));
        let text = |attrs: &[Attribute]| {
            attrs
                .iter()
                .map(|a| a.to_token_stream().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            text(&function.inner),
            ["# ! [allow (unused_variables)]", "# ! [deny (unsafe_code)]"]
        );
        assert_eq!(function.outer.len(), 2);
        assert!(function.has_attribute("inline"));
        assert!(!function.has_attribute("allow"));
    }
}
