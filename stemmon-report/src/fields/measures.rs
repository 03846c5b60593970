//! The measurements beyond the core, one file each: what each adds to a report. A new
//! one is a file here and its name in the list below.

/// Declares each measurement's module and the list of them, in the report's order.
macro_rules! measures {
    ($($name:ident),* $(,)?) => {
        $(pub mod $name;)*
        /// Every measurement, in the report's order.
        pub(super) const ALL: &[&super::Measure] = &[$(&$name::MEASURE),*];
    };
}

measures![gpu, fds, pressure];
