//! Parsing of the attribute arguments: one `impl Parse` per attribute.

use proc_macro2::Span;
use stemmon_report::settings::{Marks, Value, HIGH_WATER_MARKS};
use stemmon_report::Setting;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Lit, LitStr, Token, UnOp};

/// The forms `#[monitored]` accepts, for error messages.
const MONITORED_FORMS: &str =
    "expected `#[monitored]` (the stage is named after the fn) or `#[monitored(\"stage name\")]`";

/// The keys `#[monitor_main]` accepts with the form of their values, for error messages.
const MAIN_KEYS: [(&str, &str); 6] = [
    ("output", "output = \"report.json\""),
    ("sample_interval", "sample_interval = <seconds>"),
    ("log_interval", "log_interval = <seconds> | None"),
    ("detailed_memory", "detailed_memory = <true | false>"),
    ("max_samples", "max_samples = <count>"),
    (
        "high_water_marks",
        "high_water_marks = <\"reset\" | \"keep\" | false>",
    ),
];

/// The setting of the settings table (`stemmon_report::settings`) that `key` names: its
/// bounds and its message are every surface's.
fn setting(key: &str) -> &'static Setting {
    Setting::of_attribute(key).expect("every key of MAIN_KEYS is an attribute setting")
}

/// `#[monitored]` or `#[monitored("stage name")]`.
pub(crate) struct MonitoredArgs {
    /// The stage name; `None` names the stage after the fn.
    pub(crate) name: Option<LitStr>,
}

impl Parse for MonitoredArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Ok(MonitoredArgs { name: None });
        }
        if input.peek(Ident::peek_any) && input.peek2(Token![=]) {
            let key = input.call(Ident::parse_any)?;
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "`#[monitored]` takes the stage name alone, without a key; {MONITORED_FORMS}"
                ),
            ));
        }
        let name = match input.parse::<Lit>() {
            Ok(Lit::Str(name)) => name,
            Ok(other) => {
                return Err(syn::Error::new(
                    other.span(),
                    format!("the stage name must be a string literal; {MONITORED_FORMS}"),
                ))
            }
            Err(_) => return Err(input.error(MONITORED_FORMS)),
        };
        if name.value().is_empty() {
            return Err(syn::Error::new(
                name.span(),
                format!("the stage name must not be empty; {MONITORED_FORMS}"),
            ));
        }
        if input.peek(Token![,]) {
            input.parse::<Token![,]>()?;
        }
        if !input.is_empty() {
            return Err(input.error(format!(
                "unexpected argument after the stage name; {MONITORED_FORMS}"
            )));
        }
        Ok(MonitoredArgs { name: Some(name) })
    }
}

/// The arguments of `#[monitor_main(...)]`; `None` where a key was not written.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct MainArgs {
    pub(crate) output: Option<String>,
    pub(crate) sample_interval: Option<f64>,
    /// `Some(None)` for `log_interval = None`.
    pub(crate) log_interval: Option<Option<f64>>,
    pub(crate) detailed_memory: Option<bool>,
    pub(crate) max_samples: Option<usize>,
    /// `false` is [`Marks::Off`], `true` [`Marks::Reset`].
    pub(crate) high_water_marks: Option<Marks>,
}

