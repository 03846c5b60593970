//! Code generation: the item in, the item with an instrumented body out.
//!
//! Everything generated reaches the runtime as `::stemmon::__private::…` and std as
//! `::core::…`, and names its locals `__stemmon_…`, so the caller's own names
//! (`mod core`, `use std as stemmon`, a local called `stage`) cannot capture it.

use crate::args::{MainArgs, MonitoredArgs};
use crate::item::{parse_fn, Function};
use proc_macro2::{Literal, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use stemmon_report::settings::Marks;
use syn::ext::IdentExt;
use syn::visit_mut::{self, VisitMut};
use syn::{LitStr, ReturnType, Type};

/// Whether the attributes instrument at all: the `enabled` feature.
const ENABLED: bool = cfg!(feature = "enabled");

/// `#[monitored]`: the item, instrumented (or unchanged with the feature off), or the
/// item unchanged plus one compile error.
pub(crate) fn monitored(args: TokenStream, item: TokenStream) -> TokenStream {
    or_error(item.clone(), monitored_with(args, item, ENABLED))
}

/// `#[monitor_main]`, as [`monitored`].
pub(crate) fn monitor_main(args: TokenStream, item: TokenStream) -> TokenStream {
    or_error(item.clone(), monitor_main_with(args, item, ENABLED))
}

/// `#[stemmon::test]`, as [`monitored`].
pub(crate) fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    or_error(item.clone(), crate::limits::expand(args, item, ENABLED))
}

/// One mistake, one diagnostic: the item stays as written so the rest still compiles.
fn or_error(item: TokenStream, result: syn::Result<TokenStream>) -> TokenStream {
    result.unwrap_or_else(|error| {
        let mut tokens = item;
        tokens.extend(error.into_compile_error());
        tokens
    })
}

/// Checks the arguments and the item; instruments it when `enabled`, else returns the
/// item token for token.
pub(crate) fn monitored_with(
    args: TokenStream,
    item: TokenStream,
    enabled: bool,
) -> syn::Result<TokenStream> {
    let args: MonitoredArgs = syn::parse2(args)?;
    let function = parse_fn(
        item.clone(),
        "monitored",
        "a fn or a method",
        "a stage reads the clock and the thread's monitor while the program runs, which \
         const evaluation cannot do; remove `const` or the attribute",
    )?;
    if !enabled {
        return Ok(item);
    }
    let name = args.name.unwrap_or_else(|| {
        let ident = &function.sig.ident;
        LitStr::new(&ident.unraw().to_string(), ident.span())
    });
    Ok(instrument_fn(function, &name))
}

/// Checks the arguments and the item; wraps it in a monitor when `enabled`, else returns
/// the item token for token.
pub(crate) fn monitor_main_with(
    args: TokenStream,
    item: TokenStream,
    enabled: bool,
) -> syn::Result<TokenStream> {
    let args: MainArgs = syn::parse2(args)?;
    let function = parse_fn(
        item.clone(),
        "monitor_main",
        "the program's `fn main`",
        "it starts a monitor while the program runs; remove `const`",
    )?;
    if !function.sig.inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &function.sig.inputs,
            "`#[monitor_main]` expects `fn main()` without parameters; read the command line \
             with `std::env::args()`",
        ));
    }
    if !enabled {
        return Ok(item);
    }
    Ok(monitor_fn(function, &args))
}

/// How a body is wrapped, by its return type.
enum Shape {
    /// The block runs in the guard's scope: unit, `!` and `impl Trait` returns, which
    /// either cannot be an `Err` or cannot be named as a closure's return type.
    Scoped,
    /// The block runs in a closure (an async block for an `async fn`) returning this
    /// type, so `return` and `?` come back to the expansion, which checks for `Err`.
    /// An `impl Trait` inside it (`Result<impl Iterator, E>`) is `_` here: a closure
    /// cannot name it, and inference finds the concrete type from the body.
    Typed(Box<Type>),
}

