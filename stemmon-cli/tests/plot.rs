//! `stemmon plot`: the HTML page rendered in a real headless Chromium, and the SVG.

mod common;

use common::{
    cannot_run, chrome_counter_max, read_report, run_quiet, run_sh, staged_report, stemmon,
    TempDir, Workload,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The colours the chart fills parent and children RSS with (see `src/plot/svg.rs`).
const PARENT: [u8; 3] = [0x4c, 0x72, 0xb0];
const CHILDREN: [u8; 3] = [0xdd, 0x84, 0x52];

/// A Chromium on the `PATH` (or `CHROMIUM`, a path to one), for `test`, which
/// [cannot run](cannot_run) without it.
fn chromium(test: &str) -> Option<PathBuf> {
    find_chromium().map_err(|why| cannot_run(test, &why)).ok()
}

fn find_chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("CHROMIUM").map(PathBuf::from) {
        return match path.is_file() {
            true => Ok(path),
            false => Err(format!("CHROMIUM={} is not a file", path.display())),
        };
    }
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| names.map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "no {} on the PATH and no CHROMIUM set (apt-get install chromium)",
                names.join(" / ")
            )
        })
}

/// Runs headless Chromium on `page` with `extra` arguments; returns (stdout, stderr).
fn headless(browser: &Path, profile: &Path, page: &Path, extra: &[&str]) -> (String, String) {
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()));
    let output = run_with_timeout(command, Duration::from_secs(90));
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn run_with_timeout(mut command: Command, limit: Duration) -> std::process::Output {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("Chromium did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Pixels of `png` within a small distance of `colour`.
fn count_colour(png: &Path, colour: [u8; 3]) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    buffer[..info.buffer_size()]
        .chunks(channels)
        .filter(|px| {
            px[..3]
                .iter()
                .zip(colour)
                .all(|(a, b)| (i16::from(*a) - i16::from(b)).abs() <= 24)
        })
        .count()
}

#[test]
fn the_html_page_renders_in_chromium_with_the_chart_and_no_console_error() {
    let Some(browser) =
        chromium("the_html_page_renders_in_chromium_with_the_chart_and_no_console_error")
    else {
        return;
    };
    let dir = TempDir::new("plot-html");
    let report_path = staged_report(dir.path(), "report.json", Workload::default(), 0);
    let report = read_report(&report_path);
    let page = dir.path().join("plot.html");
    let output = stemmon()
        .args(["plot"])
        .arg(&report_path)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("https://"),
        "no network reference in the page"
    );
    assert!(report.timeline.len() >= 20, "{}", report.timeline.len());
    assert!(!report.spans.is_empty(), "the runtime writes spans");
    // Every stage has its band, titled with its path; a name is drawn where it fits,
    // which depends on how long each stage took on this machine, so only the widest
    // stage's name (fit holds inner) must be drawn.
    for path in ["load", "fit", "fit/inner", "predict"] {
        assert!(html.contains(&format!("<title>{path} (")), "band of {path}");
    }
    assert!(html.contains(">fit</text>"), "the name of the widest band");

    // The script ran to its end: the DOM after load carries its mark.
    let profile = dir.path().join("profile");
    let (dom, _) = headless(&browser, &profile, &page, &["--dump-dom"]);
    let points = report.timeline.len();
    assert!(
        dom.contains(&format!("data-ready=\"{points}\"")),
        "the page's script did not finish: {}",
        &dom[..dom.len().min(400)]
    );
    assert!(dom.contains("<svg") && dom.contains("id=\"peak\""));

    // No console message at all (errors and warnings both), and a screenshot of the chart.
    let shot = dir.path().join("plot.png");
    let (_, log) = headless(
        &browser,
        &profile,
        &page,
        &[
            "--enable-logging=stderr",
            "--v=0",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    // STEMMON_KEEP_PLOT=DIR keeps the report, the page and the screenshot to look at.
    if let Some(keep) = std::env::var_os("STEMMON_KEEP_PLOT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for file in [&report_path, &page, &shot] {
            std::fs::copy(file, keep.join(file.file_name().unwrap())).unwrap();
        }
    }
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    let parent = count_colour(&shot, PARENT);
    let children = count_colour(&shot, CHILDREN);
    // The parent held 64-192 MiB for a good part of the run, a dd child 100 MiB for a while.
    assert!(
        parent > 5_000,
        "parent RSS area on the screenshot: {parent} px"
    );
    assert!(
        children > 1_000,
        "children RSS area on the screenshot: {children} px"
    );
}

#[test]
fn the_svg_is_the_same_picture_standalone() {
    let dir = TempDir::new("plot-svg");
    let report_path = staged_report(dir.path(), "report.json", Workload::default(), 0);
    let report = read_report(&report_path);
    let svg_path = dir.path().join("plot.svg");
    let status = stemmon()
        .arg("plot")
        .arg(&report_path)
        .arg("-o")
        .arg(&svg_path)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    roxmltree::Document::parse(&svg).expect("well-formed XML");
    assert!(svg.starts_with("<?xml"));
    assert!(svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(!svg.contains("<script"), "static");
    for id in [
        "id=\"parent\"",
        "id=\"children\"",
        "id=\"tree\"",
        "id=\"peak\"",
    ] {
        assert!(svg.contains(id), "{id} missing");
    }
    let peak = stemmon_cli_peak_label(&report);
    assert!(svg.contains(&peak), "the peak is labelled: {peak}");
}

/// The label the chart puts on the peak: `peak 200.1 MiB in fit/inner`.
fn stemmon_cli_peak_label(report: &stemmon::Report) -> String {
    let peak = report.peaks.peak_tree_rss_bytes.unwrap() as f64 / (1u64 << 20) as f64;
    format!(
        "peak {peak:.1} MiB in {}",
        report.peak_rss_stage.as_deref().unwrap()
    )
}

#[test]
fn a_bad_output_name_or_an_empty_report_is_exit_2() {
    let dir = TempDir::new("plot-bad");
    let report_path = dir.path().join("report.json");
    std::fs::write(
        &report_path,
        r#"{"pid": 1, "wall_seconds": 1.0, "sampler": "linux-proc", "stages": []}"#,
    )
    .unwrap();
    for out in ["x.png", "x.html"] {
        let output = stemmon()
            .arg("plot")
            .arg(&report_path)
            .arg("-o")
            .arg(dir.path().join(out))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{out}");
        assert_eq!(String::from_utf8_lossy(&output.stderr).lines().count(), 1);
    }
}

#[test]
fn a_stemmon_run_report_plots_its_children_and_exports_its_counters() {
    let dir = TempDir::new("plot-run");
    let report_path = dir.path().join("report.json");
    let status = run_sh(
        &report_path,
        "sleep 0.3; dd if=/dev/zero of=/dev/null bs=100M count=150 2>/dev/null; sleep 0.3",
    );
    assert_eq!(status, Some(0));
    let report = read_report(&report_path);
    assert!(report.timeline.len() >= 5, "{}", report.timeline.len());
    let svg_path = dir.path().join("plot.svg");
    let status = stemmon()
        .arg("plot")
        .arg(&report_path)
        .arg("-o")
        .arg(&svg_path)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.contains("id=\"children\"") && svg.contains("id=\"peak\""));
    let children_mib = chrome_counter_max(&report_path, "children RSS", "MiB");
    assert!(
        children_mib > 95.0,
        "dd's 100 MiB buffer: {children_mib} MiB"
    );
}

#[test]
fn control_characters_and_markup_in_a_command_leave_the_svg_well_formed() {
    let dir = TempDir::new("plot-hostile");
    let report_path = dir.path().join("report.json");
    // The command line is the chart's title: `sh -c 'sleep 0.2' NAME` with NAME hostile.
    let hostile = "x\u{1}</text></svg>\u{1b}[2J\u{7}&\u{fffe}\"'";
    let code = run_quiet(&report_path, "0.05", &["sh", "-c", "sleep 0.2", hostile]);
    assert_eq!(code, Some(0));
    let report = read_report(&report_path);
    assert_eq!(report.command.as_ref().unwrap()[3], hostile);
    for out in ["plot.svg", "plot.html"] {
        let path = dir.path().join(out);
        let status = stemmon()
            .arg("plot")
            .arg(&report_path)
            .arg("-o")
            .arg(&path)
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0));
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: Vec<char> = text
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(raw.is_empty(), "{out}: raw control characters {raw:?}");
        if out.ends_with(".svg") {
            let svg = roxmltree::Document::parse(&text).expect("well-formed XML");
            let title = svg
                .descendants()
                .find(|n| n.has_tag_name("text"))
                .and_then(|n| n.text())
                .unwrap();
            assert!(title.contains("</text></svg>"), "shown as text: {title}");
            assert!(title.contains("\\u{1b}[2J"), "spelled out: {title}");
        }
    }
}

