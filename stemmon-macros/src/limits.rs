//! `#[stemmon::test(...)]`: the arguments (each size parsed by the settings table,
//! so a bad one is an error at its token) and the expansion.

use crate::item::{parse_fn, Function};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use stemmon_report::settings::{Setting, Value};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, Lit, Token};

/// The keys with the form of their values, for error messages.
const KEYS: [(&str, &str); 6] = [
    ("max_heap", "max_heap = \"64 MiB\""),
    ("max_allocated", "max_allocated = \"1 GiB\""),
    ("max_allocations", "max_allocations = 10_000"),
    ("leaks", "leaks = \"0 B\""),
    ("max_rss", "max_rss = \"300 MiB\""),
    ("rayon", "rayon"),
];

/// The limits given, in bytes (or a count), in the order given.
#[derive(Default)]
pub(crate) struct TestArgs {
    pub(crate) limits: Vec<(String, u64)>,
    pub(crate) rayon: bool,
}

fn keys() -> String {
    KEYS.iter()
        .map(|(_, form)| format!("`{form}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Parse for TestArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = TestArgs::default();
        while !input.is_empty() {
            let key = input
                .call(Ident::parse_any)
                .map_err(|e| syn::Error::new(e.span(), format!("expected one of {}", keys())))?;
            let name = key.unraw().to_string();
            let Some(&(_, form)) = KEYS.iter().find(|(k, _)| *k == name) else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown key `{name}`; the accepted keys are {}", keys()),
                ));
            };
            let duplicate =
                args.limits.iter().any(|(k, _)| *k == name) || (name == "rayon" && args.rayon);
            if duplicate {
                return Err(syn::Error::new(
                    key.span(),
                    format!("`{name}` is given more than once"),
                ));
            }
            if name == "rayon" {
                args.rayon = true;
            } else {
                if !input.peek(Token![=]) {
                    return Err(input.error(format!("expected `=` after `{name}`: `{form}`")));
                }
                input.parse::<Token![=]>()?;
                let value: Expr = input.parse()?;
                let setting = Setting::of_test_limit(&name).expect("every limit key has a setting");
                args.limits.push((name, limit(setting, &value, form)?));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}

/// A size from a string literal (`"64 MiB"`), or a count from an integer literal.
fn limit(setting: &Setting, value: &Expr, form: &str) -> syn::Result<u64> {
    let lit = match unwrap(value) {
        Expr::Lit(lit) => &lit.lit,
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!("expected a literal: `{form}`"),
            ));
        }
    };
    let text = match lit {
        Lit::Str(text) => text.value(),
        Lit::Int(int) => int.base10_digits().to_owned(),
        other => return Err(syn::Error::new_spanned(other, format!("expected `{form}`"))),
    };
    let count = matches!(setting.kind, stemmon_report::settings::Kind::Count);
    if count != matches!(lit, Lit::Int(_)) {
        return Err(syn::Error::new_spanned(lit, format!("expected `{form}`")));
    }
    match setting.parse(&text) {
        Ok(Value::Size(bytes) | Value::Count(bytes)) => Ok(bytes),
        _ => Err(syn::Error::new_spanned(
            lit,
            format!("`{}`: {}: `{form}`", setting.name, setting.expected()),
        )),
    }
}

/// Looks through the invisible groups and parentheses a `macro_rules!` caller may add.
fn unwrap(value: &Expr) -> &Expr {
    match value {
        Expr::Group(group) => unwrap(&group.expr),
        Expr::Paren(paren) => unwrap(&paren.expr),
        other => other,
    }
}

/// Whether `attr` is a test attribute (`#[test]`, `#[tokio::test]`, ...).
fn is_test(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "test")
}

/// The expansion (or the item as a plain test, with `enabled` off).
pub(crate) fn expand(
    args: TokenStream,
    item: TokenStream,
    enabled: bool,
) -> syn::Result<TokenStream> {
    let parsed: TestArgs = syn::parse2(args.clone())?;
    let function = parse_fn(
        item,
        "stemmon::test",
        "a test fn",
        "a test runs at run time",
    )?;
    if function.sig.asyncness.is_some() {
        // The runtime's attribute makes it a sync test first; this one then wraps that.
        if !function.outer.iter().any(is_test) {
            return Err(syn::Error::new(
                function.sig.asyncness.map_or(Span::call_site(), |a| a.span),
                "`#[stemmon::test]` on an `async fn` needs the runtime's test attribute after \
                 it: `#[stemmon::test(...)] #[tokio::test] async fn ...`",
            ));
        }
        let Function {
            outer,
            inner,
            vis,
            sig,
            block,
        } = function;
        let stmts = &block.stmts;
        return Ok(quote! {
            #(#outer)*
            #[::stemmon::test(#args)]
            #vis #sig { #(#inner)* #(#stmts)* }
        });
    }
    if !function.sig.inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &function.sig.inputs,
            "a test takes no arguments",
        ));
    }
    let test_attr =
        (!function.outer.iter().any(is_test)).then(|| quote!(#[::core::prelude::v1::test]));
    let Function {
        outer,
        inner,
        vis,
        sig,
        block,
    } = function;
    if !enabled {
        return Ok(quote! { #test_attr #(#outer)* #vis #sig { #(#inner)* #block } });
    }
    let name = sig.ident.to_string();
    let keys = parsed.limits.iter().map(|(k, _)| k);
    let values = parsed.limits.iter().map(|(_, v)| v);
    let output = match &sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, ty) => quote!(#ty),
    };
    let run = if parsed.rayon {
        quote!(::stemmon::__private::run_test_rayon)
    } else {
        quote!(::stemmon::__private::run_test)
    };
    Ok(quote! {
        #test_attr
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #run(
                ::stemmon::__private::Limits::new("")
                    #(.__bytes(#keys, #values))*,
                ::core::module_path!(),
                #name,
                move || -> #output #block,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: TokenStream) -> syn::Result<TestArgs> {
        syn::parse2(args)
    }

    #[test]
    fn sizes_and_counts_are_read_by_the_settings_table() {
        let args = parse(quote!(
            max_heap = "64 MiB",
            max_allocations = 10_000,
            leaks = "0 B",
            rayon
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            args.limits,
            [
                ("max_heap".to_owned(), 64 << 20),
                ("max_allocations".to_owned(), 10_000),
                ("leaks".to_owned(), 0)
            ]
        );
        assert!(args.rayon);
    }

    #[test]
    fn a_bad_size_a_string_count_and_an_unknown_key_are_errors() {
        let message = |args| parse(args).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message(quote!(max_heap = "64 mebibytes")).starts_with("`max_heap`: expected a size")
        );
        assert!(message(quote!(max_allocations = "10"))
            .starts_with("expected `max_allocations = 10_000`"));
        assert!(message(quote!(max_heap = 64)).starts_with("expected `max_heap"));
        assert!(message(quote!(max_heep = "1 MiB")).starts_with("unknown key `max_heep`"));
    }
}