impl Parse for MainArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = MainArgs::default();
        while !input.is_empty() {
            if !input.peek(Ident::peek_any) {
                return Err(input.error(format!(
                    "expected `key = value`; the accepted keys are {}",
                    accepted_keys()
                )));
            }
            let key = input.call(Ident::parse_any)?;
            let name = key.unraw().to_string();
            let Some(&(_, form)) = MAIN_KEYS.iter().find(|(k, _)| *k == name) else {
                return Err(unknown_key(&key, &name));
            };
            if !input.peek(Token![=]) {
                return Err(input.error(format!("expected `=` after `{name}`: `{form}`")));
            }
            input.parse::<Token![=]>()?;
            if input.is_empty() || input.peek(Token![,]) {
                return Err(input.error(format!("expected a value: `{form}`")));
            }
            let value: Expr = input.parse()?;
            let duplicate = match name.as_str() {
                "output" => set(&mut args.output, output(&value)?),
                "sample_interval" => set(
                    &mut args.sample_interval,
                    seconds(&value, "sample_interval", false)?
                        .expect("`None` is rejected for sample_interval"),
                ),
                "log_interval" => set(
                    &mut args.log_interval,
                    seconds(&value, "log_interval", true)?,
                ),
                "detailed_memory" => set(
                    &mut args.detailed_memory,
                    boolean(&value, "detailed_memory")?,
                ),
                "high_water_marks" => set(&mut args.high_water_marks, marks(&value)?),
                "max_samples" => set(&mut args.max_samples, count(&value)?),
                _ => unreachable!("every key of MAIN_KEYS is handled"),
            };
            if duplicate {
                return Err(syn::Error::new(
                    key.span(),
                    format!("`{name}` is given more than once"),
                ));
            }
            if input.is_empty() {
                break;
            }
            if !input.peek(Token![,]) {
                return Err(input.error("expected `,` between the arguments"));
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}

/// Stores `value`; returns whether the slot was already taken.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    slot.replace(value).is_some()
}

fn accepted_keys() -> String {
    MAIN_KEYS
        .iter()
        .map(|(_, form)| format!("`{form}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn unknown_key(key: &Ident, name: &str) -> syn::Error {
    let suggestion = MAIN_KEYS
        .iter()
        .map(|(k, _)| (*k, edit_distance(name, k)))
        .filter(|&(k, distance)| distance <= 2 || shares_prefix(name, k))
        .min_by_key(|&(_, distance)| distance)
        .map_or_else(
            || "; the accepted keys are".to_owned(),
            |(k, _)| format!(": did you mean `{k}`? The accepted keys are"),
        );
    syn::Error::new(
        key.span(),
        format!("unknown key `{name}`{suggestion} {}", accepted_keys()),
    )
}

/// One key starts with the other and the shorter has four letters or more:
/// `detailed` for `detailed_memory`, `output_path` for `output`.
fn shares_prefix(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 4 && long.starts_with(short)
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Looks through the invisible groups and parentheses a `macro_rules!` caller may add.
fn unwrap(value: &Expr) -> &Expr {
    match value {
        Expr::Group(group) => unwrap(&group.expr),
        Expr::Paren(paren) => unwrap(&paren.expr),
        other => other,
    }
}

fn output(value: &Expr) -> syn::Result<String> {
    const FORM: &str = "`output = \"report.json\"`";
    match unwrap(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(path),
            ..
        }) => {
            if path.value().is_empty() {
                Err(syn::Error::new(
                    path.span(),
                    format!("`output` must name a file, not be empty: {FORM}"),
                ))
            } else {
                Ok(path.value())
            }
        }
        other => Err(syn::Error::new_spanned(
            other,
            format!("`output` expects a string literal path: {FORM}"),
        )),
    }
}

/// A positive number of seconds (integer or float literal), or `None` where `none_ok`.
fn seconds(value: &Expr, key: &str, none_ok: bool) -> syn::Result<Option<f64>> {
    let forms = if none_ok {
        format!("`{key} = 0.5`, `{key} = 30`, or `{key} = None` to turn the live log off")
    } else {
        format!("`{key} = 0.5` or `{key} = 2`")
    };
    let value = unwrap(value);
    let number = match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Float(lit),
            ..
        }) => lit.base10_parse::<f64>()?,
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<f64>()?,
        Expr::Unary(unary)
            if matches!(unary.op, UnOp::Neg(_))
                && matches!(
                    unwrap(&unary.expr),
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Float(_) | Lit::Int(_),
                        ..
                    })
                ) =>
        {
            return Err(syn::Error::new_spanned(
                value,
                format!("`{key}`: {}: {forms}", setting(key).expected()),
            ));
        }
        Expr::Path(path) if path.qself.is_none() && path.path.is_ident("None") => {
            if none_ok {
                return Ok(None);
            }
            return Err(syn::Error::new_spanned(
                value,
                format!("`{key}` cannot be `None`; expected a positive number of seconds: {forms}"),
            ));
        }
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!("`{key}` expects a number of seconds: {forms}"),
            ))
        }
    };
    match setting(key).check_seconds(number) {
        Ok(_) => Ok(Some(number)),
        Err(expected) => Err(syn::Error::new_spanned(
            value,
            format!("`{key}`: {expected}: {forms}"),
        )),
    }
}