/// The colour of the CPU panel's area (see `src/plot/cpu.rs`).
const CPU: [u8; 3] = [0x81, 0x72, 0xb3];

/// A report with the 0.3 series: 60 points at 0.1 s, waiting (0.05 cores) in `load`,
/// four busy cores (3.8) in `fit`, one in `write`; the live heap growing to 300 MiB.
fn cpu_report() -> stemmon::Report {
    use stemmon::report::{Span, StageReport, TimelinePoint};
    let mut report = stemmon::Report::default();
    report.pid = 9;
    report.wall_seconds = 6.0;
    report.sample_interval = 0.1;
    report.sampler = "linux-proc".into();
    report.heap.peak_live_bytes = Some(300 << 20);
    report.cpu_io.cpu_cores = Some(1.6);
    for (id, (name, start)) in [("load", 0.0), ("fit", 2.0), ("write", 4.0)]
        .into_iter()
        .enumerate()
    {
        let mut stage = StageReport::default();
        stage.id = id as u32;
        stage.name = name.into();
        stage.path = name.into();
        stage.calls = 1;
        stage.start_seconds = start;
        stage.wall_seconds = 2.0;
        report.stages.push(stage);
        let mut span = Span::default();
        span.stage_id = id as u32;
        span.start_seconds = start;
        span.wall_seconds = 2.0;
        report.spans.push(span);
    }
    report.timeline = (0..60u32)
        .map(|i| {
            let mut point = TimelinePoint::default();
            point.elapsed_seconds = f64::from(i) / 10.0;
            point.end_seconds = point.elapsed_seconds + 0.1;
            point.heap_live_bytes = Some((u64::from(i) * 5) << 20);
            point.parent_rss_bytes = Some((u64::from(i) * 5 + 20) << 20);
            point.children_rss_bytes = Some(0);
            point.tree_rss_bytes = point.parent_rss_bytes;
            point.cpu_cores = Some(match i {
                0..20 => 0.05,
                20..40 => 3.8,
                _ => 1.0,
            });
            point.samples = 1;
            point
        })
        .collect();
    report
}

