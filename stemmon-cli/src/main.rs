//! `stemmon`: run any program under a monitor, and read, compare, plot, export and
//! merge the reports (the book's `command/README.md`).
//!
//! Exit codes: 0 on success; 2 with one line on stderr for bad input (a missing or
//! truncated file, JSON that is not a report, a command that does not exist); `compare`
//! exits 1 on a regression; `run` exits with the command's own code.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod compare;
mod export;
mod format;
mod input;
mod merge;
mod peak;
mod plot;
mod run;
mod show;
mod table;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// Stage-by-stage time and whole-process-tree memory: run a program under a monitor,
/// then show, compare, plot, export and merge its reports.
#[derive(Debug, Parser)]
#[command(name = "stemmon", version, about, long_about = None)]
#[command(
    after_help = "Exit status: 0 on success, 2 on bad input (a missing or truncated \
file, JSON that is not a report, a command that does not exist), 1 when `compare` finds a \
regression; `run` exits with the command's own status."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::Args),
    Show(show::Args),
    Compare(compare::Args),
    Plot(plot::Args),
    Export(ExportArgs),
    Merge(merge::Args),
}

/// Writes a report's stage calls and memory as a trace that Perfetto and chrome://tracing
/// open, or sends its metrics and trace to an OpenTelemetry collector.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "With --format otlp: OTLP/HTTP with protobuf bodies; the OTEL_EXPORTER_OTLP[_METRICS|_TRACES]_{HEADERS,TIMEOUT,COMPRESSION}, OTEL_{METRICS,TRACES}_EXPORTER, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES variables are read, and without --endpoint, OTEL_EXPORTER_OTLP_ENDPOINT (or the per-signal endpoints); STEMMON_OTLP_COMMAND_ARGS=1 adds the argv. No redirect is followed. Exit 0 when any signal was accepted (a warning names the other), 2 when none was."
)]
struct ExportArgs {
    /// The report to export.
    report: PathBuf,
    /// The trace format.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// Where to write the trace (chrome); standard output when omitted.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The collector's base URL (otlp), e.g. http://localhost:4318: `/v1/metrics` and
    /// `/v1/traces` are appended.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ExportFormat {
    /// Chrome trace event JSON (ui.perfetto.dev, chrome://tracing).
    Chrome,
    /// OTLP/HTTP to an OpenTelemetry collector: the metrics and the run as a trace.
    Otlp,
}

/// Why a subcommand stopped: printed as one line on stderr, then the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// Bad input from the user: exit 2.
    pub(crate) fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
}

/// Prints to stdout, every line with its control characters escaped (a report's names
/// never reach the terminal raw); a closed pipe (`stemmon show r.json | head -1`) is not
/// an error.
pub(crate) fn print_out(text: &str) {
    use std::io::Write;
    // A line at a time: a long output is never copied whole.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut written = Ok(());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        written = written
            .and_then(|()| out.write_all(format::clean(body).as_bytes()))
            .and_then(|()| out.write_all(end.as_bytes()));
        if written.is_err() {
            break;
        }
    }
    let _ = written.and_then(|()| out.flush());
}

/// Prints one line to stderr, ignoring a stderr that cannot be written.
pub(crate) fn print_err(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// clap's usage error as one line: its message up to the usage block, lines joined.
fn usage_error_line(rendered: &str) -> String {
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    format!(
        "stemmon: {} (see --help)",
        format::clean(&message.join(" "))
    )
}

/// The hidden first argument that makes this binary the NVML helper of a `stemmon run`
/// (it reads the GPU in a process of its own, so a crashing driver cannot take `run`
/// down).
pub(crate) const GPU_HELPER: &str = "__gpu-helper";

fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == GPU_HELPER)
    {
        return stemmon::serve_gpu_helper();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // Help and version: to stdout, exit 0.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error)
            if error.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            // `stemmon` alone: the help (to stderr), exit 2.
            let _ = error.print();
            return ExitCode::from(2);
        }
        Err(error) => {
            // A usage error is bad input too: one line on stderr, exit 2.
            print_err(&usage_error_line(&error.render().to_string()));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Show(args) => show::show(&args).map(|()| 0),
        Command::Compare(args) => compare::compare(&args),
        Command::Plot(args) => plot::plot(&args).map(|()| 0),
        Command::Export(args) => match args.format {
            ExportFormat::Chrome => match args.endpoint {
                Some(_) => Err(Failure::input("--endpoint is for --format otlp")),
                None => export::chrome(&args.report, args.output.as_deref()).map(|()| 0),
            },
            ExportFormat::Otlp => match args.output {
                Some(_) => Err(Failure::input(
                    "--format otlp sends to a collector: -o is for --format chrome",
                )),
                None => export::otlp(&args.report, args.endpoint.as_deref()).map(|()| 0),
            },
        },
        Command::Merge(args) => merge::merge(&args).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            // One line, whatever the message holds.
            print_err(&format!("stemmon: {}", format::clean(&failure.message)));
            ExitCode::from(failure.code)
        }
    }
}