fn boolean(value: &Expr, key: &str) -> syn::Result<bool> {
    match unwrap(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(flag),
            ..
        }) => Ok(flag.value),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{key}` expects `true` or `false`: `{key} = true`"),
        )),
    }
}

/// `"reset"`, `"keep"`, or a boolean (`true` is the default, `"reset"`), checked
/// against the settings table.
fn marks(value: &Expr) -> syn::Result<Marks> {
    let text = match unwrap(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(flag),
            ..
        }) => return Ok(Marks::from(flag.value)),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) => text.value(),
        other => {
            return Err(syn::Error::new_spanned(
                other,
                format!(
                    "`high_water_marks` expects \"reset\", \"keep\" or false: {}",
                    HIGH_WATER_MARKS.expected()
                ),
            ))
        }
    };
    match HIGH_WATER_MARKS.parse(&text) {
        Ok(Value::Marks(marks)) => Ok(marks),
        Ok(Value::Flag(on)) => Ok(Marks::from(on)),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`high_water_marks = {text:?}`: {}",
                HIGH_WATER_MARKS.expected()
            ),
        )),
    }
}

fn count(value: &Expr) -> syn::Result<usize> {
    const FORM: &str = "`max_samples = 100` (0 keeps summaries only)";
    match unwrap(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<usize>(),
        Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => Err(syn::Error::new_spanned(
            unary,
            format!("`max_samples` cannot be negative: {FORM}"),
        )),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`max_samples` expects an integer count: {FORM}"),
        )),
    }
}

/// The span to blame for something that is not a fn: its keyword where we can find it.
pub(crate) fn item_kind(item: &syn::Item) -> (Span, &'static str) {
    use syn::Item;
    match item {
        Item::Struct(i) => (i.struct_token.span, "a struct"),
        Item::Enum(i) => (i.enum_token.span, "an enum"),
        Item::Union(i) => (i.union_token.span, "a union"),
        Item::Const(i) => (i.const_token.span, "a const"),
        Item::Static(i) => (i.static_token.span, "a static"),
        Item::Impl(i) => (i.impl_token.span, "an impl block"),
        Item::Trait(i) => (i.trait_token.span, "a trait"),
        Item::Mod(i) => (i.mod_token.span, "a module"),
        Item::Type(i) => (i.type_token.span, "a type alias"),
        Item::Use(i) => (i.use_token.span, "a use declaration"),
        Item::ExternCrate(i) => (i.extern_token.span, "an extern crate"),
        Item::ForeignMod(i) => (i.abi.extern_token.span, "an extern block"),
        Item::Macro(i) => (i.mac.path.span(), "a macro invocation"),
        other => (other.span(), "this item"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn main_args(tokens: proc_macro2::TokenStream) -> syn::Result<MainArgs> {
        syn::parse2(tokens)
    }

    #[test]
    fn monitored_accepts_nothing_or_a_name() {
        let args: MonitoredArgs = syn::parse2(quote!()).unwrap();
        assert!(args.name.is_none());
        let args: MonitoredArgs = syn::parse2(quote!("fit")).unwrap();
        assert_eq!(args.name.unwrap().value(), "fit");
        let args: MonitoredArgs = syn::parse2(quote!("fit",)).unwrap();
        assert_eq!(args.name.unwrap().value(), "fit");
    }

    #[test]
    fn monitored_rejects_what_is_not_a_name() {
        for (tokens, message) in [
            (quote!(""), "must not be empty"),
            (quote!(42), "must be a string literal"),
            (quote!(fit), "expected `#[monitored]`"),
            (quote!(name = "fit"), "without a key"),
            (
                quote!("fit", "predict"),
                "unexpected argument after the stage name",
            ),
        ] {
            let error = syn::parse2::<MonitoredArgs>(tokens.clone()).err().unwrap();
            assert!(
                error.to_string().contains(message),
                "{tokens}: {error} lacks {message:?}"
            );
        }
    }

    #[test]
    fn main_accepts_every_key() {
        let args = main_args(quote!(
            output = "r.json",
            sample_interval = 0.5,
            log_interval = None,
            detailed_memory = true,
            max_samples = 100,
            high_water_marks = false,
        ))
        .unwrap();
        assert_eq!(
            args,
            MainArgs {
                output: Some("r.json".into()),
                sample_interval: Some(0.5),
                log_interval: Some(None),
                detailed_memory: Some(true),
                max_samples: Some(100),
                high_water_marks: Some(Marks::Off),
            }
        );
        assert_eq!(main_args(quote!()).unwrap(), MainArgs::default());
        for (tokens, marks) in [
            (quote!(high_water_marks = "keep"), Marks::Keep),
            (quote!(high_water_marks = "reset"), Marks::Reset),
            (quote!(high_water_marks = true), Marks::Reset),
        ] {
            let args = main_args(tokens).unwrap();
            assert_eq!(args.high_water_marks, Some(marks));
        }
    }

    #[test]
    fn main_takes_integer_seconds() {
        let args = main_args(quote!(sample_interval = 1, log_interval = 30)).unwrap();
        assert_eq!(args.sample_interval, Some(1.0));
        assert_eq!(args.log_interval, Some(Some(30.0)));
        // The bounds themselves are accepted.
        let args = main_args(quote!(sample_interval = 0.001, log_interval = 86400)).unwrap();
        assert_eq!(args.sample_interval, Some(0.001));
        assert_eq!(args.log_interval, Some(Some(86400.0)));
    }

    #[test]
    fn main_rejects_bad_input_with_the_accepted_form() {
        for (tokens, message) in [
            (
                quote!(sample_intervall = 1),
                "did you mean `sample_interval`?",
            ),
            (quote!(detailed = true), "did you mean `detailed_memory`?"),
            (
                quote!(colour = 1),
                "unknown key `colour`; the accepted keys are `output",
            ),
            (quote!(output = 1), "`output` expects a string literal path"),
            (quote!(output = ""), "must name a file"),
            (
                quote!(sample_interval = 0),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(sample_interval = 0.0),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(log_interval = -1),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (quote!(sample_interval = None), "cannot be `None`"),
            (quote!(sample_interval = "1"), "expects a number of seconds"),
            (
                quote!(sample_interval = 1e-12),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(sample_interval = 0.0009),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(log_interval = 86400.5),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(sample_interval = 1e19),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(log_interval = 1e400),
                "expected a number of seconds from 0.001 to 86400",
            ),
            (
                quote!(high_water_marks = 1),
                "`high_water_marks` expects \"reset\", \"keep\" or false: expected reset or keep",
            ),
            (
                quote!(high_water_marks = "sometimes"),
                "`high_water_marks = \"sometimes\"`: expected reset or keep, or 0 (off)",
            ),
            (
                quote!(high_water_mark = true),
                "did you mean `high_water_marks`?",
            ),
            (quote!(detailed_memory = 1), "expects `true` or `false`"),
            (quote!(max_samples = 1.5), "expects an integer count"),
            (quote!(max_samples = -1), "cannot be negative"),
            (quote!(output), "expected `=` after `output`"),
            (quote!(output =), "expected a value"),
            (quote!(output = "a" output = "b"), "expected `,`"),
            (quote!(output = "a", output = "b"), "given more than once"),
            (quote!("report.json"), "expected `key = value`"),
        ] {
            let error = main_args(tokens.clone()).unwrap_err();
            assert!(
                error.to_string().contains(message),
                "{tokens}: {error} lacks {message:?}"
            );
        }
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("sample_intervall", "sample_interval"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