#[test]
fn the_cpu_panel_renders_in_chromium_in_cores_with_its_points() {
    let Some(browser) = chromium("the_cpu_panel_renders_in_chromium_in_cores_with_its_points")
    else {
        return;
    };
    let dir = TempDir::new("plot-cpu");
    let report_path = dir.path().join("report.json");
    std::fs::write(&report_path, serde_json::to_vec(&cpu_report()).unwrap()).unwrap();
    let page = dir.path().join("plot.html");
    let output = stemmon()
        .arg("plot")
        .arg(&report_path)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");

    let profile = dir.path().join("profile");
    let (dom, _) = headless(&browser, &profile, &page, &["--dump-dom"]);
    assert!(
        dom.contains("data-ready=\"60\""),
        "the script did not finish"
    );
    // The DOM Chromium built: the panel, its 120 corners, its axis in cores.
    let panel = &dom[dom.find("id=\"cpu-panel\"").expect("the CPU panel")..];
    let points = panel
        .split("id=\"cpu\" points=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the CPU line");
    assert_eq!(points.split(' ').count(), 120, "two corners a point");
    for tick in [">0 cores<", ">2 cores<", ">4 cores<"] {
        assert!(panel.contains(tick), "axis label {tick}");
    }
    assert!(
        panel.contains("<title>fit</title>"),
        "the stage bands go on under memory"
    );
    assert!(dom.contains("id=\"heap\""), "the live heap line");

    let shot = dir.path().join("plot.png");
    let (_, log) = headless(
        &browser,
        &profile,
        &page,
        &[
            "--enable-logging=stderr",
            "--v=0",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    if let Some(keep) = std::env::var_os("STEMMON_KEEP_PLOT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&shot, keep.join("plot-cpu.png")).unwrap();
    }
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    // Opened at 2.05 s, the read-out holds the steps the picture draws there: the memory
    // read at 2.0 s (its point spans 2.0-2.1 s), the CPU of the interval since 2.0 s.
    let at = PathBuf::from(format!("{}#t=2.05", page.display()));
    let (dom, _) = headless(&browser, &profile, &at, &["--dump-dom"]);
    let readout = &dom[dom.find("id=\"readout\"").expect("the read-out")..];
    let readout = &readout[..readout.find("</div>").unwrap()];
    assert!(!readout.contains("hidden"), "shown: {readout}");
    for line in [
        "t = 2.05 s",
        "tree 120.0 MiB (max over 2.00 s–2.10 s)",
        "live heap 100.0 MiB (max over 2.00 s–2.10 s)",
        "CPU 3.80 cores (over 2.00 s–2.10 s)",
        "stage fit",
    ] {
        assert!(readout.contains(line), "{line:?} in {readout}");
    }
    // 20 points at 3.8 of 6 cores on a 128-pixel panel about 330 pixels wide: ~26 000 px.
    let cpu = count_colour(&shot, CPU);
    assert!(cpu > 10_000, "CPU area on the screenshot: {cpu} px");
    assert!(
        count_colour(&shot, PARENT) > 5_000,
        "the memory panel is still drawn"
    );
}

#[test]
fn a_process_alone_has_its_exact_peak_marked_on_the_plot() {
    let dir = TempDir::new("plot-exact");
    let report_path = dir.path().join("report.json");
    // dd alone: no descendant, so its own high-water mark is the tree's exact peak.
    let argv = [
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=150M",
        "count=20",
        "status=none",
    ];
    assert_eq!(run_quiet(&report_path, "0.05", &argv), Some(0));
    let report = read_report(&report_path);
    assert!(
        report.peak_process_count <= 1,
        "{}",
        report.peak_process_count
    );
    let exact = report
        .high_water
        .peak_parent_hwm_bytes
        .expect("the command's own mark");
    let svg_path = dir.path().join("plot.svg");
    let status = stemmon()
        .arg("plot")
        .arg(&report_path)
        .arg("-o")
        .arg(&svg_path)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let peak = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("peak"))
        .expect("the peak is marked");
    assert_eq!(peak.attribute("class"), Some("exact"), "{svg}");
    let label = peak
        .descendants()
        .find(|n| n.has_tag_name("text"))
        .and_then(|n| n.text())
        .unwrap();
    let mib = exact as f64 / (1u64 << 20) as f64;
    assert!(
        label.starts_with(&format!("exact peak {mib:.1} MiB")),
        "{label}"
    );
    assert!(
        svg.contains("exact peak tree RSS"),
        "the caption says which"
    );
}
