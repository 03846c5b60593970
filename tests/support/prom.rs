//! Starts Debian's `prometheus`, `prometheus-pushgateway` and `prometheus-node-exporter`
//! on free loopback ports for `tests/prometheus.rs`, and queries Prometheus's HTTP API.
//! Each server is killed when its handle drops. `.ci/deps` installs the packages.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The three server binaries, as Debian names them.
pub const PROMETHEUS: &str = "prometheus";
pub const PUSHGATEWAY: &str = "prometheus-pushgateway";
pub const NODE_EXPORTER: &str = "prometheus-node-exporter";

/// The binaries of `names` that are not on `PATH`.
pub fn missing(names: &[&'static str]) -> Vec<&'static str> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .copied()
        .filter(|name| !std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
        .collect()
}

/// A port nothing listens on right now (the OS picked it; another process could take
/// it before the server binds, which is rare enough for a test).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("binding a loopback port")
        .port()
}

/// A running server; killed and reaped on drop.
pub struct Server {
    child: Child,
    log: PathBuf,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl Server {
    /// Starts `binary` with `args` (which make it listen on `port`) and waits until
    /// `ready_path` answers 200, at most 30 s. Its output goes to `<log_dir>/<binary>.log`.
    pub fn start(
        binary: &'static str,
        args: &[String],
        port: u16,
        ready_path: &str,
        log_dir: &Path,
    ) -> Server {
        let log = log_dir.join(format!("{binary}.log"));
        let out = fs::File::create(&log).expect("creating a server log");
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary}: {e}"));
        let mut server = Server {
            child,
            log,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let agent = agent();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "{binary} exited ({status}) before it was ready:\n{}",
                    server.log()
                );
            }
            let ready = agent
                .get(&format!("{}{ready_path}", server.url))
                .call()
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "{binary} was not ready within 30 s:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the server printed so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// A Pushgateway on a free port, its state kept in `dir` only.
pub fn pushgateway(dir: &Path) -> Server {
    let port = free_port();
    Server::start(
        PUSHGATEWAY,
        &[
            format!("--web.listen-address=127.0.0.1:{port}"),
            format!(
                "--persistence.file={}",
                dir.join("pushgateway.db").display()
            ),
        ],
        port,
        "/-/ready",
        dir,
    )
}

/// A node_exporter with only the textfile collector, reading `textfile_dir`.
pub fn node_exporter(textfile_dir: &Path, dir: &Path) -> Server {
    let port = free_port();
    Server::start(
        NODE_EXPORTER,
        &[
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--collector.disable-defaults".into(),
            "--collector.textfile".into(),
            format!("--collector.textfile.directory={}", textfile_dir.display()),
        ],
        port,
        "/metrics",
        dir,
    )
}

/// A Prometheus scraping `pushgateway` (job `pushgateway`, `honor_labels`, so the
/// pushed `job` and grouping labels stay) and `node` (job `node`) every second.
pub fn prometheus(pushgateway: &Server, node: &Server, dir: &Path) -> Server {
    let port = free_port();
    let target = |server: &Server| server.url.trim_start_matches("http://").to_owned();
    let config = [
        "global:".to_owned(),
        "  scrape_interval: 1s".into(),
        "  scrape_timeout: 1s".into(),
        "scrape_configs:".into(),
        "  - job_name: pushgateway".into(),
        "    honor_labels: true".into(),
        "    static_configs:".into(),
        format!("      - targets: ['{}']", target(pushgateway)),
        "  - job_name: node".into(),
        "    static_configs:".into(),
        format!("      - targets: ['{}']", target(node)),
    ]
    .join("\n");
    let config_path = dir.join("prometheus.yml");
    fs::write(&config_path, config).unwrap();
    Server::start(
        PROMETHEUS,
        &[
            format!("--config.file={}", config_path.display()),
            format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
        ],
        port,
        "/-/ready",
        dir,
    )
}

/// One series of an instant-query answer: its labels and its value as Prometheus wrote it.
#[derive(Debug, Clone)]
pub struct Series {
    pub labels: serde_json::Map<String, serde_json::Value>,
    pub value: String,
}

impl Series {
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).and_then(|v| v.as_str()).unwrap_or("")
    }
}

/// The answer to the PromQL `query` at the current time, through `/api/v1/query`.
pub fn query(prometheus: &Server, query: &str) -> Vec<Series> {
    let response = agent()
        .get(&format!("{}/api/v1/query", prometheus.url))
        .query("query", query)
        .call()
        .unwrap_or_else(|e| panic!("querying {query:?}: {e}"));
    let status = response.status();
    let body = response.into_body().read_to_string().unwrap();
    assert_eq!(status, 200, "query {query:?} failed: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("no result for {query:?}: {body}"))
        .iter()
        .map(|series| Series {
            labels: series["metric"].as_object().cloned().unwrap_or_default(),
            value: series["value"][1].as_str().unwrap().to_owned(),
        })
        .collect()
}

/// The command-line flags a running server reports: `api_path` is `/api/v1/status`
/// (Pushgateway, under `data.flags`) or `/api/v1/status/flags` (Prometheus, `data`).
pub fn flags(server: &Server, api_path: &str) -> serde_json::Map<String, serde_json::Value> {
    let response = agent()
        .get(&format!("{}{api_path}", server.url))
        .call()
        .unwrap_or_else(|e| panic!("asking {api_path}: {e}"));
    let body = response.into_body().read_to_string().unwrap();
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let data = &json["data"];
    data.get("flags")
        .unwrap_or(data)
        .as_object()
        .cloned()
        .unwrap_or_else(|| panic!("no flags at {api_path}: {body}"))
}

/// Fails unless the Pushgateway's and Prometheus's state files lie under `dir`, the
/// test's own directory: no run sees another's series.
pub fn assert_state_in(dir: &Path, pushgateway: &Server, prometheus: &Server) {
    let under = |flags: &serde_json::Map<String, serde_json::Value>, flag: &str| {
        let value = flags.get(flag).and_then(|v| v.as_str()).unwrap_or_default();
        assert!(
            !value.is_empty() && Path::new(value).starts_with(dir),
            "--{flag}={value:?} is not in the test's directory {}",
            dir.display()
        );
    };
    under(&flags(pushgateway, "/api/v1/status"), "persistence.file");
    under(
        &flags(prometheus, "/api/v1/status/flags"),
        "storage.tsdb.path",
    );
}