fn shape(output: &ReturnType) -> Shape {
    match output {
        ReturnType::Default => Shape::Scoped,
        ReturnType::Type(_, ty) if is_unit(ty) || is_never(ty) || is_impl(ty) => Shape::Scoped,
        ReturnType::Type(_, ty) => Shape::Typed(Box::new(impl_to_infer(ty))),
    }
}

fn is_unit(ty: &Type) -> bool {
    match ty {
        Type::Tuple(tuple) => tuple.elems.is_empty(),
        Type::Paren(paren) => is_unit(&paren.elem),
        Type::Group(group) => is_unit(&group.elem),
        _ => false,
    }
}

fn is_never(ty: &Type) -> bool {
    match ty {
        Type::Never(_) => true,
        Type::Paren(paren) => is_never(&paren.elem),
        Type::Group(group) => is_never(&group.elem),
        _ => false,
    }
}

/// The whole type is `impl Trait`: nothing to name, and never a `Result`.
fn is_impl(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(_) => true,
        Type::Paren(paren) => is_impl(&paren.elem),
        Type::Group(group) => is_impl(&group.elem),
        _ => false,
    }
}

/// `impl Trait` anywhere in the type (`Box<impl Fn()>` too).
fn mentions_impl(ty: &Type) -> bool {
    fn scan(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "impl",
            TokenTree::Group(group) => scan(group.stream()),
            _ => false,
        })
    }
    scan(ty.to_token_stream())
}

/// The type with every `impl Trait` in it replaced by `_`.
fn impl_to_infer(ty: &Type) -> Type {
    struct Infer;
    impl VisitMut for Infer {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(implied) = ty {
                *ty = Type::Infer(syn::TypeInfer {
                    underscore_token: syn::Token![_](implied.impl_token.span),
                });
            } else {
                visit_mut::visit_type_mut(self, ty);
            }
        }
    }
    let mut ty = ty.clone();
    if mentions_impl(&ty) {
        Infer.visit_type_mut(&mut ty);
    }
    ty
}

/// `async move { .. }` whose output type is `ty` from the start. An async block infers
/// its output from its first `return` or its tail, not from the bound it is passed to, so
/// without the never-taken first `return` a later `return Err(Box::new(e))` or
/// `&self.string` would not coerce to the fn's return type as it does in the fn itself.
fn typed_async_block(ty: &Type, block: &syn::Block) -> TokenStream {
    quote! {
        async move {
            if false {
                return ::core::option::Option::<#ty>::None.unwrap();
            }
            #block
        }
    }
}

/// Imports the two autoref traits for one expression, without leaking them into the body.
fn error_of(value: TokenStream) -> TokenStream {
    quote! {{
        use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
        (&&&::stemmon::__private::ErrorOf(&#value)).__stemmon_error()
    }}
}

/// The fn with `body` in place of its block; the block's inner attributes open the new
/// body, where they apply to the whole fn as they did.
fn with_body(function: &Function, body: TokenStream) -> TokenStream {
    let Function {
        outer,
        inner,
        vis,
        sig,
        ..
    } = function;
    quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #body
        }
    }
}

