//! One GPU reading of a tree of 10 pids (this process and 9 `sleep`s) on 2 devices with
//! a few GPU processes, beside the same NVML calls made bare through nvml-wrapper
//! (`device_by_index`, `memory_info`, `running_compute_processes`,
//! `running_graphics_processes` on each device), in the same run. Budget (the book's `gpu.md`):
//! the reading costs at most 2× the bare calls.
//!
//! Both talk to the fake `libnvidia-ml.so.1` of the GPU tests
//! (`stemmon/tests/support/fake_nvml.c`, compiled here with `cc`), unless
//! `STEMMON_BENCH_NVML` names a real driver's library: then the tree's pids are not on
//! its lists, and the figures time the real driver's calls.

use criterion::Criterion;
use nvml_wrapper::Nvml;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Compiles the fake NVML into `dir` and writes the state it serves; returns its path.
fn fake_library(dir: &Path, tree: &[u32]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("the fake's directory is made");
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../stemmon/tests/support/fake_nvml.c"
    );
    let library = dir.join("libnvidia-ml.so.1");
    let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let status = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(source)
        .status()
        .expect("cc runs");
    assert!(status.success(), "the fake NVML library builds");
    // Device 0: this process on both lists, a tree process, a process outside the tree;
    // device 1: two tree processes, one whose figure is not available.
    let state = format!(
        "driver 550.54.15\n\
         device\nname NVIDIA Fake H100\nuuid GPU-0\ntotal {total}\nused {used0}\n\
         compute {me} {gib}\ngraphics {me} {gib}\ncompute {a} {two}\ncompute 999999 {three}\n\
         device\nname NVIDIA Fake H100\nuuid GPU-1\ntotal {total}\nused {used1}\n\
         compute {b} {five}\ngraphics {c} na\n",
        total = 80 * GIB,
        used0 = 3 * GIB,
        used1 = GIB,
        me = tree[0],
        a = tree[1],
        b = tree[2],
        c = tree[3],
        gib = GIB,
        two = 200 * MIB,
        three = 300 * MIB,
        five = 500 * MIB,
    );
    std::fs::write(dir.join("fake-nvml-state"), state).expect("the fake's state is written");
    library
}

/// The same NVML calls as one reading, through nvml-wrapper alone.
fn bare(nvml: &Nvml, devices: u32) -> u64 {
    let mut seen = 0;
    for index in 0..devices {
        let Ok(device) = nvml.device_by_index(index) else {
            continue;
        };
        seen += device.memory_info().map_or(0, |m| m.used);
        seen += device
            .running_compute_processes()
            .map_or(0, |p| p.len() as u64);
        seen += device
            .running_graphics_processes()
            .map_or(0, |p| p.len() as u64);
    }
    seen
}

/// Times `a` and `b` alternately for about `seconds` and returns the median of each, in
/// nanoseconds: both see the same load, so their ratio holds on a shared machine.
fn interleaved(seconds: f64, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < seconds || times_a.len() < 11 {
        let at = Instant::now();
        a();
        let between = Instant::now();
        b();
        times_a.push((between - at).as_nanos() as f64);
        times_b.push(between.elapsed().as_nanos() as f64);
    }
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    (median(&mut times_a), median(&mut times_b))
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut sleepers: Vec<Child> = (0..9)
        .map(|_| {
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .expect("sleep starts")
        })
        .collect();
    let tree: Vec<u32> = std::iter::once(std::process::id())
        .chain(sleepers.iter().map(Child::id))
        .collect();
    let real = std::env::var_os("STEMMON_BENCH_NVML").map(PathBuf::from);
    let library = match &real {
        Some(path) => path.clone(),
        None => fake_library(&stemmon_bench::out_dir().join("fake-nvml"), &tree),
    };

    let mut source = stemmon::readers::GpuSource::open(Some(&library));
    assert_eq!(source.info().missing, None, "the source reads");
    let devices = source.info().devices.len() as u32;
    let nvml = Nvml::builder()
        .lib_path(library.as_os_str())
        .init()
        .expect("nvml-wrapper opens the same library");
    let first = source.read(&tree, &[]).clone();
    eprintln!("gpu_sample: {devices} devices, first reading {first:?}");
    if real.is_none() {
        assert_eq!(devices, 2);
        assert_eq!(
            first.tree_bytes,
            Some(GIB + 200 * MIB + 500 * MIB),
            "the reading sees the tree"
        );
        // Both devices' used memory and the 6 listings.
        assert_eq!(bare(&nvml, devices), 4 * GIB + 6);
    }

    let mut group = c.benchmark_group("gpu_sample");
    group.bench_function("stemmon", |b| {
        b.iter(|| black_box(source.read(black_box(&tree), &[]).tree_bytes))
    });
    group.bench_function("bare", |b| b.iter(|| black_box(bare(&nvml, devices))));
    group.finish();
    let (stemmon_ns, bare_ns) = interleaved(
        3.0,
        || {
            black_box(source.read(&tree, &[]).tree_bytes);
        },
        || {
            black_box(bare(&nvml, devices));
        },
    );
    eprintln!(
        "gpu_sample: stemmon {stemmon_ns:.0} ns, bare NVML calls {bare_ns:.0} ns interleaved: {:.2}x",
        stemmon_ns / bare_ns
    );
    let result = serde_json::json!({
        "pids": tree.len(),
        "devices": devices,
        "library": if real.is_some() { "real" } else { "fake" },
        "interleaved": {"stemmon_ns": stemmon_ns, "bare_ns": bare_ns},
    });
    stemmon_bench::write_result("gpu_sample", &result).expect("the result is written");
    for sleeper in &mut sleepers {
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
    c.final_summary();
}