fn instrument_fn(function: Function, name: &LitStr) -> TokenStream {
    let block = &function.block;
    let sig = &function.sig;
    let error = error_of(quote!(__stemmon_ret));
    let body = if sig.asyncness.is_some() {
        let (output, never) = match &sig.output {
            ReturnType::Default => (quote!(()), false),
            ReturnType::Type(_, ty) if is_never(ty) => (quote!(::core::convert::Infallible), true),
            ReturnType::Type(_, ty) if is_impl(ty) => (quote!(_), false),
            ReturnType::Type(_, ty) => (impl_to_infer(ty).to_token_stream(), false),
        };
        let future = match shape(&sig.output) {
            Shape::Typed(ty) => typed_async_block(&ty, block),
            Shape::Scoped => quote!(async move #block),
        };
        let instrumented = quote! {
            ::stemmon::__private::instrument::<#output, _>(#name, #future).await
        };
        if never {
            quote! {
                let (__stemmon_ret, __stemmon_stage) = #instrumented;
                match __stemmon_ret {}
            }
        } else {
            quote! {
                let (__stemmon_ret, mut __stemmon_stage) = #instrumented;
                __stemmon_stage.set_error(#error);
                __stemmon_ret
            }
        }
    } else {
        // A closure would report its own location, not the caller's: keep the body inline.
        let shape = if function.has_attribute("track_caller") {
            Shape::Scoped
        } else {
            shape(&sig.output)
        };
        match shape {
            Shape::Scoped => quote! {
                let __stemmon_stage = ::stemmon::__private::enter(#name);
                #block
            },
            Shape::Typed(ty) => quote! {
                let __stemmon_stage = ::stemmon::__private::enter(#name);
                let __stemmon_ret = ::stemmon::__private::call(move || -> #ty #block);
                ::stemmon::__private::set_error(&__stemmon_stage, #error);
                __stemmon_ret
            },
        }
    };
    with_body(&function, body)
}

fn some(value: Option<TokenStream>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

fn config(args: &MainArgs) -> TokenStream {
    let seconds = |s: f64| Literal::f64_unsuffixed(s).into_token_stream();
    let output = some(args.output.as_deref().map(|p| quote!(#p)));
    let sample_interval = some(args.sample_interval.map(seconds));
    let log_interval = some(args.log_interval.map(|log| some(log.map(seconds))));
    let detailed_memory = some(args.detailed_memory.map(|d| quote!(#d)));
    let max_samples = some(
        args.max_samples
            .map(|n| Literal::usize_unsuffixed(n).into_token_stream()),
    );
    let high_water_marks = some(args.high_water_marks.map(|marks| match marks {
        Marks::Keep => quote!(::stemmon::__private::Marks::Keep),
        Marks::Off => quote!(::stemmon::__private::Marks::Off),
        _ => quote!(::stemmon::__private::Marks::Reset),
    }));
    quote! {
        ::stemmon::__private::MainConfig {
            output: #output,
            sample_interval: #sample_interval,
            log_interval: #log_interval,
            detailed_memory: #detailed_memory,
            max_samples: #max_samples,
            high_water_marks: #high_water_marks,
        }
    }
}

fn monitor_fn(function: Function, args: &MainArgs) -> TokenStream {
    let block = &function.block;
    let config = config(args);
    let start = quote! {
        let __stemmon_main = ::stemmon::__private::main_start(#config);
    };
    let error = error_of(quote!(__stemmon_ret));
    let body = match shape(&function.sig.output) {
        Shape::Scoped => quote! {
            #start
            #block
        },
        // `async fn main` under a runtime attribute such as `#[tokio::main]`, which
        // expands after this one and runs the still-async body.
        Shape::Typed(ty) if function.sig.asyncness.is_some() => {
            let future = typed_async_block(&ty, block);
            quote! {
                #start
                let __stemmon_ret = ::stemmon::__private::typed_future::<#ty, _>(#future).await;
                __stemmon_main.set_error(#error);
                __stemmon_ret
            }
        }
        Shape::Typed(ty) => quote! {
            #start
            let __stemmon_ret = ::stemmon::__private::call(move || -> #ty #block);
            __stemmon_main.set_error(#error);
            __stemmon_ret
        },
    };
    with_body(&function, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    /// Token streams compare by their printed form, without spaces (`>>` prints as `> >`
    /// once it went through syn).
    fn same(actual: &TokenStream, expected: &TokenStream) {
        assert_eq!(text(actual), text(expected));
    }

    fn text(tokens: &TokenStream) -> String {
        tokens.to_string().replace(' ', "")
    }

    fn contains(haystack: &TokenStream, needle: TokenStream) -> bool {
        text(haystack).contains(&text(&needle))
    }

    fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
        monitored_with(args, item, true).unwrap()
    }

    #[test]
    fn result_returning_fn_runs_in_a_typed_closure_and_records_the_error() {
        let out = expand(
            quote!(),
            quote! {
                /// Docs stay.
                #[inline]
                pub(crate) fn parse(text: &str) -> Result<u8, ::std::num::ParseIntError> {
                    text.parse()
                }
            },
        );
        same(
            &out,
            &quote! {
                /// Docs stay.
                #[inline]
                pub(crate) fn parse(text: &str) -> Result<u8, ::std::num::ParseIntError> {
                    let __stemmon_stage = ::stemmon::__private::enter("parse");
                    let __stemmon_ret = ::stemmon::__private::call(
                        move || -> Result<u8, ::std::num::ParseIntError> { text.parse() }
                    );
                    ::stemmon::__private::set_error(&__stemmon_stage, {
                        use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
                        (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
                    });
                    __stemmon_ret
                }
            },
        );
    }

    #[test]
    fn unit_never_and_impl_returns_keep_the_block_in_the_guard_scope() {
        for output in [
            quote!(),
            quote!(-> ()),
            quote!(-> !),
            quote!(-> impl Iterator<Item = u8>),
            quote!(-> (impl Fn())),
        ] {
            let out = expand(quote!("step"), quote!(fn f(x: u8) #output { body(x) }));
            same(
                &out,
                &quote! {
                    fn f(x: u8) #output {
                        let __stemmon_stage = ::stemmon::__private::enter("step");
                        { body(x) }
                    }
                },
            );
        }
    }

    #[test]
    fn async_fn_instruments_its_body_as_a_future() {
        let out = expand(
            quote!(),
            quote!(
                async fn load(&self) -> &str {
                    self.fetch().await
                }
            ),
        );
        same(
            &out,
            &quote! {
                async fn load(&self) -> &str {
                    let (__stemmon_ret, mut __stemmon_stage) =
                        ::stemmon::__private::instrument::<&str, _>("load", async move {
                            if false {
                                return ::core::option::Option::<&str>::None.unwrap();
                            }
                            { self.fetch().await }
                        }).await;
                    __stemmon_stage.set_error({
                        use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
                        (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
                    });
                    __stemmon_ret
                }
            },
        );
        let out = expand(
            quote!(),
            quote!(
                async fn f() -> impl Sized {
                    1
                }
            ),
        );
        assert!(contains(
            &out,
            quote!(instrument::<_, _>("f", async move { 1 }))
        ));
        let out = expand(
            quote!(),
            quote!(
                async fn f() {
                    g().await
                }
            ),
        );
        assert!(contains(
            &out,
            quote!(instrument::<(), _>("f", async move { g().await }))
        ));
    }

    #[test]
    fn inner_attributes_open_the_new_body() {
        let out = expand(
            quote!(),
            quote! {
                #[inline]
                fn parse(text: &str) -> Result<u8, E> {
                    #![allow(unused_variables)]
                    text.parse()
                }
            },
        );
        same(
            &out,
            &quote! {
                #[inline]
                fn parse(text: &str) -> Result<u8, E> {
                    #![allow(unused_variables)]
                    let __stemmon_stage = ::stemmon::__private::enter("parse");
                    let __stemmon_ret = ::stemmon::__private::call(
                        move || -> Result<u8, E> { text.parse() }
                    );
                    ::stemmon::__private::set_error(&__stemmon_stage, {
                        use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
                        (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
                    });
                    __stemmon_ret
                }
            },
        );
        let main = monitor_main_with(
            quote!(),
            quote!(
                fn main() {
                    #![allow(unused)]
                    run()
                }
            ),
            true,
        )
        .unwrap();
        assert!(
            text(&main).starts_with("fnmain(){#![allow(unused)]let__stemmon_main"),
            "{main}"
        );
    }

    #[test]
    fn an_impl_trait_inside_a_result_is_inferred_so_the_err_type_is_kept() {
        let out = expand(
            quote!(),
            quote!(
                fn rows(text: &str) -> Result<impl Iterator<Item = u8> + '_, E> {
                    Ok(text.bytes())
                }
            ),
        );
        assert!(
            contains(
                &out,
                quote!(::stemmon::__private::call(move || -> Result<_, E> { Ok(text.bytes()) });)
            ),
            "{out}"
        );
        assert!(contains(&out, quote!(::stemmon::__private::set_error)));
        let out = expand(
            quote!(),
            quote!(
                fn f() -> Box<impl Fn()> {
                    Box::new(|| ())
                }
            ),
        );
        assert!(
            contains(&out, quote!(move || -> Box<_> { Box::new(|| ()) })),
            "{out}"
        );
        let out = expand(
            quote!(),
            quote!(
                async fn rows() -> Result<impl Sized, E> {
                    Ok(1)
                }
            ),
        );
        assert!(
            contains(
                &out,
                quote!(::stemmon::__private::instrument::<Result<_, E>, _>(
                    "rows",
                    async move {
                        if false {
                            return ::core::option::Option::<Result<_, E>>::None.unwrap();
                        }
                        {
                            Ok(1)
                        }
                    }
                ))
            ),
            "{out}"
        );
    }

    #[test]
    fn a_track_caller_fn_keeps_its_body_inline() {
        let out = expand(
            quote!(),
            quote!(
                #[track_caller]
                fn get(v: &[u8]) -> Result<u8, E> {
                    Ok(v[0])
                }
            ),
        );
        same(
            &out,
            &quote! {
                #[track_caller]
                fn get(v: &[u8]) -> Result<u8, E> {
                    let __stemmon_stage = ::stemmon::__private::enter("get");
                    { Ok(v[0]) }
                }
            },
        );
    }

    #[test]
    fn stage_is_named_after_the_fn_without_raw_prefix() {
        let out = expand(
            quote!(),
            quote!(
                fn r#match() {}
            ),
        );
        assert!(out.to_string().contains("enter (\"match\")"), "{out}");
    }

    #[test]
    fn const_fn_is_an_error_that_says_why() {
        let error = monitored_with(
            quote!(),
            quote!(
                const fn f() -> u8 {
                    1
                }
            ),
            true,
        )
        .unwrap_err();
        assert!(error.to_string().contains("cannot be used on a `const fn`"));
    }

    #[test]
    fn non_fn_items_are_named_in_the_error() {
        let error = monitored_with(
            quote!(),
            quote!(
                struct S;
            ),
            true,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`#[monitored]` applies to a fn or a method, not to a struct"
        );
        let error = monitored_with(
            quote!(),
            quote!(
                fn f(&self);
            ),
            true,
        )
        .unwrap_err();
        assert!(error.to_string().contains("needs a fn with a body"));
    }

    #[test]
    fn an_error_keeps_the_item_and_adds_one_compile_error() {
        let item = quote!(
            const fn f() {}
        );
        let out = or_error(item.clone(), monitored_with(quote!(), item.clone(), true));
        let text = out.to_string();
        assert!(text.starts_with(&item.to_string()), "{text}");
        assert_eq!(text.matches("compile_error").count(), 1, "{text}");
    }

    #[test]
    fn main_with_result_records_the_error_on_the_guard() {
        let out = monitor_main_with(
            quote!(output = "r.json", sample_interval = 1, log_interval = None),
            quote!(
                fn main() -> Result<(), Box<dyn Error>> {
                    run()?;
                    Ok(())
                }
            ),
            true,
        )
        .unwrap();
        same(
            &out,
            &quote! {
                fn main() -> Result<(), Box<dyn Error>> {
                    let __stemmon_main = ::stemmon::__private::main_start(
                        ::stemmon::__private::MainConfig {
                            output: ::core::option::Option::Some("r.json"),
                            sample_interval: ::core::option::Option::Some(1.0),
                            log_interval: ::core::option::Option::Some(::core::option::Option::None),
                            detailed_memory: ::core::option::Option::None,
                            max_samples: ::core::option::Option::None,
                            high_water_marks: ::core::option::Option::None,
                        }
                    );
                    let __stemmon_ret = ::stemmon::__private::call(
                        move || -> Result<(), Box<dyn Error>> { run()?; Ok(()) }
                    );
                    __stemmon_main.set_error({
                        use ::stemmon::__private::{ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
                        (&&&::stemmon::__private::ErrorOf(&__stemmon_ret)).__stemmon_error()
                    });
                    __stemmon_ret
                }
            },
        );
    }

    #[test]
    fn async_main_stays_async_for_the_runtime_attribute_below() {
        let out = monitor_main_with(
            quote!(),
            quote! {
                #[tokio::main]
                async fn main() -> Result<(), E> { work().await?; Ok(()) }
            },
            true,
        )
        .unwrap();
        assert!(text(&out).starts_with(&text(&quote!(#[tokio::main] async fn main()))));
        assert!(contains(
            &out,
            quote!(::stemmon::__private::typed_future::<Result<(), E>, _>(async move {
                if false {
                    return ::core::option::Option::<Result<(), E>>::None.unwrap();
                }
                {
                    work().await?;
                    Ok(())
                }
            })
            .await;)
        ));
    }

    #[test]
    fn unit_main_keeps_the_block_in_the_guard_scope() {
        let out = monitor_main_with(
            quote!(max_samples = 5),
            quote!(
                fn main() {
                    run()
                }
            ),
            true,
        )
        .unwrap()
        .to_string();
        assert!(out.contains("max_samples : :: core :: option :: Option :: Some (5)"));
        assert!(out.ends_with("{ run () } }"), "{out}");
    }

    #[test]
    fn main_with_parameters_is_an_error() {
        let error = monitor_main_with(
            quote!(),
            quote!(
                fn main(args: Vec<String>) {}
            ),
            true,
        )
        .unwrap_err();
        assert!(error.to_string().contains("without parameters"));
    }

    #[test]
    fn disabled_attributes_return_the_item_token_for_token() {
        let items = [
            quote!(
                pub fn f(x: u8) -> Result<u8, E> {
                    x.checked_add(1).ok_or(E)?;
                    Ok(x)
                }
            ),
            quote!(
                async fn f() {}
            ),
            quote!(
                #[inline]
                unsafe fn f() -> impl Sized {}
            ),
        ];
        for item in items {
            same(
                &monitored_with(quote!("s"), item.clone(), false).unwrap(),
                &item,
            );
        }
        let main = quote!(
            fn main() -> std::process::ExitCode {
                std::process::ExitCode::SUCCESS
            }
        );
        same(
            &monitor_main_with(quote!(output = "x.json"), main.clone(), false).unwrap(),
            &main,
        );
        // Bad arguments are still reported, so a build with the feature off cannot hide them.
        assert!(monitored_with(
            quote!(""),
            quote!(
                fn f() {}
            ),
            false
        )
        .is_err());
        assert!(monitor_main_with(
            quote!(log = 1),
            quote!(
                fn main() {}
            ),
            false
        )
        .is_err());
    }

    /// The entry points follow the crate's `enabled` feature: run once with
    /// `--no-default-features` to check the opt-out path through the public expansion.
    #[test]
    fn entry_points_follow_the_enabled_feature() {
        let item = quote!(
            fn f() -> u8 {
                1
            }
        );
        let main = quote!(
            fn main() {}
        );
        let expanded = monitored(quote!(), item.clone());
        let expanded_main = monitor_main(quote!(), main.clone());
        if cfg!(feature = "enabled") {
            assert_ne!(expanded.to_string(), item.to_string());
            assert_ne!(expanded_main.to_string(), main.to_string());
        } else {
            same(&expanded, &item);
            same(&expanded_main, &main);
        }
    }
}
